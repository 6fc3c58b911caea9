"""Relative L1 distance per item (docs/algorithm.md §4)."""

import pytest
import torch

from seacache_core import item_distances


def _x(shape=(2, 3, 4, 5), seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def test_identical_is_zero():
    x = _x()
    assert item_distances(x, x).tolist() == [0.0, 0.0]


@pytest.mark.parametrize("c", [0.5, 1.5, 3.0, -1.0, 0.0])
def test_scaled_copy_gives_abs_c_minus_one(c):
    x = _x()
    torch.testing.assert_close(item_distances(c * x, x), torch.full((2,), abs(c - 1.0)), rtol=1e-6, atol=1e-7)


def test_matches_definition_in_float32():
    cur, prev = _x(seed=1).bfloat16(), _x(seed=2).bfloat16()
    expected = (cur.float() - prev.float()).abs().flatten(1).mean(1) / prev.float().abs().flatten(1).mean(1)
    torch.testing.assert_close(item_distances(cur, prev), expected, rtol=1e-6, atol=0)


def test_mismatch_is_inf():
    x = _x()
    for other in (x[:1], x.double(), x.half()):
        d = item_distances(other, x)
        assert torch.isinf(d).all() and d.shape == (other.shape[0],)
    on_meta = item_distances(torch.empty(x.shape, device="meta"), x)  # another device: +inf there, no transfer
    assert on_meta.device.type == "meta" and on_meta.shape == (2,)


def test_several_items_mean_of_per_item():
    prev = _x()
    cur = torch.stack([prev[0] * 1.5, prev[1] * 0.9])
    d = item_distances(cur, prev)
    torch.testing.assert_close(d, torch.tensor([0.5, 0.1]), rtol=1e-5, atol=1e-7)
    # The mean of per-item distances (0.3) is not the distance of the whole batch as one item.
    assert d.mean().item() == pytest.approx(0.3, rel=1e-5)
    assert d.mean().item() != pytest.approx(float(item_distances(cur.flatten()[None], prev.flatten()[None])), rel=1e-3)
