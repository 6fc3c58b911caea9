"""Every benchmark runs, the way a user runs it: ``python -m benchmarks.NAME`` from the repository root, as a
subprocess, in its smoke mode (tiny sizes, seconds). The tests never import ``benchmarks``.

Each test asserts that the benchmark exits 0 and prints its table or summary lines; the numbers themselves are the
benchmark's output for the docs, never asserted (the quick quality sweep's rows are checked for their shape).
Benchmarks that go through ComfyUI run only with COMFYUI_PATH.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH_TABLE = "| size | weights | run | steps (full/reused) |"


def run(args: list[str], comfyui: bool = False, timeout: int = 300) -> str:
    """stdout+stderr of ``args`` run from the repo root with one CPU thread; fails the test on a non-zero exit."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON": sys.executable}
    if not comfyui:
        env.pop("COMFYUI_PATH", None)
    done = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(args)} exited {done.returncode}:\n{output[-4000:]}"
    return output


def bench(name: str, *args: str, comfyui: bool = False) -> str:
    """Output of ``python -m benchmarks.<name> args`` (see :func:`run`)."""
    return run([sys.executable, "-m", f"benchmarks.{name}", *args], comfyui)


def test_bench_gpu_smoke_prints_both_runs_for_every_size_and_dtype():
    out = bench("bench_gpu", "--smoke")
    assert BENCH_TABLE in out
    for size in ("128x64x9", "128x128x17"):
        for dtype in ("bf16", "fp8"):
            assert f"| {size} | {dtype} | uncached |" in out and f"| {size} | {dtype} | seacache |" in out
            assert f"timeline {size} {dtype}: F" in out


def test_bench_gpu_smoke_with_cpu_residual_history():
    out = bench("bench_gpu", "--smoke", "--dtypes", "bf16", "--sizes", "128x64x9@8", "--residual-storage", "cpu")
    assert "residual history on cpu" in out and "| 128x64x9 | bf16 | seacache |" in out


def test_bench_memory_prints_its_tables():
    out = bench("bench_memory")
    assert "| storage | text pathway GiB | generator pathway GiB |" in out and "1280x720x189" in out


def test_bench_gate_smoke():
    out = bench("bench_gate", "--smoke")
    assert "decide" in out and "gain build" in out and "one batched call per step (batch 2):" in out


def test_bench_forecast_quick():
    out = bench("bench_forecast", "--quick")
    assert "| 1280x720x189 | 44,160 | 345.0 | chebyshev | 12 | 4,140.0 | 8,280.0 |" in out
    assert "cpu     chebyshev blend 0.5 (order 1)  12 records" in out


def test_bench_first_block_quick():
    out = bench("bench_first_block", "--quick")
    assert "| model | tokens x width | raw sea | raw same-sigma | first block | first block same-sigma |" in out
    # the bytes kept per branch at Nano 720p follow from the config alone: 48 x 23 x 40 tokens x 4096 x 2 B (bf16)
    assert "raw latent (sea, sea same-sigma), float32: 33,177,600 B" in out
    assert "diffusers keep it 361,758,720 B (345.0 MiB)" in out and "float32 723,517,440 B (690.0 MiB)" in out


def test_bench_cosmos3_smoke():
    out = bench("bench_cosmos3", "--smoke")
    assert "text K/V cache on" in out and "streamed" in out and "naive" in out


