"""What SeaCache does to the result, measured on a trained Cosmos3-architecture proxy (not Cosmos3-Nano).

For each prompt/seed pair the proxy (``scripts/train_proxy.py``, weights in ``benchmarks/proxy/``) samples
once uncached and once per cache variant with the same noise; the error is the relative L2 distance of the
final latent to the uncached one (I2V: over the generated frames, the clean first frame excluded). Printed:
mean full calls (stack runs, 2 branches each), the stack speedup ``steps / full``, the mean error and its
95 % interval (mean +- 1.96 standard errors) over the pairs, for

- SeaCache with vLLM-Omni's settings ("shipped": SEA gate, residual before ``norm_moe_gen``, order 1; the
  pack's default order is 2 since these measurements);
- the residual boundary after ``norm_moe_gen`` (diffusers'), residual orders 0 and 2, an unfiltered gate;
- evenly spaced skipping: per pair, the same number of full calls as the shipped SeaCache, spread evenly;
- T2V and I2V (clean first frame) at shift 3, and T2V at shift 10.

Every variant runs through ``seacache_core.SeaCacheSession`` with a ``SeaCacheConfig`` (the code that ships);
the evenly spaced baseline uses the same residual history and extrapolation. Euler flow sampler, 35 steps,
CFG ``train_proxy.CFG`` (1.5), cond and uncond batched in one call.

    python benchmarks/bench_quality.py            # 32 pairs (about 30-60 min on a busy 2-core CPU)
    python benchmarks/bench_quality.py --quick    # CI-sized: 2 pairs, 16 steps, one threshold per variant
    # the same 32 pairs split over 2 processes, then one table:
    python benchmarks/bench_quality.py --shard 0/2 --save a.json & python benchmarks/bench_quality.py --shard 1/2 --save b.json
    python benchmarks/bench_quality.py --merge a.json b.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts")]

import torch  # noqa: E402

import train_proxy as proxy  # noqa: E402
from seacache_host import SeaCachedCosmos3  # noqa: E402
from cosmos3 import reference_sigmas  # noqa: E402
from seacache_core import ResidualHistory, SeaCacheConfig, SeaCacheSession  # noqa: E402



class EvenSkipHost:
    """Baseline: computes the stack on a fixed set of steps and extrapolates the residual on the others with
    the same history/extrapolation as SeaCache (no gate)."""

    def __init__(self, model, sigmas: torch.Tensor, compute_steps: set[int], order: int):
        self.model, self.schedule = model, [float(s) for s in sigmas[:-1]]
        self.compute_steps, self.history, self.full = compute_steps, ResidualHistory(order), 0

    def __call__(self, hidden, inputs):
        step = min(range(len(self.schedule)), key=lambda i: abs(self.schedule[i] - float(inputs.sigma[0])))
        if step in self.compute_steps or not len(self.history):
            out = self.model.run_gen_stack(hidden, inputs)
            self.history.append(step, out - hidden)
            self.full += 1
            return out
        return hidden + self.history.predict(step, hidden.device, hidden.dtype)


def even_steps(steps: int, full: int) -> set[int]:
    """``full`` step indices spread evenly over ``0..steps-1``, first and last included."""
    full = max(2, min(full, steps))
    return {round(i * (steps - 1) / (full - 1)) for i in range(full)}


@dataclass
class Variant:
    """One curve of the table: a cache configuration (or the even baseline) run at several thresholds."""

    section: str  # "T2V s3", "I2V s3", "T2V s10"
    name: str
    thresholds: tuple[float, ...]
    options: dict = field(default_factory=dict)  # SeaCacheConfig fields besides the threshold
    even_of: str | None = None  # even skipping matched to this variant's full calls


def variants(quick: bool, curves: bool = False) -> list[Variant]:
    """The measured variants, each at the threshold nearest the 1.8x point on the proxy (0.15 for the SEA
    gate at shift 3, 0.2 at shift 10, 0.05 for the unfiltered gate); ``curves`` adds thresholds on both sides
    (0.1 and 0.3 for the SEA gate, 0.03 and 0.1 unfiltered) for curves over the number of full calls;
    ``quick`` keeps one threshold each."""
    shipped = "shipped (SEA, before norm, order 1)"
    sea, raw = ((0.1, 0.15, 0.3), (0.03, 0.05, 0.1)) if curves else ((0.15,), (0.05,))
    out = []
    for section in ("T2V s3", "I2V s3", "T2V s10"):
        at = sea if section != "T2V s10" else tuple(0.2 if t == 0.15 else t for t in sea)
        out += [
            Variant(section, shipped, at, dict(order=1)),
            Variant(section, "after norm_moe_gen", at, dict(residual_boundary="after_norm", order=1)),
            Variant(section, "evenly spaced (count of shipped)", at, even_of=shipped),
        ]
        if section == "T2V s3":
            out += [
                Variant(section, "unfiltered gate", raw, dict(indicator_filter="none", order=1)),
                Variant(section, "order 0", at, dict(order=0)),
                Variant(section, "order 2", at, dict(order=2)),
            ]
    if quick:
        for v in out:
            v.thresholds = v.thresholds[:1]
    return out


def section_setup(section: str) -> tuple[float, bool]:
    """(shift, image-to-video) of a section name."""
    return (10.0 if section.endswith("s10") else 3.0), section.startswith("I2V")


def rel_error(x: torch.Tensor, ref: torch.Tensor, i2v: bool) -> float:
    """Relative L2 error of a final latent; I2V compares the generated frames only."""
    if i2v:
        x, ref = x[:, :, 1:], ref[:, :, 1:]
    return float((x - ref).norm() / ref.norm())


def run_pairs(pairs: range, steps: int, quick: bool, folder: str = proxy.PROXY_DIR, log=print, curves: bool = False) -> list[dict]:
    """Every variant on the prompt/seed pairs numbered ``pairs``; one row per (variant, threshold) with
    per-pair values."""
    model = proxy.load_proxy(folder)
    all_variants = variants(quick, curves)
    # I2V start frames: frame 0 of one held-out video per class, given with that class's prompt
    first_frames = proxy.make_videos(torch.arange(len(proxy.CLASSES)), torch.Generator().manual_seed(proxy.HELDOUT_SEED + 1))
    rows: dict[tuple, dict] = {}
    start = time.time()
    for n, p in enumerate(pairs):
        label, seed = p % len(proxy.CLASSES), 70_000 + p
        for section in dict.fromkeys(v.section for v in all_variants):
            shift, i2v = section_setup(section)
            frame = first_frames[label : label + 1, :, :1] if i2v else None
            run = lambda **kw: proxy.sample(model, label, seed, steps=steps, shift=shift, first_frame=frame, **kw)  # noqa: E731
            reference = run()
            full_of: dict[tuple, int] = {}
            for v in (v for v in all_variants if v.section == section):
                for threshold in v.thresholds:
                    if v.even_of is None:
                        config = SeaCacheConfig(threshold=threshold, **v.options)
                        session = SeaCacheSession(config)
                        session.set_schedule(reference_sigmas(steps, shift))
                        x = run(stack=SeaCachedCosmos3(model, session), boundary=config.residual_boundary)
                        full = session.stats.ran
                        full_of[(v.name, threshold)] = full
                        session.release()
                    else:
                        count = full_of[(v.even_of, threshold)]
                        host = EvenSkipHost(model, reference_sigmas(steps, shift), even_steps(steps, count), 1)
                        x = run(stack=host)
                        full = host.full
                    row = rows.setdefault((section, v.name, threshold), dict(section=section, variant=v.name, threshold=threshold, full=[], error=[]))
                    row["full"].append(full)
                    row["error"].append(rel_error(x, reference, i2v))
        log(f"pair {p} done, {n + 1}/{len(pairs)} ({time.time() - start:.0f} s)")
    return list(rows.values())


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % interval (1.96 standard errors; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, 1.96 * math.sqrt(var / n)


def at_calls(rows: list[dict], target: float) -> dict[tuple[str, str], tuple[float, float] | None]:
    """(threshold, error) of each curve interpolated linearly in mean full calls at ``target`` full calls;
    None where the curve's points do not bracket it."""
    curves: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for r in rows:
        point = (sum(r["full"]) / len(r["full"]), r["threshold"], sum(r["error"]) / len(r["error"]))
        curves.setdefault((r["section"], r["variant"]), []).append(point)
    out = {}
    for key, points in curves.items():
        points.sort()
        out[key] = None
        for (f0, t0, e0), (f1, t1, e1) in zip(points, points[1:]):
            if f0 <= target <= f1 and f1 > f0:
                w = (target - f0) / (f1 - f0)
                out[key] = (t0 + (t1 - t0) * w, e0 + (e1 - e0) * w)
    return out


