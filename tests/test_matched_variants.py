"""The variant comparison of bench_fp8 and bench_warmup (``seacache_testing/matched_variants.py``, no ComfyUI): the
benchmark-only "order + 1 computed steps behind a reuse" rule, and the temporal error of a final latent."""

from __future__ import annotations

import pytest
import torch

from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing import matched_variants as mv


def decisions(order: int) -> list[str]:
    """Reasons of a run that would reuse every free step (threshold far above any distance, no cap)."""
    run = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1, order=order),
                      torch.linspace(0.9, 0.1, 9).tolist() + [0.0])
    latent = torch.randn(1, 2, 3, 4, 4, generator=torch.Generator().manual_seed(0))
    for sigma in run.sigmas[:6]:
        verdict = run.decide(latent, sigma, ["c"])
        if run.predict(verdict, latent) is None:
            run.commit(verdict, latent)
    return [r.reason or r.decision for r in run.stats.records]


@pytest.mark.parametrize("order", [0, 1, 2])
def test_full_history_reuses_only_behind_order_plus_one_computed_steps(order):
    assert decisions(order) == ["warmup"] + ["reused"] * 5  # the shipped rule: one computed step is enough
    with mv.full_history():
        assert decisions(order) == ["warmup"] + ["no_history"] * order + ["reused"] * (5 - order)
    assert decisions(order) == ["warmup"] + ["reused"] * 5  # restored


def test_temporal_error_reads_the_change_between_frames_not_the_frames():
    base, drift = torch.randn(2, 1, 3, 1, 4, 4, generator=torch.Generator().manual_seed(1))
    reference = base + 0.05 * torch.arange(5.0).reshape(1, 1, 5, 1, 1) * drift  # a slow motion over 5 frames
    shifted = reference + 0.1  # the same offset on every frame: an error, but no flicker
    flicker = reference.clone()
    flicker[:, :, 1::2] += 0.1  # every other frame: flicker
    still = mv.errors(shifted, {"ref": reference}, None)
    assert still["error_ref"] > 0.05 and still["temporal_ref"] < 1e-6
    flickering = mv.errors(flicker, {"ref": reference}, None)
    assert flickering["temporal_ref"] > 3 * flickering["error_ref"]