def test_bench_quality_quick_prints_the_sweep(tmp_path):
    """Every gate at both orders on both video proxies, two settings each on two pairs: finite errors, full calls
    within the 8 steps, evenly spaced skipping computing exactly its count, and one table line per variant."""
    saved = tmp_path / "rows.json"
    out = bench("bench_quality", "--quick", "--save", str(saved))
    rows = json.loads(saved.read_text())
    assert "| proxy, shift | gate | order | full calls of the two runs | error at 1.8x |" in out
    sections, gates = {"natural s10", "synthetic s10"}, {"sea", "sea_same_sigma", "unfiltered", "even"}
    assert {(r["section"], r["gate"], r["order"]) for r in rows} == {(s, g, o) for s in sections for g in gates for o in (1, 2)}
    table_lines = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(table_lines) == 1 + len(rows) // 2  # header + one line per variant (two settings each)
    for r in rows:
        assert len(r["error"]) == len(r["full"]) == 2
        assert all(math.isfinite(e) and e >= 0 for e in r["error"])
        assert all(2 <= f <= 8 for f in r["full"])
        if r["gate"] == "even":
            assert r["full"] == [int(r["setting"])] * 2  # evenly spaced runs exactly its count
    for line in table_lines[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert math.isfinite(float(cells[4]))  # error at the target


def test_bench_sound_quick():
    out = bench("bench_sound", "--quick")
    assert "| variant | full calls of the two runs | sound latent error | SNR dB | log-spectral distance dB |" in out
    for label in ("video gate (sound_weight 0)", "joint gate (sound_weight 1)", "EasyCache rule", "evenly spaced"):
        assert f"| {label} |" in out


def test_cachedit_cosmos3_quick():
    """Cache-DiT's settings on the natural proxy in diffusers' Cosmos3: a row each, F8B8 refused on 3 layers."""
    pytest.importorskip("cache_dit")
    pytest.importorskip("diffusers")
    out = bench("cachedit_cosmos3", "--quick")
    assert "| Cache-DiT setting | full stack calls of 10 |" in out and "| uncached | 10.00 | 0.0000 |" in out
    assert "| F8B8 @0.12 | - | - | refused: AssertionError: Fn_compute_blocks 8 must be less than" in out
    assert "| TaylorSeer alone (every 2nd step, order 1) | 7.33 |" in out  # warm-up 2, then every 2nd of 8


def test_bench_quality_speedup_quick():
    out = bench("bench_quality", "--quick", "--speedup", "2", "--gate", "sea_same_sigma")
    assert "| proxy, shift | target | achieved | pairs within 10 % |" in out
    rows = [line for line in out.splitlines() if line.startswith(("| natural s10 | 2x", "| synthetic s10 | 2x"))]
    assert len(rows) == 2 and all("| 2.00x (2.00-2.00) | 2/2 |" in row for row in rows)  # 8 steps, 4 stack runs


def test_bench_quality_forecast_quick():
    out = bench("bench_quality", "--quick", "--forecast", "--proxies", "natural", "--targets", "3", "--gate", "sea_same_sigma")
    header = "| proxy, shift | target | newton, cap kept | newton, cap lifted | chebyshev:0.5, cap kept |"
    assert header in out
    # 8 steps at 3x: the cap of 2 allows 8 / 4 = 2x (steps 0 and 7 forced, and 3 and 6 after two reuses each); lifted
    # (to 6: the free steps 1..6 all reuse) the run makes the whole count nearest the target, 3 runs: 8 / 3 = 2.67x
    row = next(line for line in out.splitlines() if line.startswith("| natural s10 | 3x |"))
    assert row.count("(2.00x)") == 3 and row.count("(2.67x)") == 3


def test_gpu_check_smoke_writes_one_results_file(tmp_path):
    results = tmp_path / "results.md"
    run(["bash", "scripts/gpu_check.sh", "--smoke", "--out", str(results)])
    text = results.read_text()
    assert text.startswith("# SeaCache GPU check") and "smoke mode" in text
    for stage in ("## environment", "## CUDA tests (pytest -m cuda)", "## GPU benchmark", "## ComfyUI server"):
        assert stage in text
    assert BENCH_TABLE in text and "**FAILED**" not in text and "total " in text


def test_gpu_check_stops_cleanly_when_its_budget_is_spent(tmp_path):
    results = tmp_path / "results.md"
    run(["bash", "scripts/gpu_check.sh", "--smoke", "--budget-s", "0", "--out", str(results)])
    text = results.read_text()
    assert text.count("skipped: the budget (0 s) is spent") == 3  # environment, CUDA tests, benchmark
    assert "total " in text


@pytest.fixture()
def comfyui_path():
    path = os.environ.get("COMFYUI_PATH", "").strip()
    if not path:
        pytest.skip("COMFYUI_PATH is not set: the ComfyUI benchmarks run in the integration tests")
    return path


def test_bench_seacache_e2e_cosmos3_smoke(comfyui_path):
    out = bench("bench_seacache_e2e", "--preset", "tiny", "--steps", "6", "--repeats", "1",
                "--width", "64", "--height", "64", "--length", "5", comfyui=True)
    assert "gated calls: 6" in out and "measured speedup" in out and "timeline: F" in out


@pytest.mark.parametrize("model", ["wan", "flux"])
def test_bench_seacache_e2e_core_models_smoke(comfyui_path, model):
    out = bench("bench_seacache_e2e", "--model", model, "--preset", "tiny", "--steps", "6", "--repeats", "1",
                comfyui=True)
    assert f"model: {model}" in out and "measured speedup" in out and "timeline: F" in out


def test_bench_fp8_quick_compares_the_orders_on_comfyuis_fp8_activations(comfyui_path):
    out = bench("bench_fp8", "--quick", comfyui=True)
    for run in ("w8a8 uncached", "fp32 re-rounded", "w8a8 re-rounded"):
        assert f"| Cosmos3 natural, shift 5, T2V | {run} |" in out
    for variant in ("fp32 o1", "fp32 o2", "w8a8 o0", "w8a8 o1", "w8a8 o2"):
        for target in ("5 (2x)", "3.33 (3x)"):  # 17.5 and 11.7 of 35 at the smoke run's 10 steps
            assert f"| Cosmos3 natural, shift 5, T2V | {target} | {variant} |" in out
    assert "| W8A8: o2 / o1, error vs W8A8 |" in out


def test_bench_warmup_quick_compares_the_warmups_at_matched_speed(comfyui_path):
    out = bench("bench_warmup", "--quick", comfyui=True)
    for variant in ("warm-up 1", "warm-up 2", "order + 1 behind a reuse"):
        assert f"| Cosmos3 natural, shift 5, T2V | 5 (2x) | {variant} |" in out
    assert "| Cosmos3 natural, shift 5, T2V | order + 1 behind a reuse | 2 | F F F R" in out  # order 2: 3 computed
    out = bench("bench_warmup", "--quick", "--thresholds", "0.13,0.3", comfyui=True)  # threshold mode
    assert "| Cosmos3 natural, shift 5, T2V | " in out and "| order + 1 behind a reuse | " in out
    assert "Threshold mode: every variant at the full calls warm-up 1 makes at threshold 0.13" in out


def table_rows(text: str, servers=("1", "2", "3")) -> dict[tuple[str, str], list[str]]:
    """The rows of comfyui_gpu's table by (server, run): their cells."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in text.splitlines()
            if line.startswith("| ") and line.split("|")[1].strip() in servers]
    return {(cells[0], cells[1]): cells for cells in rows}


def test_gpu_check_smoke_runs_the_comfyui_server_stage(comfyui_path, tmp_path):
    """The GPU check's ComfyUI stage on the CPU: three real ComfyUI servers (main.py), the T2V example workflow queued
    over HTTP, every run of the GPU plan but the compiled one, a row each with its figures."""
    results = tmp_path / "results.md"
    run(["bash", "scripts/gpu_check.sh", "--smoke", "--out", str(results)], comfyui=True, timeout=900)
    text = results.read_text()
    assert "## ComfyUI server (comfyui_gpu.py --smoke: tiny, CPU)" in text and "**FAILED**" not in text
    rows = table_rows(text)
    assert len(rows) == 12 and ("3", "defaults bf16 compiled") not in rows
    has_dynamic = (Path(comfyui_path) / "comfy" / "memory_management.py").is_file()
    for (server, name), cells in rows.items():
        dynamic, card, sampling, decode, steps_2_n, speedup, summary = (cells[2], cells[3], cells[7], cells[8],
                                                                        cells[10], cells[11], cells[14])
        assert float(sampling) > 0 and float(steps_2_n) > 0, cells
        assert (decode == "-") == ("(no decode)" in cells[5]), cells
        assert card == ("whole device" if server == "3" else "24 GB")
        assert dynamic == ("off" if not has_dynamic or server == "2" else "on"), cells
        if name.startswith("uncached"):
            assert summary == "uncached" and speedup == "- / 1.00x"
        else:
            assert summary.startswith("SeaCache: ") and " calls, " in summary, cells
    assert re.search(r"SeaCache: 6 calls, 2 ran the stack, 4 reused", rows[("1", "speedup 3 fp8")][14])
    assert rows[("1", "speedup 3 fp8")][11].endswith("/ 3.00x")


def test_bench_few_steps_smoke(comfyui_path):
    out = bench("bench_few_steps", "--smoke", comfyui=True)
    assert "| Wan 2.1 natural | shift 5 | 4 |" in out and "| Cosmos3 natural | 4-step distilled | 4 |" in out
    assert "SeaCache Stats' line where a run reused nothing:" in out
    assert "Wan 2.1 natural, 4 steps: reused nothing: 4 steps are fewer than min_steps 8" in out


def test_composition_table_prints_every_case(comfyui_path):
    out = bench("composition_table", comfyui=True)
    assert "| case (tiny Wan 2.1, CFG 5) | steps | threshold 0 bit-identical | error vs graph without SeaCache |" in out
    assert "SkipLayerGuidanceDiT after SeaCache Apply" in out and "WanContextWindowsManual" in out


def test_soak_short_on_a_real_server(comfyui_path):
    """12 prompts through ComfyUI's main.py on a loopback port: every prompt succeeds, is interrupted or cancelled,
    memory stays within the script's bound, no SeaCache run object outlives its prompt, and each Stats node shows
    its own sampler's run (re-queued prompts with one sampler cached included)."""
    out = run([sys.executable, "-m", "benchmarks.soak", "--soak", "12", "--warmup", "4", "--max-seconds", "900"],
              comfyui=True, timeout=1200)
    assert "soak PASSED" in out and " 0 wrong []" in out
    assert "SeaCache run objects alive between prompts: at most 0" in out and "MiB per 100 prompts" in out
    assert "retune" in out  # the cached-sampler case was queued


def test_bypass_cost_smoke_runs_every_variant_without_seacache_left(comfyui_path):
    """benchmarks/bypass_cost.py on one server: every variant sampled for real (not from ComfyUI's cache), and after
    the bypassed and deleted prompts no SeaCache run object or patched MODEL is left."""
    out = run([sys.executable, "-m", "benchmarks.bypass_cost", "--smoke"], comfyui=True, timeout=1200)
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in out.splitlines() if line.startswith("| ")}
    assert {"never", "active", "bypassed", "deleted"} <= set(rows)
    for name in ("never", "bypassed", "deleted"):
        assert rows[name][3] == "1/1" and rows[name][6] == "0" and rows[name][7].rstrip(" |") == "0"
    assert rows["active"][3] == "3/3"


