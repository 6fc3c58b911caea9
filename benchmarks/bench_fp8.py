"""SeaCache on fp8 activations (W8A8, ComfyUI's ``fp8_e4m3fn_fast``) at matched speed, through ComfyUI.

NVIDIA's cosmos-framework turned SeaCache off for W8A8 checkpoints (#247: the activations' quantization noise,
about 1.2 % per forward, swamps the roughly 2 % step-to-step change, and order-1 extrapolation flickered) and on again
with per-branch histories and all branches agreeing before a reuse (#262). This measures it on the three trained
proxies, each loaded twice as a user loads it (bench_peers' proxies): in full precision, and with weight dtype
``fp8_e4m3fn_fast`` on a CPU granted fp8 compute, so ComfyUI's own ``comfy.ops.fp8_ops`` computes every linear layer
in e4m3 (``seacache_testing/fp8_activations.py``). Per prompt/seed pair (T2V): both uncached; each re-rounded (the
model's input rounded to bfloat16 on every call: the floor any re-rounding of the trajectory gives); and SeaCache
Apply at its defaults with residual order 0, 1 and 2 on the W8A8 MODEL (1 and 2 in full precision), asked for the speeds around 2x and 3x
(``seacache_testing/matched_variants.py``). Each cached run's error and temporal error (change of the
frame-to-frame differences) are taken against the uncached W8A8 run and against the uncached full-precision run.
``--noise`` prints instead, per call of an uncached W8A8 run, the activations' noise (W8A8 against the same fp8
weights computed in float32) beside the step-to-step change of the output.

    COMFYUI_PATH=... python -m benchmarks.bench_fp8 --pairs 10 --first-pair 100 --save fp8.json
    COMFYUI_PATH=... python -m benchmarks.bench_fp8 --noise --pairs 2
    python -m benchmarks.bench_fp8 --merge a.json b.json    # one table of saved runs
    COMFYUI_PATH=... python -m benchmarks.bench_fp8 --quick # smoke: 1 pair, 10 steps, natural Cosmos3 proxy, shift 5
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time

import torch

from benchmarks import bench_peers, matched_cli
from seacache_testing import fp8_activations as fp8
from seacache_testing import matched_variants as mv
from seacache_testing.pair_stats import geometric_mean
from seacache_testing.peer_comparison import STEPS, speed_label

ORDERS = {"fp32": ("1", "2"), "w8a8": ("0", "1", "2")}  # order 0 in full precision: 4-6x order 1's error
MODELS = tuple(ORDERS)
COLUMNS = ("error_w8a8", "error_fp32", "temporal_w8a8", "temporal_fp32")
RATIOS = (  # (label, metric, numerator, denominator)
    ("W8A8: o2 / o1, error vs W8A8", "error_w8a8", "w8a8 o2", "w8a8 o1"),
    ("W8A8: o2 / o0, error vs W8A8", "error_w8a8", "w8a8 o2", "w8a8 o0"),
    ("W8A8: o1 / o0, error vs W8A8", "error_w8a8", "w8a8 o1", "w8a8 o0"),
    ("W8A8: o2 / o1, temporal vs W8A8", "temporal_w8a8", "w8a8 o2", "w8a8 o1"),
    ("W8A8: o2 / o1, error vs fp32", "error_fp32", "w8a8 o2", "w8a8 o1"),
    ("fp32: o2 / o1, error vs fp32", "error_fp32", "fp32 o2", "fp32 o1"),
)


def load(ns, archs):
    """Per proxy its MODELs: full precision and W8A8 (loaded with ``fp8_e4m3fn_fast`` on a CPU granted fp8 compute)."""
    folder = tempfile.mkdtemp(prefix="bench_fp8_")
    loaded = []
    for arch in archs:
        arch.load(ns, folder)
        quantized = dataclasses.replace(arch, weight_dtype=fp8.FAST, model=None)
        if isinstance(arch, bench_peers.WanProxy):
            quantized.shifted = {}
        with fp8.fp8_compute_device():
            quantized.load(ns, folder)
        if not fp8.fp8_layers(quantized.model):
            raise SystemExit(f"{arch.name}: no linear layer computes in fp8 ({fp8.FAST} was not granted)")
        loaded.append((arch, quantized))
    return loaded


def floors(ns, cell, models, pair, sample, steps: int) -> tuple[dict, float, list[dict]]:
    """The pair's uncached latents (``fp32``, ``w8a8``), the uncached full-precision run's stack runs per step, and
    the floor rows: W8A8 against full precision, and each MODEL re-rounded against both."""
    runs = {name: sample(models[name], pair) for name in MODELS}
    refs = {name: x for name, (_, x) in runs.items()}
    frames = cell.arch.frames if cell.arch.decodes else None
    found = {"w8a8 uncached": mv.errors(refs["w8a8"], {"fp32": refs["fp32"]}, frames)}
    for name in MODELS:
        found[f"{name} re-rounded"] = mv.errors(sample(fp8.rerounded(models[name]), pair)[1], refs, frames)
    return refs, runs["fp32"][0] / steps, [dict(cell=cell.name, method=k, setting=0.0, pairs=[pair], full=[float(steps)],
                                                 metrics=[v])
                  for k, v in found.items()]


def run(ns, loaded, shifts, pairs, steps, log=print) -> list[dict]:
    """Every cell (proxy, shift; T2V) on ``pairs``: the floor rows and every variant's rows."""
    variants = [mv.Variant(f"{m} o{o}", m, {"residual_order": o}) for m, orders in ORDERS.items() for o in orders]
    targets = tuple(t * steps / STEPS for t in mv.TARGETS)
    rows, start = [], time.time()
    for arch, quantized in loaded:
        for shift in shifts:
            cell = bench_peers.Cell(arch, shift, "t2v", arch.model_for(ns, shift))
            models = {"fp32": cell.model, "w8a8": quantized.model_for(ns, shift)}
            sample = lambda model, pair: bench_peers.sample(ns, arch, model, pair, "t2v", shift, steps, arch.data.cfg)  # noqa: E731
            for pair in pairs:
                references, per_step, found = floors(ns, cell, models, pair, sample, steps)
                rows += found + mv.measure(ns, cell, models, variants, references, pair, sample, per_step, steps, targets)
            log(f"{cell.name} done ({time.time() - start:.0f} s)")
    return rows


