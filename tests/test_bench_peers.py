"""The peer comparison's methods, calibration aims, matching, frame metrics and figure
(``seacache_testing.peer_comparison``, ``spectrum_stack``, ``peer_figure``, ``cachedit_packs``' schedule; no
ComfyUI), and bench_peers' smoke runs through ComfyUI (``python -m benchmarks.bench_peers --quick``)."""

from __future__ import annotations

import math

import pytest
import torch

from seacache_testing.spectrum_forecast import spectrum_schedule
from seacache_testing import peer_comparison as peers
from seacache_testing import cachedit_packs, peer_figure, proxy_natural, spectrum_stack
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


QUICK_TARGETS = ("5 (2x)", "3.33 (3x)", "2.5 (4x)")  # 17.5, 11.7 and 8.75 of 35 scaled to the smoke run's 10 steps


def test_bench_peers_quick_through_comfyui():
    """The smoke run compares every method on the natural proxies through ComfyUI at 2x, 3x and 4x, calibrating
    none; fixed interval computes exactly its planned counts, so all its targets are bracketed."""
    import os

    if not os.environ.get("COMFYUI_PATH", "").strip():
        pytest.skip("COMFYUI_PATH is not set: bench_peers runs through ComfyUI")
    out = bench("bench_peers", "--quick", comfyui=True)
    assert "calibrated " not in out
    labels = ("SeaCache (defaults)", "SeaCache, gate sea", "SeaCache, no reuse cap", "SeaCache, speedup",
              "EasyCache (core)", "LazyCache (core)", "fixed interval")
    for label in (*labels, "Spectrum, stack seam, w 1", "Spectrum, stack seam, w 0.5"):
        for target in QUICK_TARGETS:
            assert f"| Cosmos3 natural, shift 5, T2V | {target} | {label} |" in out
    for label in (*labels, "SeaCache, residual order 2"):
        assert f"| Wan 2.1 natural, shift 5, T2V | {QUICK_TARGETS[0]} | {label} |" in out
    for planned in ("| fixed interval |", "| SeaCache, speedup |"):  # both planned to bracket every target
        rows = [line for line in out.splitlines() if line.startswith(("| Cosmos3", "| Wan")) and planned in line]
        assert len(rows) == 6 and all(line.rstrip().endswith("| 2/2 |") for line in rows), rows
    assert "Cosmos3 natural, shift 5, T2V: SeaCache Apply speedup 2.5: 4.0 of 10 full calls (4-4)" in out


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
    assert method.settings == peers.METHODS[0].settings and method.planned is None
    fast = peers.variant("sea_fast:gate=sea,speedup")  # a bare speedup: the speedup method's planned runs
    assert (fast.knob, fast.planned, fast.label) == ("speedup", peers.asked_speeds, "SeaCache, gate=sea, speedup")


def _rows(cell, method, errors, fulls=(16.0, 19.0)):
    """Two runs of ``method`` bracketing 17.5 calls on two pairs, with the given per-pair errors at both."""
    return [dict(cell=cell, method=method, setting=i, pairs=[0, 1], full=[f, f],
                 metrics=[{"error": e} for e in errors]) for i, f in enumerate(fulls)]


def test_the_summary_compares_the_best_seacache_with_the_best_reached_peer_per_mode():
    rows = []
    for mode, scale in (("T2V", 1.0), ("I2V", 2.0)):
        cell = f"P, shift 3, {mode}"
        rows += [dict(cell=cell, method="uncached", setting=0, pairs=[0, 1], full=[35, 35], metrics=[{}, {}])]
        rows += _rows(cell, "seacache", [0.01 * scale, 0.02 * scale])
        rows += _rows(cell, "easycache", [0.04 * scale, 0.08 * scale])
        rows += _rows(cell, "fixed", [0.02 * scale, 0.04 * scale])
        rows += _rows(cell, "capped", [0.001, 0.001], fulls=(20.0, 19.0))  # never as few as 17.5 calls
    labels = {"seacache": "SeaCache", "easycache": "EasyCache (core)", "fixed": "fixed interval", "capped": "capped"}
    text = peers.summary(rows, labels, 17.5)
    assert text.splitlines()[0] == "Error at 17.5 (2x) full calls of 35, T2V / I2V:"
    line = next(l for l in text.splitlines() if l.startswith("| P, shift 3 |"))
    assert "| 0.0141 / 0.0283 |" in line  # the default's geometric-mean error, T2V / I2V
    assert line.endswith("| - / - | T2V 0.50 [0.50, 0.50] (SeaCache / fixed interval); "
                         "I2V 0.50 [0.50, 0.50] (SeaCache / fixed interval) | - |")  # capped: out of reach; no Spectrum


