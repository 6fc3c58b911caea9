"""SeaCache's early steps at matched speed: forced warm-up steps, and a reuse that needs ``order + 1`` computed steps.

TensorRT-LLM's SeaCache ablated ``max_warmup_steps`` (0 to 16 first steps always computed) and chose 12; the pack's
default is 1. A warm-up also costs calls, so it is compared here at the same speed: SeaCache Apply at its defaults
with ``warmup_steps`` 1, 4, 8 and 12, asked for the speeds around 2x and 3x (17.5 and 11.7 of 35 full calls,
``seacache_testing/matched_variants.py``), through ComfyUI on the three trained proxies (bench_peers' proxies, T2V),
each shift apart; and the defaults with a reuse allowed only once its branch has ``order + 1`` computed steps (a
benchmark-only behaviour, ``matched_variants.full_history``: on Wan, order 1, the defaults' timeline starts
``F R C R``, the first reuse repeating the single computed step). Error and temporal error (change of the
frame-to-frame differences) against the same pair uncached; paired ratios against warm-up 1.

    COMFYUI_PATH=... python -m benchmarks.bench_warmup --pairs 10 --first-pair 100 --save warmup.json
    # threshold mode (where the defaults' timeline starts F R C R): matched to warm-up 1's calls at the default 0.13
    COMFYUI_PATH=... python -m benchmarks.bench_warmup --archs wan --warmups 1 --thresholds 0.1,0.13,0.17
    python -m benchmarks.bench_warmup --merge a.json b.json       # one table of saved runs
    COMFYUI_PATH=... python -m benchmarks.bench_warmup --quick    # smoke: 1 pair, 10 steps, natural Cosmos3, shift 5
"""

from __future__ import annotations

import json
import tempfile
import time
from collections import Counter

import torch

from benchmarks import bench_peers, matched_cli
from seacache_testing import matched_variants as mv
from seacache_testing.pair_stats import geometric_mean
from seacache_testing.peer_comparison import DEFAULTS, STEPS, speed_label

WARMUPS = (1, 4, 8, 12)
BASE = "warm-up 1"
COLUMNS = ("error_fp32", "temporal_fp32")


def variants(warmups) -> list[mv.Variant]:
    """Warm-up ``w`` for each of ``warmups``, and the defaults with a reuse needing ``order + 1`` computed steps."""
    found = [mv.Variant(f"warm-up {w}", "fp32", {"warmup_steps": w}) for w in warmups]
    return found + [mv.Variant("order + 1 behind a reuse", "fp32", {}, mv.full_history)]


def run(ns, archs, shifts, pairs, steps, warmups, thresholds=(), log=print) -> list[dict]:
    """Every cell (proxy, shift; T2V) on ``pairs``: every variant's rows (at ``thresholds`` in threshold mode when
    given, else at the speeds around 2x and 3x)."""
    targets = tuple(t * steps / STEPS for t in mv.TARGETS)
    folder = tempfile.mkdtemp(prefix="bench_warmup_")
    rows, start = [], time.time()
    for arch in archs:
        arch.load(ns, folder)
        for shift in shifts:
            cell = bench_peers.Cell(arch, shift, "t2v", arch.model_for(ns, shift))
            sample = lambda model, pair: bench_peers.sample(ns, arch, model, pair, "t2v", shift, steps, arch.data.cfg)  # noqa: E731
            for pair in pairs:
                runs, reference = sample(cell.model, pair)
                rows += mv.measure(ns, cell, {"fp32": cell.model}, variants(warmups), {"fp32": reference}, pair, sample,
                                   runs / steps, steps, targets, thresholds)
            log(f"{cell.name} done ({time.time() - start:.0f} s)")
    return rows


