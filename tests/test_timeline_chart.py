"""The SeaCache Stats renderings (nodes/seacache/chart.py) on real run reports; no ComfyUI needed.

Reports come from a real ``SeaCacheRun`` driven over a schedule with a fake stack, built by
``SeaCacheRun.report`` exactly as the ComfyUI wrappers publish them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing.seacache_host import run_stack

STEPS = 12
SIGMAS = torch.linspace(1.0, 0.0, STEPS + 1).tolist()  # ComfyUI style: the final sigma ends the schedule
KEYS = ["cond0/0", "uncond0/0"]
BACKGROUND = (24, 24, 28)
RED = (231, 76, 60)
WIDTH, HEIGHT = 640, 240
PLOT_TOP, PLOT_LEFT = 28, 40


@pytest.fixture(scope="module")
def chart(import_pack_module):
    return import_pack_module("nodes.seacache.chart")


def run_report(threshold: float, max_consecutive: int = -1, status: str = "completed") -> dict:
    """One CFG run (cond + uncond batched in each call) over latents drifting ever more slowly."""
    gen = torch.Generator().manual_seed(0)
    base, drift = torch.randn(2, 4, 3, 8, 8, generator=gen), torch.randn(2, 4, 3, 8, 8, generator=gen)
    run = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=threshold, max_consecutive=max_consecutive), SIGMAS)
    for step in range(STEPS):
        hidden = torch.full((2, 5, 8), 1.0 - SIGMAS[step])
        run_stack(run, lambda h: h * 2.0 + 1.0, hidden, base + 0.02 * step * drift, SIGMAS[step], KEYS)
    report = run.report(status)
    run.release()
    return report


# threshold 0 never reuses; 10 with no cap reuses every step it may; 0.1 mixes computed and reused steps
CASES = {"never": (0.0,), "always": (10.0,), "mixed": (0.1,)}


@pytest.fixture(scope="module", params=sorted(CASES))
def report(request):
    return run_report(*CASES[request.param])


def counts(report: dict) -> dict:
    return {kind: sum(r["decision"] == kind for r in report["records"]) for kind in ("computed", "reused", "forced")}


def test_cases_cover_every_combination():
    assert counts(run_report(0.0)) == {"computed": STEPS - 2, "reused": 0, "forced": 2}
    assert counts(run_report(10.0)) == {"computed": 0, "reused": STEPS - 2, "forced": 2}
    mixed = counts(run_report(0.1))
    assert mixed["computed"] > 0 and mixed["reused"] > 0 and mixed["forced"] == 2


def test_summary_text_states_status_steps_threshold_and_counts(chart, report):
    text = chart.summary_text(report)
    n = counts(report)
    ran = n["computed"] + n["forced"]
    lines = text.splitlines()
    assert lines[0] == f"SeaCache run completed over {STEPS} steps (threshold {report['threshold']}):"
    assert lines[1].startswith(f"SeaCache: {STEPS} calls, {ran} ran the stack, {n['reused']} reused, ")
    assert f"estimated stack speedup {STEPS / ran:.2f}x" in lines[1]
    assert lines[2] == "forced: warmup 1, end 1"
    letters = {"computed": "C", "reused": "R", "forced": "F"}
    assert lines[3].endswith(" ".join(letters[r["decision"]] for r in report["records"]))


def test_summary_text_names_calls_that_ran_outside_the_gate(chart, report):
    assert "guidance" not in chart.summary_text(report) and "missed" not in chart.summary_text(report)
    lines = chart.summary_text({**report, "guidance_calls": 12, "guidance_followed": 10, "guidance_reused": 4,
                                "uncached_calls": 1, "seam": "block stack"}).splitlines()
    assert lines[-3:] == ["guidance calls: 12 (10 followed their step's call, 4 of them reused; 2 ran plain)",
                          "calls that missed the seam (ran whole): 1", "residual boundary: block stack"]


def test_summary_text_says_why_caching_stopped(chart, report):
    assert "stopped" not in chart.summary_text({**report, "stopped": None})
    text = chart.summary_text({**report, "stopped": "at step 4: RuntimeError: boom", "uncached_calls": 8})
    assert text.splitlines()[-1] == "caching stopped at step 4: RuntimeError: boom; the rest of the run was computed whole"


def test_summary_text_of_a_failed_run(chart):
    text = chart.summary_text(run_report(0.1, status="failed"))
    assert text.startswith(f"SeaCache run failed over {STEPS} steps (threshold 0.1):\nSeaCache: {STEPS} calls, ")


def _has(pixels: np.ndarray, color) -> np.ndarray:
    return (pixels == np.array(color, dtype=np.uint8)).all(axis=-1)


def test_render_timeline_draws_one_bar_per_record(chart, report):
    img = chart.render_timeline(report, WIDTH, HEIGHT)
    assert img.mode == "RGB" and img.size == (WIDTH, HEIGHT)
    pixels = np.asarray(img)
    n = counts(report)
    colors = chart.COLORS
    assert colors["reused"] == (46, 204, 113)

    # the plot area: below the header and legend (text up to y ~20), right of the "thr" label, down to the axis
    bar_any = np.zeros(pixels.shape[:2], dtype=bool)
    for color in colors.values():
        bar_any |= _has(pixels, color)
    base = int(np.flatnonzero(bar_any.any(axis=1)).max())  # every bar ends on the axis row
    plot = np.zeros(pixels.shape[:2], dtype=bool)
    plot[PLOT_TOP : base + 1, PLOT_LEFT:] = True
    for kind, color in colors.items():
        assert bool((_has(pixels, color) & plot).any()) == (n[kind] > 0), (kind, n)
    red = _has(pixels, RED) & plot
    assert red.any(), "dashed threshold line missing"
    line_row = int(red.sum(axis=1).argmax())
    xs = np.flatnonzero(red[line_row])
    assert len(xs) > 50 and (np.diff(xs) > 1).any()  # across the plot, dashed
    assert PLOT_TOP < line_row < base

    # bars in the order of the records: one run of pixels each on the axis row, in the record's color
    runs, start = [], None
    for x in range(WIDTH + 1):
        color = tuple(int(v) for v in pixels[base, x]) if x < WIDTH else None
        kind = next((k for k, c in colors.items() if c == color), None)
        if start is not None and kind != start[1]:
            runs.append((start[0], x - 1, start[1]))
            start = None
        if kind is not None and start is None:
            start = (x, kind)
    assert [kind for _, _, kind in runs] == [r["decision"] for r in report["records"]]

    # a bar's height is its accumulated distance relative to the threshold (dashed line at 1)
    checked = 0
    for (x0, x1, kind), record in zip(runs, report["records"]):
        top = int(np.flatnonzero(_has(pixels[:, (x0 + x1) // 2], colors[kind])).min())
        acc, threshold = record["accumulated"], report["threshold"]
        if acc is None or threshold == 0:
            assert base - top <= 4  # a stub: no distance to show
            continue
        rel = acc / threshold
        if rel < 0.95:
            assert top > line_row, (record, top, line_row)
            checked += 1
        elif rel > 1.05:
            assert top <= line_row, (record, top, line_row)
            checked += 1
    assert checked >= (STEPS - 3 if report["threshold"] > 0 else 0)


def test_no_report_renders_the_no_run_message(chart):
    assert "no run recorded" in chart.summary_text(None)
    for empty in (None, {"records": []}):
        img = chart.render_timeline(empty, 320, 120)
        assert img.mode == "RGB" and img.size == (320, 120)
        pixels = np.asarray(img)
        drawn = ~_has(pixels, BACKGROUND)
        assert drawn.any(), "the 'no run recorded yet' text is missing"
        ys = np.flatnonzero(drawn.any(axis=1))
        assert ys.min() >= 120 // 2 - 2  # the message sits at mid height, nothing else is drawn
        assert not _has(pixels, RED).any()
        for color in chart.COLORS.values():
            assert not _has(pixels, color).any()


def test_the_report_to_the_frontend_carries_the_chart_colors(chart, report):
    """The Stats node's UI report is the run's report plus the Pillow chart's colors as CSS hex; web/seacache.js
    draws with those and writes none of its own (one home: nodes/seacache/chart.py)."""
    sent = chart.frontend_report(report)
    assert {k: v for k, v in sent.items() if k not in ("colors", "note")} == report
    assert sent.get("note") == chart.no_reuse_note(report)
    assert sent["colors"] == {"computed": "#4287f5", "reused": "#2ecc71", "forced": "#8c8c96", "threshold": "#e74c3c"}
    assert sent["colors"] == {k: "#%02x%02x%02x" % rgb for k, rgb in {**chart.COLORS, "threshold": chart.THRESHOLD_COLOR}.items()}
    assert chart.frontend_report(None) == {"colors": sent["colors"]}  # before any run: colors, no records
    script = (Path(chart.__file__).resolve().parents[2] / "web" / "seacache.js").read_text(encoding="utf-8").lower()
    assert [c for c in sent["colors"].values() if c in script] == [] and "report.colors" in script


def test_a_run_that_reused_nothing_gets_one_line_with_its_reason(chart):
    """The run's own reason (seacache_core/stats.py) as one line for the chart and the canvas; the host's facts
    first: caching stopped, or no call reached the seam."""
    never = run_report(0.0)
    note = chart.no_reuse_note(never)
    assert note == f"SeaCache reused 0 of {STEPS} calls: {never['nothing_reused']}."
    assert never["nothing_reused"] == f"all {STEPS - 2} steps free to reuse reached the threshold (a higher threshold reuses more)"
    assert f"reused nothing: {never['nothing_reused']}" in chart.summary_text(never)
    assert chart.frontend_report(never)["note"] == note
    mixed = run_report(0.1)
    assert chart.no_reuse_note(mixed) is None and "note" not in chart.frontend_report(mixed) and mixed["nothing_reused"] is None
    stopped = {**never, "stopped": "at step 3: RuntimeError: x"}
    assert chart.no_reuse_note(stopped).endswith("calls: caching stopped at step 3: RuntimeError: x.")
    missed = {**never, "calls": 0, "records": [], "uncached_calls": 5}
    assert chart.no_reuse_note(missed) == "SeaCache reused 0 of 0 calls: no model call reached the seam (5 ran whole)."


def test_the_chart_draws_the_no_reuse_line_under_its_header(chart):
    band = (slice(20, 33), slice(PLOT_LEFT + 8, WIDTH // 2))  # between the header and the plot, left of the legend
    drawn = lambda report: ~_has(np.asarray(chart.render_timeline(report, WIDTH, HEIGHT))[band], BACKGROUND)
    assert drawn(run_report(0.0)).any() and not drawn(run_report(0.1)).any()


def test_a_note_replaces_the_no_run_message(chart):
    note_only = np.asarray(chart.render_timeline(None, 320, 120, note=chart.NOT_APPLIED))
    assert not np.array_equal(note_only, np.asarray(chart.render_timeline(None, 320, 120)))
    assert chart.frontend_report(None, chart.NOT_APPLIED)["note"] == chart.NOT_APPLIED
