"""The peer comparison's methods, matching and frame metrics (``seacache_testing.peer_comparison``, no ComfyUI),
and bench_peers' smoke runs through ComfyUI (``python -m benchmarks.bench_peers --quick``)."""

from __future__ import annotations

import math

import pytest
import torch

from seacache_testing import peer_comparison as peers
from seacache_testing import proxy_natural
from tests.test_benchmarks import bench


def test_natural_frames_invert_the_pca_patch_map():
    """Decoding a natural-proxy latent and encoding the frames again gives the latent back (the decode is exact)."""
    latent = torch.randn(1, proxy_natural.CHANNELS, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    frames = peers.natural_frames(latent)
    assert frames.shape == (3, 3, 8 * proxy_natural.PATCH, 8 * proxy_natural.PATCH)
    again = proxy_natural.encode(frames).unsqueeze(0).transpose(1, 2)
    torch.testing.assert_close(again, latent, atol=1e-4, rtol=1e-4)


def test_ssim_is_one_for_equal_frames_and_falls_with_noise():
    frames = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(peers.ssim(frames, frames), torch.ones(2), atol=1e-5)
    noisy = (frames + 0.2 * torch.randn(frames.shape, generator=torch.Generator().manual_seed(2))).clamp(0, 1)
    values = peers.ssim(noisy, frames)
    assert (values < 0.9).all() and (values > 0).all()


def test_a_pair_is_interpolated_between_the_runs_that_bracket_the_target():
    runs = [(14.0, {"error": 0.04, "psnr": 30.0}), (16.0, {"error": 0.01, "psnr": 34.0}), (20.0, {"error": 0.001, "psnr": 40.0})]
    value, bracketed = peers.at_target(runs, 15.0)
    assert bracketed and value["error"] == pytest.approx(0.02) and value["psnr"] == pytest.approx(32.0)
    value, bracketed = peers.at_target(runs, 21.0)  # above every run: the nearest, never extrapolated
    assert not bracketed and value == runs[2][1]
    value, bracketed = peers.at_target(runs, 16.0)
    assert bracketed and value["error"] == pytest.approx(0.01)


def test_the_calibration_grid_is_log_spaced_between_its_ends():
    grid = peers.log_grid(0.1, 1.0, 3)
    assert grid[0] == 0.1 and grid[-1] == 1.0 and grid[1] == pytest.approx(math.sqrt(0.1), rel=1e-3)


def test_bench_peers_quick_through_comfyui():
    """The smoke run compares every method on the natural proxy through ComfyUI; fixed interval computes exactly
    its count of steps, so both of its targets are bracketed."""
    import os

    if not os.environ.get("COMFYUI_PATH", "").strip():
        pytest.skip("COMFYUI_PATH is not set: bench_peers runs through ComfyUI")
    out = bench("bench_peers", "--quick", comfyui=True)
    for label in ("SeaCache (defaults)", "SeaCache, gate sea", "EasyCache (core)", "LazyCache (core)", "fixed interval"):
        assert f"| Cosmos3 natural, shift 5, T2V | 4 | {label} |" in out
        assert f"| Cosmos3 natural, shift 5, T2V | 6 | {label} |" in out
    assert "| Cosmos3 natural, shift 5, T2V | 4 | fixed interval |" in out
    fixed = [line for line in out.splitlines() if "| fixed interval |" in line]
    assert all(line.rstrip().endswith("| 2/2 |") for line in fixed)


def test_a_setting_is_read_off_the_calibration_curve():
    curve = [(0.01, 30.0), (0.1, 20.0), (1.0, 14.0), (10.0, 14.0)]
    assert peers.setting_at(curve, 25.0) == pytest.approx(math.sqrt(0.1 * 0.01), rel=1e-3)
    assert peers.setting_at(curve, 40.0) == 0.01  # even the first setting computes fewer
    assert peers.setting_at(curve, 12.0) == 1.0  # none computes as few: the first of the fewest


def test_saved_rows_of_a_method_measured_again_replace_the_earlier_ones():
    first = [dict(cell="c", method="uncached", setting=0), dict(cell="c", method="easycache", setting=0.1),
             dict(cell="c", method="easycache", setting=0.2), dict(cell="c", method="fixed", setting=15)]
    again = [dict(cell="c", method="uncached", setting=0), dict(cell="c", method="easycache", setting=0.3)]
    rows = peers.replaced([first, again])
    assert [(r["method"], r["setting"]) for r in rows] == [("uncached", 0), ("easycache", 0.3), ("fixed", 15)]


def test_a_seacache_variant_is_parsed_from_the_command_line():
    method = peers.variant("early:start_percent=0.15,warmup_steps=4,gate=sea")
    assert method.name == "early" and method.label == "SeaCache, start_percent=0.15, warmup_steps=4, gate=sea"
    assert method.settings == peers.METHODS[0].settings


def _rows(cell, method, errors, fulls=(16.0, 19.0)):
    """Two runs of ``method`` bracketing 17.5 calls on two pairs, with the given per-pair errors at both."""
    return [dict(cell=cell, method=method, setting=i, pairs=[0, 1], full=[f, f],
                 metrics=[{"error": e} for e in errors]) for i, f in enumerate(fulls)]


def test_the_summary_compares_the_default_with_the_best_peer_per_mode():
    rows = []
    for mode, scale in (("T2V", 1.0), ("I2V", 2.0)):
        cell = f"P, shift 3, {mode}"
        rows += [dict(cell=cell, method="uncached", setting=0, pairs=[0, 1], full=[35, 35], metrics=[{}, {}])]
        rows += _rows(cell, "seacache", [0.01 * scale, 0.02 * scale])
        rows += _rows(cell, "easycache", [0.04 * scale, 0.08 * scale])
        rows += _rows(cell, "fixed", [0.02 * scale, 0.04 * scale])
    text = peers.summary(rows, {"seacache": "SeaCache", "easycache": "EasyCache (core)", "fixed": "fixed interval"})
    line = next(l for l in text.splitlines() if l.startswith("| P, shift 3 |"))
    assert "0.0141 / 0.0283" in line  # the default's geometric-mean error, T2V / I2V
    assert "T2V 0.50 [0.50, 0.50] (fixed interval)" in line and "I2V 0.50 [0.50, 0.50] (fixed interval)" in line


def test_bench_peers_timing_quick_through_comfyui():
    """The wall-time mode prints, per method at its middle calibrated setting, its calls and wall-time speedups."""
    import os

    if not os.environ.get("COMFYUI_PATH", "").strip():
        pytest.skip("COMFYUI_PATH is not set: bench_peers runs through ComfyUI")
    out = bench("bench_peers", "--quick", "--timing", "--archs", "cosmos3", comfyui=True)
    assert "| cache | full calls of 35 | calls speedup | wall-time speedup |" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line.endswith("x |")]
    assert [row.split(" | ")[0] for row in rows] == ["| seacache", "| seacache_sea", "| easycache", "| lazycache", "| fixed"]
    assert all(float(row.split(" | ")[2].rstrip("x")) > 1.0 for row in rows)  # each computes fewer calls than 35