def threshold_report(rows: list[dict], threshold: float) -> None:
    """Threshold mode: each variant's metrics at the full calls warm-up 1 made at ``threshold`` on the same pair
    (interpolated between the variant's thresholds), and the paired ratios against warm-up 1 there."""
    found = mv.at_own_calls(rows, BASE, threshold)
    calls = {r["cell"]: sum(r["full"]) / len(r["full"]) for r in mv.joined(rows)
             if (r["method"], r["setting"]) == (BASE, threshold)}
    print(f"\nThreshold mode: every variant at the full calls {BASE} makes at threshold {threshold:g} on each pair "
          "(error / temporal error; ratio [95% CI] against warm-up 1, pairs where the variant is lower)")
    print("| proxy, shift | full calls of warm-up 1 | variant | error | temporal | ratio to warm-up 1 |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for (cell, method), values in found.items():
        base = found[(cell, BASE)]
        ratio = "-" if method == BASE else " / ".join(
            mv.ratio_text([v[c] for v in values], [v[c] for v in base]) for c in COLUMNS)
        means = " | ".join(f"{geometric_mean([v[c] for v in values]):.4f}" for c in COLUMNS)
        print(f"| {cell} | {calls[cell]:.1f} | {method} | {means} | {ratio} |")


def report(rows: list[dict], steps: int, threshold: float | None = None) -> None:
    """The level table, the paired ratios against warm-up 1, and the most common start of each variant's timeline;
    in threshold mode (``threshold``: warm-up 1's setting every variant is matched to) :func:`threshold_report`."""
    targets = tuple(t * steps / STEPS for t in mv.TARGETS)
    if threshold is not None:
        threshold_report(rows, threshold)
        timelines(rows)
        return
    results = mv.at_targets(rows, targets)
    pairs = len(next(iter(results.values()))["values"])
    print(f"\nSeaCache's early steps at matched speed ({pairs} pairs, {steps} steps; error and temporal error against "
          "the uncached run, geometric means)")
    print(mv.level_table(results, list(COLUMNS), steps))
    methods = list(dict.fromkeys(m for _, m, _ in results if m != BASE))
    print(f"\nPaired ratios against {BASE} [95% CI], pairs where the variant is lower: error / temporal error")
    print("| proxy, shift | target | " + " | ".join(methods) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in methods) + " |")
    for cell, target in dict.fromkeys((c, t) for c, _, t in results):
        cells = [" / ".join(mv.ratio_text(mv.metric(results, (cell, m, target), c), mv.metric(results, (cell, BASE, target), c))
                            for c in COLUMNS) for m in methods]
        print(f"| {cell} | {speed_label(target, steps)} | " + " | ".join(cells) + " |")
    timelines(rows)


def timelines(rows: list[dict]) -> None:
    """The most common start of each variant's timeline per setting."""
    print("\nMost common start of the timeline (first 8 calls) per variant and setting (speed asked, or threshold)")
    print("| proxy, shift | variant | setting | start (pairs) |")
    print("| --- | --- | ---: | --- |")
    for r in mv.joined(rows):
        if r["timelines"]:
            start, count = Counter(t[:8] for t in r["timelines"]).most_common(1)[0]
            print(f"| {r['cell']} | {r['method']} | {r['setting']:g} | {' '.join(start)} ({count}/{len(r['timelines'])}) |")


def main(argv=None) -> None:
    parser = matched_cli.parser(__doc__, shifts="3,5,10")
    parser.add_argument("--warmups", default=",".join(map(str, WARMUPS)), help="comma-separated warm-up steps")
    parser.add_argument("--thresholds", default=None, metavar="T,...",
                        help="threshold mode: the variants at these thresholds, matched to warm-up 1's calls at the "
                             "default threshold on each pair (which must be among them)")
    args = parser.parse_args(argv)
    if args.merge:
        rows, first = matched_cli.merged(args.merge)
        report(rows, first["steps"], first.get("threshold"))
        return
    thresholds = tuple(float(v) for v in args.thresholds.split(",")) if args.thresholds else ()
    if thresholds and DEFAULTS.threshold not in thresholds:
        raise SystemExit(f"--thresholds must hold the default threshold {DEFAULTS.threshold:g}")
    threshold = DEFAULTS.threshold if thresholds else None
    ns, archs, shifts, pairs, steps = matched_cli.session(args)
    warmups = (1, 2) if args.quick else tuple(int(v) for v in args.warmups.split(","))
    rows = run(ns, archs, shifts, pairs, steps, warmups, thresholds)
    print(f"ComfyUI {ns.version}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    report(rows, steps, threshold)
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"rows": rows, "steps": steps, "threshold": threshold}, f)


if __name__ == "__main__":
    main()