def table(rows: list[dict], steps: int, pairs: int) -> str:
    """The printed table: one line per (section, variant, threshold), with each curve's threshold and error
    interpolated at the 1.8x point (steps / 1.8 full calls)."""
    target = steps / 1.8
    interpolated = at_calls(rows, target)
    lines = [
        f"SeaCache quality on the trained Cosmos3-architecture proxy (not Cosmos3-Nano): {pairs} prompt/seed pairs, "
        f"{steps} steps, CFG {proxy.CFG:g}, Euler; error = relative L2 of the final latent vs uncached (mean, 95% CI); "
        f"'at 1.8x' = the curve interpolated at {target:.1f} full calls (evenly spaced: threshold of the matched run)",
        "| section | variant | threshold | full calls | speedup | error | 95% CI | threshold at 1.8x | error at 1.8x |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        full = sum(r["full"]) / len(r["full"])
        error, half = mean_ci(r["error"])
        at = interpolated[(r["section"], r["variant"])]
        at_text = "- | -" if at is None else f"{at[0]:.3f} | {at[1]:.4f}"
        lines.append(
            f"| {r['section']} | {r['variant']} | {r['threshold']:.2f} | {full:.1f} | {steps / full:.2f}x | "
            f"{error:.4f} | +-{half:.4f} | {at_text} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized run: 2 pairs, 16 steps, one threshold each")
    parser.add_argument("--pairs", type=int, default=None, help="prompt/seed pairs (default 32, quick 2)")
    parser.add_argument("--steps", type=int, default=None, help="sampling steps (default 35, quick 16)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--proxy", default=proxy.PROXY_DIR, help="folder of the proxy's weights")
    parser.add_argument("--shard", default="0/1", help="i/n: run only pairs p with p %% n == i (parallel runs)")
    parser.add_argument("--curves", action="store_true", help="also thresholds either side of 1.8x (3x the runs)")
    parser.add_argument("--save", help="write the rows (per-pair values) to this JSON file")
    parser.add_argument("--merge", nargs="+", help="print the table of saved shards instead of running")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = args.pairs or (2 if args.quick else 32)
    steps = args.steps or (16 if args.quick else 35)
    if args.merge:
        rows = merge_rows(args.merge)
        pairs = len(rows[0]["error"])
    else:
        index, count = (int(v) for v in args.shard.split("/"))
        log = (lambda *a: None) if args.quick else print
        rows = run_pairs(range(index, pairs, count), steps, args.quick, args.proxy, log, args.curves)
        if args.save:
            with open(args.save, "w") as f:
                json.dump(rows, f)
    print(table(rows, steps, pairs))
    return rows


def merge_rows(paths: list[str]) -> list[dict]:
    """Rows of several saved shards joined: per-pair values concatenated, row order of the first shard."""
    merged: dict[tuple, dict] = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                key = (row["section"], row["variant"], row["threshold"])
                if key in merged:
                    merged[key]["full"] += row["full"]
                    merged[key]["error"] += row["error"]
                else:
                    merged[key] = row
    return list(merged.values())


if __name__ == "__main__":
    main()
