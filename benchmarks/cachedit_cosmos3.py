"""Cache-DiT (vipshop/cache-dit 1.5.x) on diffusers' Cosmos3 transformer, through Cache-DiT's own API, against the
same transformer uncached: full stack calls (counted here) and the final latent's relative error.

DBCache F1B0, F8B8 at 0.12 (refused by Cache-DiT below 17 layers; F1B1 at 0.12 runs as its shape), F1B0 with the
TaylorSeer calibrator, and TaylorSeer on its own fixed schedule, on a trained proxy's weights or the tiny random
reference model. How Cache-DiT is enabled, counted and where it refuses: ``seacache_testing/cachedit_cosmos3.py``.

    python -m benchmarks.cachedit_cosmos3 --quick            # smoke: natural proxy, 10 steps, 2 pairs, shift 5
    python -m benchmarks.cachedit_cosmos3 --model random     # the tiny random reference model
    python -m benchmarks.cachedit_cosmos3 --pairs 12 --shift 3
    python -m benchmarks.cachedit_cosmos3 --pairs 6 --thresholds 0.3,1,10 --intervals 3,4   # toward its floor
"""

from __future__ import annotations

import argparse

import torch

from seacache_testing.cachedit_cosmos3 import METHODS, STEPS, run, subject, swept

SHIFT = 5.0
PAIRS = 4


def table(rows: list[dict], steps: int) -> str:
    """The rows as a markdown table."""
    lines = [f"| Cache-DiT setting | full stack calls of {steps} | relative error (geo. mean) | cached calls: counted "
             "here / Cache-DiT's summary |", "| --- | ---: | ---: | ---: |"]
    for r in rows:
        if "refused" in r:
            lines.append(f"| {r['method']} | - | - | refused: {r['refused']} |")
        else:
            lines.append(f"| {r['method']} | {r['calls']:.2f} | {r['error']:.4f} | {r['observed']} / {r['reported']} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 steps, 2 pairs")
    parser.add_argument("--model", default="natural", choices=("natural", "synthetic", "random"))
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--shift", type=float, default=SHIFT)
    parser.add_argument("--thresholds", default="", help="comma-separated: also F1B0 and F1B0 + TaylorSeer at each")
    parser.add_argument("--intervals", default="", help="comma-separated: also TaylorSeer's own schedule at each")
    args = parser.parse_args(argv)
    try:
        import cache_dit
    except ImportError:
        raise SystemExit("cache-dit is not installed: pip install cache-dit==1.5.3")
    import diffusers

    steps, pairs = (10, 2) if args.quick else (args.steps, args.pairs)
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    model = subject(args.model)
    more = swept([float(t) for t in filter(None, args.thresholds.split(","))],
                 [int(n) for n in filter(None, args.intervals.split(","))])
    rows = run(model, (*METHODS, *more), range(pairs), steps, args.shift)
    print(f"cache-dit {cache_dit.__version__}, diffusers {diffusers.__version__}, torch {torch.__version__}; "
          f"{args.model} ({len(model.transformer.layers)} layers), {pairs} pairs, {steps} steps, shift {args.shift:g}, "
          f"CFG {model.cfg:g}")
    print(table(rows, steps))


if __name__ == "__main__":
    main()