def noise(ns, loaded, shifts, pairs, steps) -> str:
    """Per proxy and shift, over the calls of uncached W8A8 runs: the activations' noise and the step-to-step change
    of the output (median and range over calls; the ratio's median), and the final latents' W8A8 error."""
    lines = ["| proxy, shift | calls | activation noise per call, median [min, max] | step-to-step change, median "
             "[min, max] | noise / change, median |", "| --- | ---: | ---: | ---: | ---: |"]
    for arch, quantized in loaded:
        for shift in shifts:
            probe, model = fp8.CallNoise(), quantized.model_for(ns, shift)
            for pair in pairs:
                probe._previous = None
                bench_peers.sample(ns, quantized, probe.attach(model), pair, "t2v", shift, steps, arch.data.cfg)
            changes = [c for c in probe.change if c is not None]
            ratios = [n / c for n, c in zip(probe.noise, probe.change) if c]
            lines.append(f"| {arch.name}, shift {shift:g} | {len(probe.noise)} | {statistics.median(probe.noise):.4f} "
                         f"[{min(probe.noise):.4f}, {max(probe.noise):.4f}] | {statistics.median(changes):.4f} "
                         f"[{min(changes):.4f}, {max(changes):.4f}] | {statistics.median(ratios):.2f} |")
    return "\n".join(lines)


def report(rows: list[dict], steps: int) -> None:
    """The floors, the level table and the paired ratios between orders."""
    targets = tuple(t * steps / STEPS for t in mv.TARGETS)
    floor_rows = mv.joined([r for r in rows if r["setting"] == 0.0])
    print("\nFloors (uncached; geometric mean over pairs): W8A8 against full precision, and each MODEL re-rounded "
          "(input latent in bfloat16 on every call)")
    print("| proxy, shift | run | error vs W8A8 | error vs fp32 | temporal vs W8A8 | temporal vs fp32 |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for r in floor_rows:
        cells = [geometric_mean([m[c] for m in r["metrics"]]) if c in r["metrics"][0] else None for c in COLUMNS]
        print(f"| {r['cell']} | {r['method']} | " + " | ".join("-" if v is None else f"{v:.4f}" for v in cells) + " |")
    results = mv.at_targets([r for r in rows if r["setting"] != 0.0], targets)
    pairs = len(floor_rows[0]["pairs"])
    print(f"\nSeaCache at matched speed ({pairs} pairs, {steps} steps; error / temporal against the uncached W8A8 and "
          "full-precision runs; geometric means)")
    print(mv.level_table(results, list(COLUMNS), steps))
    print("\nPaired ratios [95% CI], pairs where the numerator is lower")
    print("| proxy, shift | target | " + " | ".join(label for label, *_ in RATIOS) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in RATIOS) + " |")
    for cell, target in dict.fromkeys((c, t) for c, _, t in results):
        cells = [mv.ratio_text(mv.metric(results, (cell, a, target), name), mv.metric(results, (cell, b, target), name))
                 for _, name, a, b in RATIOS]
        print(f"| {cell} | {speed_label(target, steps)} | " + " | ".join(cells) + " |")
    print(against_floors(results, {(r["cell"], r["method"]): r for r in floor_rows}, steps))


def against_floors(results: dict, floor: dict, steps: int) -> str:
    """Each W8A8 variant against the floors, paired per pair [95% CI]: its error against the uncached W8A8 run over
    the re-rounded W8A8 run's (how far above what any re-rounding gives), and its error and temporal error against
    full precision over the uncached W8A8 run's (what the cache adds to quantization)."""
    lines = ["\nW8A8 variants against the floors: error vs W8A8 / re-rounded W8A8's; error vs fp32 / uncached W8A8's; "
             "temporal vs fp32 / uncached W8A8's (paired ratios [95% CI], pairs where the variant is lower)",
             "| proxy, shift | target | variant | over the re-rounding floor | error added to W8A8's | flicker added to W8A8's |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for (cell, method, target) in results:
        if not method.startswith("w8a8"):
            continue
        rerounded, uncached = floor[(cell, "w8a8 re-rounded")]["metrics"], floor[(cell, "w8a8 uncached")]["metrics"]
        cells = [mv.ratio_text(mv.metric(results, (cell, method, target), name), [m[name] for m in base])
                 for name, base in (("error_w8a8", rerounded), ("error_fp32", uncached), ("temporal_fp32", uncached))]
        lines.append(f"| {cell} | {speed_label(target, steps)} | {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = matched_cli.parser(__doc__, shifts="5,10")
    parser.add_argument("--noise", action="store_true", help="the activations' noise per call instead of the sweep")
    args = parser.parse_args(argv)
    if args.merge:
        rows, first = matched_cli.merged(args.merge)
        report(rows, first["steps"])
        return
    ns, archs, shifts, pairs, steps = matched_cli.session(args)
    loaded = load(ns, archs)
    if args.noise:
        print(noise(ns, loaded, shifts, pairs, steps))
        return
    rows = run(ns, loaded, shifts, pairs, steps)
    print(f"ComfyUI {ns.version}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    report(rows, steps)
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"rows": rows, "steps": steps}, f)


if __name__ == "__main__":
    main()
