"""Relative L1 distance (docs/algorithm.md §4)."""

import pytest
import torch

from seacache_core import rel_l1
from seacache_core.distance import item_distances


def _x(shape=(2, 3, 4, 5), seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def test_identical_is_zero():
    x = _x()
    assert rel_l1(x, x) == 0.0


@pytest.mark.parametrize("c", [0.5, 1.5, 3.0, -1.0, 0.0])
def test_scaled_copy_gives_abs_c_minus_one(c):
    x = _x()
    assert rel_l1(c * x, x) == pytest.approx(abs(c - 1), rel=1e-6, abs=1e-7)


def test_matches_definition_in_float32():
    cur, prev = _x(seed=1).bfloat16(), _x(seed=2).bfloat16()
    expected = (cur.float() - prev.float()).abs().mean() / prev.float().abs().mean()
    assert rel_l1(cur, prev) == pytest.approx(expected.item(), rel=1e-6)


def test_mismatch_is_inf():
    x = _x()
    assert rel_l1(x[:1], x) == float("inf")
    assert rel_l1(x.double(), x) == float("inf")
    assert rel_l1(torch.empty(x.shape, device="meta"), x) == float("inf")
    assert torch.isinf(item_distances(x.half(), x)).all() and item_distances(x.half(), x).shape == (2,)


def test_several_items_mean_of_per_item():
    prev = _x()
    cur = torch.stack([prev[0] * 1.5, prev[1] * 0.9])
    d = item_distances(cur, prev)
    torch.testing.assert_close(d, torch.tensor([0.5, 0.1]), rtol=1e-5, atol=1e-7)
    # The mean of per-item distances (0.3) is not the distance of the whole tensor.
    assert d.mean().item() == pytest.approx(0.3, rel=1e-5)
    assert d.mean().item() != pytest.approx(rel_l1(cur, prev), rel=1e-3)
