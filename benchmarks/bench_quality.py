"""What SeaCache does to the result, measured on two trained Cosmos3-architecture proxies (not Cosmos3-Nano).

A shift sweep (3, 5, 10: the Cosmos3 recipe's shifts for 256p, 480p and 720p) at each proxy's CFG, comparing
at the same number of full calls (stack runs) four ways to choose which steps to compute, each with residual
extrapolation of order 1 and 2:

- ``SEA``: the paper's gate (``SeaCacheConfig(gate="sea")``);
- ``SEA same-sigma``: the pack's variant, both latents filtered at the current sigma (``gate="sea_same_sigma"``);
- ``unfiltered``: the same gate on the raw latent (an injected indicator, ``proxy_jobs.UnfilteredIndicator``; not a
  product option);
- ``evenly spaced``: a fixed set of evenly spaced steps, no gate.

For each prompt/seed pair a proxy samples once uncached and once per variant and threshold with the same
noise; the error is the relative L2 distance of the final latent to the uncached one. Every gate runs at two
thresholds that bracket the target of ``steps / 1.8`` full calls (found by bisection on separate calibration
pairs), evenly spaced skipping at the two whole counts around it, and each pair's error is interpolated (in log
error, linearly in full calls) at the target. Printed per proxy and shift: the geometric-mean error at the
target and paired ratios (geometric mean and 95 % interval over the pairs, pairs where the variant is lower).

    python -m benchmarks.bench_quality --thresholds t.json   # 24 pairs, 35 steps, both proxies
    python -m benchmarks.bench_quality --quick          # CI-sized smoke run: 2 pairs, 8 steps, shift 10, fixed thresholds
    python -m benchmarks.bench_quality --instrument     # per-step distances of each indicator (why SEA over-counts)
    # split over processes (after one calibration run has written t.json), then one table:
    python -m benchmarks.bench_quality --thresholds t.json --shard 0/2 --save a.json &
    python -m benchmarks.bench_quality --thresholds t.json --shard 1/2 --save b.json
    python -m benchmarks.bench_quality --merge a.json b.json
    # the speedup setting against the threshold mode at the same full calls (targets 1.5, 1.8, 2.0; --merge as above)
    python -m benchmarks.bench_quality --speedup --gate sea_same_sigma --save s.json
    # the forecasters at speed targets 2, 3 and 4, the cap lifted, kept and off (docs/quality.md, "The forecaster
    # under a speed target")
    python -m benchmarks.bench_quality --forecast --caps lifted kept none --proxies natural --pairs 6 --first-pair 6 --gate sea_same_sigma

Every gate runs through ``seacache_core.SeaCacheRun`` (the code that ships); evenly spaced skipping uses
the same residual history and extrapolation. Euler flow sampler, cond and uncond batched in one call.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import time

import torch

from cosmos3 import reference_sigmas
from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_core.forecast import ChebyshevHistory
from seacache_testing import quality_proxy as proxy
from seacache_testing.pair_stats import bracketed, geometric_mean, interpolated, matched, paired_ratio
from seacache_testing.proxy_jobs import Job
from seacache_testing.seacache_host import SeaCachedCosmos3
from seacache_testing.spectrum_forecast import SpectrumHistory

SHIFTS = (3.0, 5.0, 10.0)
SPEEDUP = 1.8  # the published operating point: full calls = steps / 1.8
GATES = ("sea", "sea_same_sigma", "unfiltered", "even")
LABELS = {"sea": "SEA", "sea_same_sigma": "SEA same-sigma", "unfiltered": "unfiltered", "even": "evenly spaced"}
QUICK_THRESHOLDS = {"sea": (0.1, 0.4), "sea_same_sigma": (0.03, 0.15), "unfiltered": (0.02, 0.1)}
CALIBRATION_PAIRS = range(1000, 1003)
VIDEO_PROXIES = ("natural", "synthetic")


def mean_full(job: Job, gate: str, threshold: float, pairs=CALIBRATION_PAIRS, order: int = 1) -> float:
    """Mean full calls of ``gate`` (residual ``order``) at ``threshold`` over ``pairs``."""
    return sum(job.run(p, gate, order, threshold)[0] for p in pairs) / len(pairs)


def threshold_for(job: Job, gate: str, goal: float, pairs=CALIBRATION_PAIRS, order: int = 1) -> float:
    """The threshold of ``gate`` whose mean full calls over ``pairs`` are ``goal``: bisection on log threshold."""
    lo, hi = 1e-3, 4.0  # full calls fall as the threshold rises
    for _ in range(7):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if mean_full(job, gate, mid, pairs, order) > goal else (lo, mid)
    return math.sqrt(lo * hi)


def calibrate(job: Job, gate: str, target: float, pairs=CALIBRATION_PAIRS, order: int = 1) -> tuple[float, float]:
    """Two thresholds of ``gate`` (residual ``order``) whose mean full calls over ``pairs`` lie about one call
    either side of ``target``."""
    return (threshold_for(job, gate, target + 1.0, pairs, order), threshold_for(job, gate, target - 1.0, pairs, order))


def thresholds_of(jobs: dict[str, Job], path: str | None, log=print) -> dict[str, dict[str, list[float]]]:
    """Per job and gate the two thresholds around the target: read from ``path`` when it holds them (shards
    share one calibration), else calibrated and written there."""
    known = {}
    if path and os.path.isfile(path):
        with open(path) as f:
            known = json.load(f)
    for name, job in jobs.items():
        for gate in QUICK_THRESHOLDS:
            if gate not in known.get(name, {}):
                known.setdefault(name, {})[gate] = list(calibrate(job, gate, job.steps / SPEEDUP))
                log(f"calibrated {name} {gate}: {known[name][gate]}")
                if path:
                    with open(path, "w") as f:
                        json.dump(known, f, indent=1)
    return known


def sweep(jobs: dict[str, Job], pairs: range, thresholds: dict, log=print) -> list[dict]:
    """Every variant of every job on the pairs numbered ``pairs``: one row per (proxy/shift, gate, order,
    setting) with per-pair full calls and errors. ``thresholds[job][gate]``: the gate's two thresholds."""
    rows = []
    start = time.time()
    for name, job in jobs.items():
        target = job.steps / SPEEDUP
        for gate in GATES:
            even = (float(math.floor(target)), float(math.floor(target) + 1))
            points = even if gate == "even" else tuple(thresholds[name][gate])
            for order in (1, 2):
                for setting in points:
                    rows.append(dict(section=name, gate=gate, order=order, setting=setting, full=[], error=[]))
        references = {p: job.sample(p) for p in pairs}
        for row in (r for r in rows if r["section"] == name):
            for p in pairs:
                full, x = job.run(p, row["gate"], row["order"], row["setting"])
                row["full"].append(full)
                row["error"].append(float((x - references[p]).norm() / references[p].norm()))
        log(f"{name} done ({time.time() - start:.0f} s)")
    return rows