def test_the_summary_names_the_best_spectrum_apart():
    cell = "P, shift 3, T2V"
    rows = [dict(cell=cell, method="uncached", setting=0, pairs=[0, 1], full=[35, 35], metrics=[{}, {}])]
    rows += _rows(cell, "seacache", [0.01, 0.02]) + _rows(cell, "fixed", [0.02, 0.04])
    rows += _rows(cell, "spectrum_stack_w1", [0.04, 0.08]) + _rows(cell, "spectrum_stack_w05", [0.03, 0.03])
    line = peers.summary(rows, {"seacache": "SeaCache"}).splitlines()[-1]
    assert line.endswith("| T2V 0.50 [0.50, 0.50] (SeaCache / fixed) | T2V 0.47 [0.24, 0.93] (SeaCache / spectrum_stack_w05) |")


def test_the_table_marks_a_method_that_does_not_reach_a_target():
    cell = "P, shift 3, T2V"
    rows = [dict(cell=cell, method="uncached", setting=0, pairs=[0, 1], full=[35, 35], metrics=[{}, {}])]
    rows += _rows(cell, "seacache", [0.01, 0.02]) + _rows(cell, "fixed", [0.02, 0.04], fulls=(20.0, 19.0))
    lines = peers.table(rows, {}, (17.5,)).splitlines()
    assert lines[0].startswith("| proxy, shift, mode | full calls of 35 | cache |")
    assert lines[2] == "| P, shift 3, T2V | 17.5 (2x) | seacache | 0.0141 | - | - | - | - | 2/2 |"
    assert lines[3] == "| P, shift 3, T2V | 17.5 (2x) | fixed | 0.0283 | - | - | - | - | 0/2 out of reach |"


def test_the_frontier_has_a_column_per_cell_and_target():
    cell = "P, shift 3, T2V"
    rows = [dict(cell=cell, method="uncached", setting=0, pairs=[0, 1], full=[35, 35], metrics=[{}, {}])]
    rows += _rows(cell, "seacache", [0.01, 0.02], fulls=(16.0, 19.0)) + _rows(cell, "fixed", [0.02, 0.02], fulls=(8.0, 12.0))
    lines = peers.frontier(rows, {"fixed": "fixed interval"}, (17.5, 8.75)).splitlines()
    assert lines[0] == "| cache | P, shift 3, T2V, 17.5 (2x) | P, shift 3, T2V, 8.75 (4x) |"
    assert lines[2:] == ["| seacache | 0.0141 | - |", "| fixed interval | - | 0.0200 |"]


def test_the_headline_pools_a_proxys_cells_and_compares_speedup_with_each_familys_best():
    rows = []
    errors = {"seacache_speedup": (0.01, 0.04), "spectrum_a": (0.04, 0.08), "spectrum_b": (0.02, 0.32),
              "fixed": (0.005, 0.16), "capped": (0.001, 0.001)}  # per cell (shift 3, shift 10), both pairs alike
    for i, shift in enumerate((3, 10)):
        cell = f"P, shift {shift}, T2V"
        rows += [dict(cell=cell, method="uncached", setting=0, pairs=[0, 1], full=[35, 35], metrics=[{}, {}])]
        for method, (a, b) in errors.items():
            e = (a, b)[i]
            rows += _rows(cell, method, [e, e], fulls=(20.0, 19.0) if method == "capped" else (16.0, 19.0))
    labels = {"spectrum_a": "Spectrum A", "fixed": "fixed interval"}
    lines = peers.headline(rows, labels, (17.5,)).splitlines()
    assert len(lines) == 3
    cells = [c.strip() for c in lines[2].strip("|").split("|")]
    # geometric means over both cells: speedup 0.02; Spectrum A 0.0566 (B, 0.08, is lower at shift 3 only);
    # fixed interval 0.0283 (the capped method, lowest, never reaches 17.5 calls)
    assert cells[:5] == ["P", "17.5 (2x)", "0.0200", "Spectrum A: 0.0566", "fixed interval: 0.0283"]
    # per-pair ratios 0.25, 0.25, 0.5, 0.5 -> 0.35, lower in both cells; 2, 2, 0.25, 0.25 -> 0.71, lower in one
    assert cells[5].startswith("0.35 [") and cells[5].endswith("], 2/2")
    assert cells[6].startswith("0.71 [") and cells[6].endswith("], 1/2")
    # per cell nothing is pooled: shift 3's speedup 0.01 against Spectrum B's 0.02 there (A's 0.04) and fixed's 0.005
    per_cell = peers.headline(rows, labels, (17.5,), per_cell=True).splitlines()
    assert per_cell[0].startswith("| proxy, shift, mode |") and "pairs lower" in per_cell[0] and len(per_cell) == 4
    cells = [c.strip() for c in per_cell[2].strip("|").split("|")]
    assert cells[:5] == ["P, shift 3, T2V", "17.5 (2x)", "0.0100", "spectrum_b: 0.0200", "fixed interval: 0.0050"]
    assert cells[5].startswith("0.50 [0.50, 0.50]") and cells[5].endswith("], 2/2")
    assert cells[6].startswith("2.00 [2.00, 2.00]") and cells[6].endswith("], 0/2")
    # the README's figure draws the same pooled errors, one point per target reached
    pooled = peer_figure.pooled_curves(rows, (17.5,), 35)["P, all shifts and modes"]
    assert pooled["seacache_speedup"] == [(2.0, pytest.approx(0.02))] and "capped" not in pooled
    assert peer_figure.draw(rows, labels, (17.5,), 35, pooled=True).size[0] == peer_figure.PANEL[0]  # one panel