def test_trace_call_keeps_one_call_path_short(comfyui_path):
    """benchmarks/trace_call.py traces a reused and a computed call of the tiny Cosmos3 through ComfyUI; the path of
    one call stays within the budget the one-path design set (about 25 SeaCache functions in at most 6 files)."""
    out = bench("trace_call", "--steps", "8", comfyui=True)
    counts = {kind: tuple(int(n) for n in re.search(rf"{kind} \(step \d+\) call: (\d+) distinct SeaCache functions in "
                                                    rf"(\d+) files, (\d+) SeaCache frames deep", out).groups())
              for kind in ("reused", "computed")}
    for functions, files, depth in counts.values():
        assert 0 < functions <= 30 and 0 < files <= 6 and 0 < depth <= 10, out


def test_reference_runs_quick_compares_against_its_own_hashes(comfyui_path, tmp_path):
    """Two runs hashed, saved, and compared with a second run of the same commit: every hash repeats."""
    saved = tmp_path / "hashes.json"
    first = bench("reference_runs", "--quick", "--save", str(saved), comfyui=True)
    assert [line.split(":")[0] for line in first.splitlines() if line.startswith("cosmos3/")] == ["cosmos3/defaults", "cosmos3/paper"]
    hashes = json.loads(saved.read_text())
    assert all(len(line.split()[0]) == 16 and "calls=12" in line for line in hashes.values())
    assert "2 runs compared, 0 differ" in bench("reference_runs", "--quick", "--compare", str(saved), comfyui=True)
