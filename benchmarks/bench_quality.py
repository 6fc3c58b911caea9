"""What SeaCache does to the result, measured on a trained Cosmos3-architecture proxy (not Cosmos3-Nano).

For each prompt/seed pair the proxy (``scripts/train_proxy.py``, weights in ``benchmarks/proxy/``) samples
once uncached and once per cache variant with the same noise; the error is the relative L2 distance of the
final latent to the uncached one (I2V: over the generated frames, the clean first frame excluded). Printed:
mean full calls (stack runs, 2 branches each), the stack speedup ``steps / full``, the mean error and its
95 % interval (mean +- 1.96 standard errors) over the pairs, for

- SeaCache as shipped (SEA gate, residual before ``norm_moe_gen``, order 1) at several thresholds;
- the residual boundary after ``norm_moe_gen`` (diffusers'), residual orders 0 and 2, an unfiltered gate;
- evenly spaced skipping: per pair, the same number of full calls as the shipped SeaCache, spread evenly;
- T2V and I2V (clean first frame) at shift 3, and T2V at shift 10.

Every variant runs through ``seacache_core.SeaCacheSession`` with a ``SeaCacheConfig`` (the code that ships);
the evenly spaced baseline uses the same residual history and extrapolation. Euler flow sampler, 35 steps,
CFG 5, cond and uncond batched in one call.

    python benchmarks/bench_quality.py            # 32 pairs (about 30-60 min on a busy 2-core CPU)
    python benchmarks/bench_quality.py --quick    # CI-sized: 2 pairs, 16 steps, one threshold per variant
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "scripts")]

import torch  # noqa: E402

import train_proxy as proxy  # noqa: E402
from cosmos3 import reference_sigmas  # noqa: E402
from seacache_core import ResidualHistory, SeaCacheConfig, SeaCacheSession  # noqa: E402

KEYS = ("cond", "uncond")


class SessionHost:
    """Plain-torch SeaCache host: routes the proxy's stack seam through one run's session."""

    def __init__(self, model, session: SeaCacheSession):
        self.model, self.session = model, session

    def __call__(self, hidden, inputs):
        stack = lambda h: self.model.run_gen_stack(h, inputs)  # noqa: E731
        return self.session.run(stack, hidden, inputs.latent, float(inputs.sigma[0]), KEYS)


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


def variants(quick: bool) -> list[Variant]:
    """The measured variants; ``quick`` keeps one threshold each."""
    sea = (0.1, 0.2, 0.3, 0.45)
    raw = (0.1, 0.2, 0.3, 0.45)
    out = []
    for section in ("T2V s3", "I2V s3", "T2V s10"):
        out += [
            Variant(section, "shipped (SEA, before norm, order 1)", sea),
            Variant(section, "after norm_moe_gen", sea, dict(residual_boundary="after_norm")),
            Variant(section, "evenly spaced (count of shipped)", sea, even_of="shipped (SEA, before norm, order 1)"),
            Variant(section, "unfiltered gate", raw, dict(indicator_filter="none")),
        ]
        if section == "T2V s3":
            out += [
                Variant(section, "order 0", sea, dict(order=0)),
                Variant(section, "order 2", sea, dict(order=2)),
                Variant(section, "after norm, order 0", sea, dict(residual_boundary="after_norm", order=0)),
            ]
    if quick:
        for v in out:
            v.thresholds = v.thresholds[1:2]
    return out


def section_setup(section: str) -> tuple[float, bool]:
    """(shift, image-to-video) of a section name."""
    return (10.0 if section.endswith("s10") else 3.0), section.startswith("I2V")


def rel_error(x: torch.Tensor, ref: torch.Tensor, i2v: bool) -> float:
    """Relative L2 error of a final latent; I2V compares the generated frames only."""
    if i2v:
        x, ref = x[:, :, 1:], ref[:, :, 1:]
    return float((x - ref).norm() / ref.norm())


def run_pairs(pairs: int, steps: int, quick: bool, folder: str = proxy.PROXY_DIR, log=print) -> list[dict]:
    """Every variant on ``pairs`` prompt/seed pairs; one row per (variant, threshold) with per-pair values."""
    model = proxy.load_proxy(folder)
    all_variants = variants(quick)
    first_frames, _ = proxy.make_dataset(len(proxy.CLASSES), proxy.HELDOUT_SEED + 1)  # one per class, held out
    rows: dict[tuple, dict] = {}
    start = time.time()
    for p in range(pairs):
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
                        x = run(stack=SessionHost(model, session), boundary=config.residual_boundary)
                        full = session.stats.full
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
        log(f"pair {p + 1}/{pairs} done ({time.time() - start:.0f} s)")
    return list(rows.values())


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % interval (1.96 standard errors; 0 for one value)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, 1.96 * math.sqrt(var / n)


def at_calls(rows: list[dict], target: float) -> dict[tuple[str, str], float | None]:
    """Error of each curve interpolated (linearly in full calls) at ``target`` full calls; None outside it."""
    curves: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in rows:
        curves.setdefault((r["section"], r["variant"]), []).append((sum(r["full"]) / len(r["full"]), sum(r["error"]) / len(r["error"])))
    out = {}
    for key, points in curves.items():
        points.sort()
        out[key] = None
        for (f0, e0), (f1, e1) in zip(points, points[1:]):
            if f0 <= target <= f1 and f1 > f0:
                out[key] = e0 + (e1 - e0) * (target - f0) / (f1 - f0)
        if out[key] is None and any(abs(f - target) < 1e-9 for f, _ in points):
            out[key] = next(e for f, e in points if abs(f - target) < 1e-9)
    return out


def table(rows: list[dict], steps: int, pairs: int) -> str:
    """The printed table: one line per (section, variant, threshold), plus the error at the 1.8x point."""
    target = steps / 1.8
    interpolated = at_calls(rows, target)
    lines = [
        f"SeaCache quality on the trained Cosmos3-architecture proxy (not Cosmos3-Nano): {pairs} prompt/seed pairs, "
        f"{steps} steps, CFG 5, Euler; error = relative L2 of the final latent vs uncached (mean +- 95% CI)",
        f"| section | variant | threshold | full calls | speedup | error | 95% CI | error at {steps / target:.1f}x |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        full = sum(r["full"]) / len(r["full"])
        error, half = mean_ci(r["error"])
        at = interpolated[(r["section"], r["variant"])]
        lines.append(
            f"| {r['section']} | {r['variant']} | {r['threshold']:.2f} | {full:.1f} | {steps / full:.2f}x | "
            f"{error:.4f} | +-{half:.4f} | {'-' if at is None else f'{at:.4f}'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized run: 2 pairs, 16 steps, one threshold each")
    parser.add_argument("--pairs", type=int, default=None, help="prompt/seed pairs (default 32, quick 2)")
    parser.add_argument("--steps", type=int, default=None, help="sampling steps (default 35, quick 16)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--proxy", default=proxy.PROXY_DIR, help="folder of the proxy's weights")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = args.pairs or (2 if args.quick else 32)
    steps = args.steps or (16 if args.quick else 35)
    rows = run_pairs(pairs, steps, args.quick, args.proxy, log=(lambda *a: None) if args.quick else print)
    print(table(rows, steps, pairs))
    return rows


if __name__ == "__main__":
    main()