def test_calibrated_settings_aim_above_and_below_each_target():
    curve = [(0.01, 30.0), (0.1, 20.0), (1.0, 10.0), (10.0, 10.0)]
    settings = peers.bracketing_settings(curve, (15.0,), margin=0.1)
    expected = sorted(peers.setting_at(curve, goal) for goal in (16.5, 13.5))
    assert settings == tuple(expected) and settings[0] < settings[1]
    assert peers.bracketing_settings(curve, (15.0, 5.0), margin=0.1) == (*expected, 1.0)  # 5 out of reach


def test_planned_methods_need_no_calibration():
    assert peers.interval_counts(35, peers.TARGETS) == (8, 9, 11, 12, 17, 18)
    speeds = peers.asked_speeds(35, peers.TARGETS)
    assert [math.floor(35 / s + 0.5) for s in speeds] == [18, 17, 12, 11, 9, 8]  # the speed controller's budget
    fixed = next(m for m in peers.METHODS if m.name == "fixed")
    assert fixed.quick_settings(10, (5.0, 2.5)) == (2, 3, 5)
    easycache = next(m for m in peers.METHODS if m.name == "easycache")
    assert easycache.quick_settings(10, (5.0,)) == (easycache.settings[7], easycache.settings[-1])


def test_spectrum_alphas_bracket_2x_3x_and_4x():
    alphas = spectrum_stack.planned_alphas(35, peers.TARGETS)
    assert [spectrum_stack.computed_calls(35, a) for a in alphas] == [18, 17, 12, 11, 9, 8]
    assert spectrum_stack.computed_calls(35, 0.75) == 12  # the published setting: 12 of 35 (docs/spectrum.md)
    for method in peers.COSMOS3_METHODS:
        assert method.planned(35, peers.TARGETS) == alphas


def test_cachedit_wan_intervals_bracket_2x_3x_and_4x_from_its_schedule():
    """Cache-DiT's Wan node computes 4 warm-up calls, then every interval-th: at most 19 of 35 (interval 2, the
    node's minimum), so 2x is bracketed by 19 and 14 calls; intervals 8 to 10 all compute 7."""
    peer = cachedit_packs.CACHEDIT_PEERS[0]
    assert [peer.computed_calls(35, i) for i in peer.grid] == [19, 14, 11, 10, 9, 8, 7, 7, 7]
    assert peer.planned(35, peers.TARGETS) == (2, 3, 4, 6, 7)
    assert peer.planned(10, (5.0, 2.5)) == (4, 6, 10)  # the smoke run: 5 of 10 bracketed, 2.5 out of reach (4)
    assert peer.inputs(3.0) == {"enable": True, "print_summary": False, "warmup_steps": 4, "skip_interval": 3}
    with pytest.raises(ValueError, match="whole number of calls, got 2.5"):
        peer.inputs(2.5)


def _ridge_forecast(steps, values, step):
    """Spectrum's Chebyshev ridge forecast written out: tau = step / 25 - 1, T_0..T_4, (X^T X + 0.1 I)^-1 X^T y."""
    taus = torch.tensor([s / 25.0 - 1.0 for s in steps] + [step / 25.0 - 1.0], dtype=torch.float64)
    basis = [torch.ones_like(taus), taus]
    for _ in range(3):
        basis.append(2 * taus * basis[-1] - basis[-2])
    x = torch.stack(basis, dim=1)
    design, at = x[:-1], x[-1]
    y = torch.stack([v.double().flatten() for v in values])
    coefficients = torch.linalg.solve(design.T @ design + 0.1 * torch.eye(5, dtype=torch.float64), design.T @ y)
    return (at @ coefficients).reshape(values[0].shape)