def table(rows: list[dict], steps: dict[str, int], cfg: dict[str, float]) -> str:
    """The printed sweep: per section and variant the error at the 1.8x point and paired ratios against the
    SEA gate and evenly spaced skipping of the same order, and against order 1 of the same gate."""
    targets = {section: count / SPEEDUP for section, count in steps.items()}
    errors = matched(rows, targets)
    full = {}
    for r in rows:
        full.setdefault((r["section"], r["gate"], r["order"]), []).append(sum(r["full"]) / len(r["full"]))
    pairs = len(rows[0]["error"])
    inside, total = bracketed(rows, targets)

    def ratio(a, b) -> str:
        g, lo, hi, lower = paired_ratio(errors[a], errors[b])
        return f"{g:.2f} [{lo:.2f}, {hi:.2f}] {lower}/{pairs}"

    lines = [
        f"SeaCache quality on trained Cosmos3-architecture proxies (not Cosmos3-Nano): {pairs} prompt/seed pairs; "
        f"error = relative L2 of the final latent vs uncached, interpolated per pair at steps/{SPEEDUP:g} full calls; "
        "ratios: geometric mean of per-pair error ratios [95% CI] and pairs where the row is lower; "
        f"the two runs bracket the target on {inside}/{total} pair runs (else the nearer run's error is used)",
        "| proxy, shift | gate | order | full calls of the two runs | error at 1.8x | x SEA | x evenly spaced | x order 1 |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for key in errors:
        section, gate, order = key
        calls = " / ".join(f"{f:.1f}" for f in full[key])
        versus_sea = "-" if gate == "sea" else ratio(key, (section, "sea", order))
        versus_even = "-" if gate == "even" else ratio(key, (section, "even", order))
        versus_order = "-" if order == 1 else ratio(key, (section, gate, 1))
        lines.append(f"| {section}, CFG {cfg[section]:g} | {LABELS[gate]} | {order} | {calls} | "
                     f"{geometric_mean(errors[key]):.4f} | {versus_sea} | {versus_even} | {versus_order} |")
    return "\n".join(lines)


def instrument(job: Job, p: int = 0) -> str:
    """Per-step distances of one uncached trajectory: the paper's SEA distance, the same-sigma distance and the
    raw latent's, showing where the SEA distance comes from the filter's own change along the schedule."""
    from seacache_core import item_distances

    rel_l1 = lambda a, b: float(item_distances(a, b))  # noqa: E731 - the gate's distance, batch of one
    from seacache_core.sea_filter import sea_filter_float32

    latents = []

    def record(hidden, inputs):
        latents.append(inputs.latent[:1].clone())
        return job.model.run_gen_stack(hidden, inputs)

    job.sample(p, record)
    sigmas = reference_sigmas(job.steps, job.shift).tolist()
    sea = lambda x, s: sea_filter_float32(x, s, 3.0)  # noqa: E731
    lines = ["| step | sigma | SEA | same-sigma | raw |", "| ---: | ---: | ---: | ---: | ---: |"]
    totals = [0.0, 0.0, 0.0]
    for t in range(1, len(latents)):
        values = (rel_l1(sea(latents[t], sigmas[t]), sea(latents[t - 1], sigmas[t - 1])),
                  rel_l1(sea(latents[t], sigmas[t]), sea(latents[t - 1], sigmas[t])),
                  rel_l1(latents[t], latents[t - 1]))
        totals = [a + b for a, b in zip(totals, values)]
        lines.append(f"| {t} | {sigmas[t]:.4f} | " + " | ".join(f"{v:.4f}" for v in values) + " |")
    lines.append("| sum | | " + " | ".join(f"{v:.3f}" for v in totals) + " |")
    return "\n".join(lines)


IMAGE_THRESHOLDS = (0.05, 0.1, 0.13, 0.15, 0.25, 0.35, 0.5)


def threshold_curve(job: Job, pairs: range, thresholds=IMAGE_THRESHOLDS, gate: str = "sea", order: int = 1) -> list[dict]:
    """Full calls and error of ``gate`` at each threshold (one row each, per-pair values), for choosing a
    threshold: on single-frame stills (``job.frames`` = 1) it decides the image models' threshold."""
    references = {p: job.sample(p) for p in pairs}
    rows = []
    for threshold in thresholds:
        row = dict(threshold=threshold, full=[], error=[])
        for p in pairs:
            full, x = job.run(p, gate, order, threshold)
            row["full"].append(full)
            row["error"].append(float((x - references[p]).norm() / references[p].norm()))
        rows.append(row)
    return rows


def curve_table(title: str, rows: list[dict], steps: int) -> str:
    """One line per threshold: mean full calls, speedup, geometric-mean error."""
    lines = [title, "| threshold | full calls | speedup | error |", "| ---: | ---: | ---: | ---: |"]
    for r in rows:
        full = sum(r["full"]) / len(r["full"])
        lines.append(f"| {r['threshold']:g} | {full:.1f} | {steps / full:.2f}x | {geometric_mean(r['error']):.4f} |")
    return "\n".join(lines)


SPEED_TARGETS = (1.5, 1.8, 2.0)
SPEED_GRID = tuple(round(0.015 * 1.5**i, 4) for i in range(9))  # threshold mode's settings (0.015 .. 0.38)


def at_calls(runs: list[tuple[int, float]], calls: float) -> tuple[float, bool]:
    """The threshold mode's error of one pair at ``calls`` full calls from its runs (full calls, error) over a
    threshold grid: runs with the same calls averaged (geometric mean), then :func:`interpolated` between the two
    counts around ``calls``; and whether they bracket it."""
    by_calls: dict[int, list[float]] = {}
    for full, error in runs:
        by_calls.setdefault(full, []).append(max(error, 1e-12))
    counts = sorted(by_calls)
    below = max((c for c in counts if c <= calls), default=counts[0])
    above = min((c for c in counts if c >= calls), default=counts[-1])
    error = interpolated(below, geometric_mean(by_calls[below]), above, geometric_mean(by_calls[above]), calls)
    return error, below <= calls <= above


def speed_sweep(jobs: dict[str, Job], pairs: range, gate: str, order: int, targets, grid=SPEED_GRID, log=print) -> list[dict]:
    """Per job, pair and target: the speed controller's full calls and error, and the threshold mode's error at the
    same full calls (from a threshold grid run on the same pair). One row per job and target, per-pair values."""
    rows = []
    start = time.time()
    for name, job in jobs.items():
        section = [dict(section=name, target=t, full=[], error=[], threshold_error=[], bracketed=[]) for t in targets]
        for p in pairs:
            reference = job.sample(p)
            error = lambda x: float((x - reference).norm() / reference.norm())  # noqa: E731
            runs = [(full, error(x)) for full, x in (job.run(p, gate, order, t) for t in grid)]
            for row in section:
                full, x = job.run(p, gate, order, 0.0, speedup=row["target"])
                matched_error, inside = at_calls(runs, full)
                row["full"].append(full)
                row["error"].append(error(x))
                row["threshold_error"].append(matched_error)
                row["bracketed"].append(inside)
        rows += section
        log(f"{name} done ({time.time() - start:.0f} s)")
    return rows


def speed_table(rows: list[dict], steps: int, gate: str, order: int) -> str:
    """The speed mode against the threshold mode at the same full calls, per proxy/shift and target."""
    pairs = len(rows[0]["full"])
    lines = [
        f"SeaCache speedup setting on the trained proxies: {pairs} prompt/seed pairs, {steps} steps, {LABELS[gate]} gate, "
        f"order {order}; achieved = steps / full calls (mean, min-max over pairs); error = relative L2 of the final "
        "latent vs uncached (geometric mean); the threshold mode's error is interpolated per pair at the full calls "
        "the speed mode reached (threshold grid on the same pair); ratio: geometric mean of per-pair error ratios "
        "[95% CI] and pairs where the speed mode is lower",
        "| proxy, shift | target | achieved | pairs within 10 % | error, speed mode | error, threshold mode | speed / threshold |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        speeds = [steps / f for f in r["full"]]
        within = sum(abs(v / r["target"] - 1) <= 0.1 for v in speeds)
        g, lo, hi, lower = paired_ratio(r["error"], r["threshold_error"])
        note = "" if all(r["bracketed"]) else f" ({len(speeds) - sum(r['bracketed'])} pairs outside the grid)"
        lines.append(f"| {r['section']} | {r['target']:g}x | {sum(speeds) / len(speeds):.2f}x ({min(speeds):.2f}-{max(speeds):.2f}) | "
                     f"{within}/{len(speeds)} | {geometric_mean(r['error']):.4f} | {geometric_mean(r['threshold_error']):.4f}{note} | "
                     f"{g:.2f} [{lo:.2f}, {hi:.2f}] {lower}/{len(speeds)} |")
    return "\n".join(lines)


FORECAST_TARGETS = (2.0, 3.0, 4.0)
FORECAST_VARIANTS = ("newton", "chebyshev:0.5", "chebyshev:1")
CAP_MODES = ("kept", "lifted")


class DesignRun(SeaCacheRun):
    """Benchmark-only: a run whose Chebyshev histories use another time map (``step_span``, None: the run's steps)
    or centring (``centre``, None: the shipped one) than ``SeaCacheRun.new_history`` gives them."""

    def __init__(self, config: SeaCacheConfig, sigmas, step_span: float | None = None, centre: str | None = None):
        super().__init__(config, sigmas)
        self.step_span, self.centre = step_span, centre

    def new_history(self):
        history = super().new_history()
        if isinstance(history, ChebyshevHistory):
            history = SpectrumHistory(history.order, history.residual_storage, degree=history.degree,
                                      ridge_lambda=history.ridge_lambda, blend=history.blend,
                                      capacity=history.capacity, centre=self.centre or "newton",
                                      step_span=history.step_span if self.step_span is None else self.step_span)
        return history


def forecast_variant(name: str) -> tuple[dict, dict]:
    """(config fields, DesignRun options) of a variant named "newton" or "chebyshev:BLEND" with optional further
    ":"-separated parts: "spanN" (the time map spans N steps), "none" / "mean" / "newton" (the centring), "oK" (the
    Newton order K; default the Cosmos3 seam's 2), "degM", "lamL", "capK" (the fit's degree, ridge lambda and
    residuals kept)."""
    forecaster, *parts = name.split(":")
    config, design = dict(forecaster=forecaster, order=2), {}
    if forecaster == "chebyshev":
        config["chebyshev_blend"] = float(parts.pop(0))
    for part in parts:
        if part.startswith("span"):
            design["step_span"] = float(part[4:])
        elif part in ("none", "mean", "newton"):
            design["centre"] = part
        elif part.startswith("o"):
            config["order"] = int(part[1:])
        elif part.startswith(("deg", "lam", "cap")):
            field = {"deg": "chebyshev_degree", "lam": "chebyshev_lambda", "cap": "chebyshev_capacity"}[part[:3]]
            config[field] = float(part[3:]) if part[:3] == "lam" else int(part[3:])
        else:
            raise ValueError(f"unknown part {part!r} of forecast variant {name!r}")
    return config, design


def forecast_sweep(jobs: dict[str, Job], pairs: range, gate: str, variants, targets, caps, log=print) -> list[dict]:
    """Per job, speed target, variant and cap mode ("kept": the configured cap of 2; "lifted": as far as the target
    needs; "none": no cap): each pair's full calls and error (relative L2 of the final latent vs uncached)."""
    logging.getLogger("seacache_core.speed").setLevel(logging.ERROR)  # the kept cap's out-of-reach targets: expected
    rows = []
    start = time.time()
    for name, job in jobs.items():
        sigmas = reference_sigmas(job.steps, job.shift)
        section = [dict(section=name, target=t, variant=v, cap=c, full=[], error=[])
                   for t in targets for v in variants for c in caps]
        for p in pairs:
            reference = job.sample(p)
            for row in section:
                fields, design = forecast_variant(row["variant"])
                config = SeaCacheConfig(gate=gate, speedup=row["target"], speed_lifts_cap=row["cap"] == "lifted",
                                        max_consecutive=-1 if row["cap"] == "none" else 2, **fields)
                run = DesignRun(config, sigmas, **design)
                x = job.sample(p, SeaCachedCosmos3(job.model, run))
                row["full"].append(run.stats.ran)
                row["error"].append(float((x - reference).norm() / reference.norm()))
                run.release()
        rows += section
        log(f"{name} done ({time.time() - start:.0f} s)")
    return rows


def forecast_table(rows: list[dict], steps: int, gate: str) -> str:
    """Per proxy/shift and target, each variant's geometric-mean error and mean achieved speed, one column per
    (variant, cap mode); then per target each column's paired error ratio against the first column."""
    columns = list(dict.fromkeys((r["variant"], r["cap"]) for r in rows))
    cells: dict[tuple, str] = {}
    for r in rows:
        speed = sum(steps / f for f in r["full"]) / len(r["full"])
        cells[(r["section"], r["target"], r["variant"], r["cap"])] = f"{geometric_mean(r['error']):.4f} ({speed:.2f}x)"
    pairs = len(rows[0]["error"])
    lines = [
        f"SeaCache forecasters under a speed target on the trained proxies: {pairs} prompt/seed pairs, {steps} steps, "
        f"{LABELS[gate]} gate; error = relative L2 of the final latent vs uncached, geometric mean over pairs "
        "(mean achieved speed); cap kept: max_consecutive 2; lifted: as far as the target needs",
        "| proxy, shift | target | " + " | ".join(f"{v}, cap {c}" for v, c in columns) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in columns) + " |",
    ]
    for section, target in dict.fromkeys((r["section"], r["target"]) for r in rows):
        lines.append(f"| {section} | {target:g}x | " + " | ".join(cells[(section, target, v, c)] for v, c in columns) + " |")
    errors = {(r["section"], r["target"], r["variant"], r["cap"]): r["error"] for r in rows}
    first = columns[0]
    lines += ["", f"Per target, over every proxy/shift and pair: error / error of {first[0]}, cap {first[1]} (geometric "
              "mean of per-pair ratios [95% CI], pairs where the column is lower)",
              "| target | " + " | ".join(f"{v}, cap {c}" for v, c in columns[1:]) + " |",
              "| ---: | " + " | ".join("---:" for _ in columns[1:]) + " |"]
    for target in dict.fromkeys(r["target"] for r in rows):
        sections = list(dict.fromkeys(r["section"] for r in rows if r["target"] == target))
        ratios = []
        for v, c in columns[1:]:
            a = [e for section in sections for e in errors[(section, target, v, c)]]
            b = [e for section in sections for e in errors[(section, target, *first)]]
            g, lo, hi, lower = paired_ratio(a, b)
            ratios.append(f"{g:.2f} [{lo:.2f}, {hi:.2f}] {lower}/{len(a)}")
        lines.append(f"| {target:g}x | " + " | ".join(ratios) + " |")
    return "\n".join(lines)


def make_jobs(proxies: list[str], shifts, steps: int) -> dict[str, Job]:
    """One job per proxy and shift, named "synthetic s3" etc."""
    jobs = {}
    for name in proxies:
        data = proxy.SOURCES[name]
        model = proxy.load_proxy(data.folder, data=data)
        for shift in shifts:
            jobs[f"{name} s{shift:g}"] = Job(model, data, shift, steps)
    return jobs


def merge_rows(paths: list[str]) -> list[dict]:
    """Rows of several saved runs (shards of pairs, or separate proxies/shifts) joined: rows with the same settings
    get their per-pair values concatenated; row order of first appearance."""
    merged: dict[tuple, dict] = {}
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                key = tuple((k, v) for k, v in row.items() if not isinstance(v, list))
                if key in merged:
                    for k, v in row.items():
                        if isinstance(v, list):
                            merged[key][k] += v
                else:
                    merged[key] = row
    return list(merged.values())


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized run: 2 pairs, 8 steps, shift 10, fixed thresholds")
    parser.add_argument("--pairs", type=int, default=None, help="prompt/seed pairs (default 24, quick 2)")
    parser.add_argument("--steps", type=int, default=None, help="sampling steps (default 35, quick 8)")
    parser.add_argument("--proxies", nargs="+", default=list(VIDEO_PROXIES), choices=VIDEO_PROXIES,
                        help="the video proxies (the audio-video one: bench_sound.py)")
    parser.add_argument("--shifts", nargs="+", type=float, default=None, help="default 3 5 10 (quick: 10)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--shard", default="0/1", help="i/n: run only pairs p with p %% n == i (parallel runs)")
    parser.add_argument("--save", help="write the rows (per-pair values) to this JSON file")
    parser.add_argument("--merge", nargs="+", help="print the table of saved shards instead of running")
    parser.add_argument("--instrument", action="store_true", help="print per-step distances of each indicator")
    parser.add_argument("--thresholds", help="JSON of calibrated thresholds: read if present, else written")
    parser.add_argument("--match", type=float, default=None, metavar="T",
                        help="print the SEA gate's full calls at threshold T and the same-sigma threshold that matches them")
    parser.add_argument("--gate", default="sea", choices=GATES[:3], help="the gate of --image")
    parser.add_argument("--image", action="store_true",
                        help="threshold curves of the natural proxy on stills (images) and on videos, SEA gate, order 1")
    parser.add_argument("--speedup", nargs="*", type=float, default=None, metavar="X",
                        help="the speedup setting against the threshold mode at the same speed, at these targets "
                             f"(default {' '.join(map(str, SPEED_TARGETS))}; gate from --gate, order from --order)")
    parser.add_argument("--order", type=int, default=2, help="residual order of --speedup")
    parser.add_argument("--forecast", nargs="*", default=None, metavar="VARIANT",
                        help="the forecasters at --targets under a speed target, the cap kept and lifted (default "
                             f"{' '.join(FORECAST_VARIANTS)}; see forecast_variant; gate from --gate)")
    parser.add_argument("--targets", nargs="+", type=float, default=list(FORECAST_TARGETS), help="speeds of --forecast")
    parser.add_argument("--caps", nargs="+", default=list(CAP_MODES), choices=(*CAP_MODES, "none"),
                        help="cap modes of --forecast")
    parser.add_argument("--first-pair", type=int, default=0, help="number of the first prompt/seed pair (held-out pairs)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = args.pairs or (2 if args.quick else 24)
    steps = args.steps or (8 if args.quick else 35)
    shifts = args.shifts or ([10.0] if args.quick else list(SHIFTS))
    cfg = {f"{n} s{s:g}": proxy.SOURCES[n].cfg for n in proxy.SOURCES for s in shifts}
    if args.merge:
        rows = merge_rows(args.merge)
        if "variant" in rows[0]:  # rows of --forecast
            print(forecast_table(rows, steps, args.gate))
        elif "target" in rows[0]:  # rows of --speedup
            print(speed_table(rows, steps, args.gate, args.order))
        else:
            print(table(rows, {r["section"]: steps for r in rows}, cfg))
        return rows
    jobs = make_jobs(args.proxies, shifts, steps)
    if args.instrument:
        for name, job in jobs.items():
            print(f"\n{name}, CFG {job.data.cfg:g}, pair 0: relative L1 distance to the previous step\n{instrument(job)}")
        return []
    if args.image:
        for name, job in jobs.items():
            if job.data.name != "natural":
                continue
            for frames in (1, None):
                job.frames = frames
                kind = "stills (image proxy)" if frames == 1 else "videos"
                rows = threshold_curve(job, range(pairs), gate=args.gate)
                print(curve_table(f"\n{name}, {kind}, CFG {job.data.cfg:g}, {steps} steps, {pairs} pairs, "
                                  f"{LABELS[args.gate]} gate, order 1:", rows, steps))
        return []
    if args.match is not None:
        print(f"| proxy, shift | SEA full calls at {args.match:g} | same-sigma threshold with those calls |\n| --- | ---: | ---: |")
        for name, job in jobs.items():
            goal = mean_full(job, "sea", args.match)
            print(f"| {name} | {goal:.1f} | {threshold_for(job, 'sea_same_sigma', goal):.3f} |", flush=True)
        return []
    index, count = (int(v) for v in args.shard.split("/"))
    log = (lambda *a: None) if args.quick else (lambda *a: print(*a, flush=True))
    chosen = range(args.first_pair + index, args.first_pair + pairs, count)
    if args.forecast is not None:
        rows = forecast_sweep(jobs, chosen, args.gate, args.forecast or FORECAST_VARIANTS, args.targets, args.caps, log)
        if args.save:
            with open(args.save, "w") as f:
                json.dump(rows, f)
        print(forecast_table(rows, steps, args.gate))
        return rows
    if args.speedup is not None:
        grid = SPEED_GRID[::4] if args.quick else SPEED_GRID
        rows = speed_sweep(jobs, chosen, args.gate, args.order, args.speedup or SPEED_TARGETS, grid, log)
        if args.save:
            with open(args.save, "w") as f:
                json.dump(rows, f)
        print(speed_table(rows, steps, args.gate, args.order))
        return rows
    thresholds = {name: QUICK_THRESHOLDS for name in jobs} if args.quick else thresholds_of(jobs, args.thresholds, log)
    rows = sweep(jobs, chosen, thresholds, log)
    if args.save:
        with open(args.save, "w") as f:
            json.dump(rows, f)
    print(table(rows, {name: job.steps for name, job in jobs.items()}, cfg))
    return rows


if __name__ == "__main__":
    main()