class _StackCall:
    """A fake generator stack: its output at each step is a fixed random tensor; it records the steps it ran."""

    def __init__(self, steps):
        generator = torch.Generator().manual_seed(5)
        self.outputs = [torch.randn(2, 3, 4, generator=generator) for _ in range(steps)]
        self.sigmas = torch.linspace(1.0, 0.0, steps + 1)
        self.ran = []

    def inputs(self, step, branches=(1, 0)):
        from types import SimpleNamespace

        return SimpleNamespace(transformer_options=dict(sample_sigmas=self.sigmas, sigmas=self.sigmas[step:step + 1],
                                                        cond_or_uncond=list(branches)))

    def executor(self, step):
        def run(hidden, inputs):
            self.ran.append(step)
            return self.outputs[step].clone()
        return run


@pytest.mark.parametrize("blend", [1.0, 0.5])
def test_spectrum_stack_forecasts_the_stack_output_on_its_schedule(blend):
    """Computed calls follow Spectrum's schedule; a skipped call returns w times the Chebyshev ridge forecast over
    every computed output so far plus 1 - w times the line through the last two (docs/spectrum.md 7, 10, 11)."""
    steps, alpha = 20, 1.0
    stack, wrapper = _StackCall(steps), spectrum_stack.SpectrumStack(blend, alpha)
    hidden = torch.zeros(2, 3, 4)
    schedule = spectrum_schedule(steps, 5, 2, alpha)
    for step in range(steps):
        out = wrapper(stack.executor(step), hidden, stack.inputs(step))
        computed = [s for s in stack.ran if s < step]
        if schedule[step]:
            assert stack.ran[-1] == step and torch.equal(out, stack.outputs[step])
            continue
        assert step not in stack.ran
        values = [stack.outputs[s] for s in computed]
        (a, ya), (b, yb) = (computed[-2], values[-2]), (computed[-1], values[-1])
        line = yb + (step - b) / (b - a) * (yb - ya)
        expected = blend * _ridge_forecast(computed, values, step) + (1 - blend) * line.double()
        torch.testing.assert_close(out.double(), expected, atol=1e-5, rtol=1e-5)
    assert stack.ran == [s for s in range(steps) if schedule[s]]


def test_spectrum_stack_starts_afresh_each_run_and_per_batch_composition():
    steps = 12
    stack, wrapper = _StackCall(steps), spectrum_stack.SpectrumStack(1.0, 4.0)
    hidden = torch.zeros(2, 3, 4)
    for step in range(steps):
        wrapper(stack.executor(step), hidden, stack.inputs(step))
    first = list(stack.ran)
    wrapper(stack.executor(0), hidden, stack.inputs(0, branches=(0,)))  # the empty prompt alone: its own run
    assert stack.ran[len(first):] == [0]
    del stack.ran[len(first):]
    for step in range(steps):  # a second run of the batched call
        wrapper(stack.executor(step), hidden, stack.inputs(step))
    assert stack.ran == first + first


def test_the_figure_has_one_panel_per_cell_and_a_point_per_run():
    rows = [dict(cell=c, method="uncached", setting=0, pairs=[0], full=[35.0], metrics=[{}]) for c in "AB"]
    rows += [dict(cell="A", method="m", setting=s, pairs=[0, 1], full=[f, f], metrics=[{"error": e}, {"error": e}])
             for s, f, e in ((1, 17.5, 0.01), (2, 8.75, 0.1), (3, 35.0, 0.0))]
    rows += [dict(cell="B", method="n", setting=1, pairs=[0], full=[11.0], metrics=[{"error": 0.02}])]
    data = peer_figure.curves(rows, 35)
    assert list(data) == ["A", "B"] and list(data["A"]) == ["m"]  # the exact run (error 0) is left out
    assert data["A"]["m"] == [(2.0, pytest.approx(0.01)), (4.0, pytest.approx(0.1))]
    assert data["B"]["n"] == [(35 / 11, pytest.approx(0.02))]
    image = peer_figure.draw(rows, {"m": "method m"}, peers.TARGETS, 35)
    assert image.size == (2 * peer_figure.PANEL[0], peer_figure.PANEL[1] + 22 + 16)
    assert len(image.getcolors(1 << 16)) > 2  # more than background and axes


def test_bench_peers_timing_quick_through_comfyui():
    """The wall-time mode prints, per method at its middle calibrated setting, its calls and wall-time speedups."""
    import os

    if not os.environ.get("COMFYUI_PATH", "").strip():
        pytest.skip("COMFYUI_PATH is not set: bench_peers runs through ComfyUI")
    out = bench("bench_peers", "--quick", "--timing", "--archs", "cosmos3", comfyui=True)
    assert "| cache | full calls of 35 | calls speedup | wall-time speedup |" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and line.endswith("x |")]
    assert [row.split(" | ")[0][2:] for row in rows] == [m.name for m in (*peers.METHODS, *peers.COSMOS3_METHODS)]
    assert all(float(row.split(" | ")[2].rstrip("x")) > 1.0 for row in rows)  # each computes fewer calls than 35
