"""What the peer benchmark (``python -m benchmarks.bench_peers``) compares and how it reads its runs, apart from
running them: the caches as a user applies them (``Method``: SeaCache Apply's settings, ComfyUI's core EasyCache and
LazyCache, a fixed-interval wrapper), the errors of a final latent against the uncached one (relative L2; PSNR, SSIM
and the temporal error of the decoded frames where a proxy's latent decodes), each pair's metrics at a target count
of full stack calls, and the printed tables.

A run row is a dict of one method at one setting on one cell (proxy, shift, mode) with per-pair lists: ``cell``,
``method``, ``setting``, ``pairs``, ``full`` (full stack calls per pair) and ``metrics`` (per pair, ``error`` and
where the proxy decodes ``psnr``, ``ssim``, ``temporal``); the uncached row has method ``uncached``. ComfyUI is
imported only when a method is applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from seacache_core import SeaCacheConfig
from seacache_testing import proxy_natural as natural
from seacache_testing.composition_cases import with_defaults
from seacache_testing.pair_stats import geometric_mean, interpolated, mean_ci, paired_ratio
from seacache_testing.spectrum_stack import planned_alphas, spectrum_stack

STEPS = 35
TARGETS = (17.5, 35 / 3, 8.75)  # full stack calls of 35: 2x, 3x and 4x in calls (the frontier)
MARGIN = 0.15  # a calibrated method's settings aim at each target's calls times 1 + MARGIN and 1 - MARGIN
MODES = ("t2v", "i2v")
DEFAULT_METHOD = "seacache"
DEFAULTS = SeaCacheConfig()  # SeaCache Apply's defaults (the node's widgets read the same dataclass)


def pair_of(data, pair: int) -> tuple[int, int]:
    """(class label, noise seed) of prompt/seed pair ``pair`` of a quality proxy's ``data`` (``ProxyData``): every
    benchmark that compares caches on the proxies numbers its pairs so."""
    return pair % data.classes, 70_000 + pair


# ----------------------------------------------------------------------------------------------- methods
@dataclass(frozen=True)
class Method:
    """One cache as a user applies it: ``apply(ns, model, setting)`` returns the patched MODEL; ``settings`` is
    the broad knob grid that calibration reads (higher setting, fewer full calls). ``planned(steps, targets)``, for
    a method whose full calls are known before it runs (a content-blind schedule, or a speed it is asked for),
    gives its settings for targets in calls of ``steps`` without any calibration run."""

    name: str
    label: str
    knob: str
    settings: tuple[float, ...]
    apply: Callable
    planned: Callable[[int, tuple], tuple] | None = None

    def quick_settings(self, steps: int, targets) -> tuple:
        """The smoke run's settings, no calibration: the planned ones, else the broad grid's middle and last."""
        if self.planned is not None:
            return tuple(self.planned(steps, targets))
        return (self.settings[len(self.settings) // 2], self.settings[-1])


def seacache(knob: str = "threshold", **fixed):
    """The apply function of SeaCache Apply at its defaults but ``fixed`` inputs, input ``knob`` as the setting."""
    def apply(ns, model, value):
        return with_defaults(ns, "SeaCacheApply", hidden={"UNIQUE_ID": "bench"}, model=model, **{knob: value}, **fixed)
    return apply


FRESH_INPUT_KEY = "bench_peers_fresh_input"


def fresh_input(model):
    """``model`` (a clone) whose diffusion model gets a copy of its input latent. EasyCache adds its cached
    difference to that input in place; ComfyUI passes the sampler's own tensor there when the model computes in
    the latent's dtype (float32, as every run here), so the in-place add also changes the ``x`` that ComfyUI then
    turns into the prediction, a large error EasyCache does not have where the model computes in bf16 or fp16 (a
    copy is made for the cast, as on a GPU). The copy gives EasyCache its GPU behaviour."""
    import comfy.patcher_extension

    patched = model.clone()
    patched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, FRESH_INPUT_KEY,
                                 lambda executor, x, *args, **kwargs: executor(x.clone(), *args, **kwargs))
    return patched


def core_cache(node: str, copy_input: bool = False):
    """The apply function of a core cache node (EasyCache, LazyCache) at its defaults, ``reuse_threshold`` as the
    setting; ``copy_input``: behind :func:`fresh_input`."""
    def apply(ns, model, threshold):
        return with_defaults(ns, node, model=fresh_input(model) if copy_input else model, reuse_threshold=threshold)
    return apply


FIXED_INTERVAL_KEY = "bench_peers_fixed_interval"


def fixed_interval(ns, model, count):
    """``model`` computing ``count`` evenly spaced steps of the run and reusing its output-minus-input on the
    others (a DIFFUSION_MODEL wrapper, keyed, on a clone)."""
    import comfy.patcher_extension

    state = {}

    def wrapper(executor, x, *args, **kwargs):
        options = kwargs.get("transformer_options") or next(a for a in args if isinstance(a, dict) and "sample_sigmas" in a)
        sigmas = options["sample_sigmas"][:-1].float().cpu()
        step = int((sigmas - options["sigmas"][0].float().cpu()).abs().argmin())
        compute = {round(i * (len(sigmas) - 1) / (int(count) - 1)) for i in range(int(count))}
        if step in compute or "residual" not in state:
            out = executor(x, *args, **kwargs)
            state["residual"] = out - x
            return out
        return x + state["residual"]

    patched = model.clone()
    patched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, FIXED_INTERVAL_KEY, wrapper)
    return patched


def interval_counts(steps: int, targets) -> tuple[int, ...]:
    """Fixed interval's settings: the whole counts of computed steps on either side of each target (at least 2,
    the first and last step)."""
    return tuple(sorted({max(2, f(t)) for t in targets for f in (math.floor, math.ceil)}))


def asked_speeds(steps: int, targets) -> tuple[float, ...]:
    """SeaCache's ``speedup`` settings: the speeds whose call budgets (``steps`` / speed, rounded half up by the
    speed controller) are the whole counts on either side of each target, so that its runs bracket the target as
    fixed interval's do. Asked for 4x, 35 steps compute 9 calls, more than the 8.75 target."""
    return tuple(sorted({round(steps / count, 4) for count in interval_counts(steps, targets)}))


def log_grid(low: float, high: float, count: int) -> tuple[float, ...]:
    """``count`` values spaced evenly in log between ``low`` and ``high``, rounded to 4 significant digits."""
    return tuple(float(f"{low * (high / low) ** (i / (count - 1)):.4g}") for i in range(count))


# Each calibrated method's broad grid, wide enough to pass 4x where the method can; bench_peers' calibration picks, per
# proxy/shift/mode, the settings of it that bracket the targets. Planned methods need none.
# what a user who asks SeaCache Apply for 2x, 3x or 4x gets (the README's table compares it with the peers)
SPEEDUP = Method("seacache_speedup", "SeaCache, speedup", "speedup", (2.0, 3.0, 4.0), seacache("speedup"),
                 planned=asked_speeds)
METHODS = (
    Method("seacache", "SeaCache (defaults)", "threshold", log_grid(0.03, 1.0, 12), seacache()),
    Method("seacache_sea", "SeaCache, gate sea", "threshold", log_grid(0.05, 2.0, 12), seacache(gate="sea")),
    Method("seacache_uncapped", "SeaCache, no reuse cap", "threshold", log_grid(0.03, 4.0, 14),
           seacache(max_consecutive=-1)),
    SPEEDUP,
    Method("easycache", "EasyCache (core)", "reuse_threshold", log_grid(0.01, 4.0, 14), core_cache("EasyCache", copy_input=True)),
    Method("lazycache", "LazyCache (core)", "reuse_threshold", log_grid(0.01, 4.0, 14), core_cache("LazyCache")),
    Method("fixed", "fixed interval", "computed steps", (8, 9, 11, 12, 17, 18), fixed_interval, planned=interval_counts),
)
# On Wan (block-stack seam) residual_order auto is 1; its order-2 variant measures whether auto should be 2 there too.
WAN_METHODS = (Method("seacache_order2", "SeaCache, residual order 2", "threshold", METHODS[0].settings, seacache(residual_order="2")),)
# On this pack's Cosmos3, which no Spectrum pack supports: Spectrum at the generator-stack seam (spectrum_stack), blend
# w 1 (its config) and 0.5 (its launch scripts), growth alpha as the knob.
COSMOS3_METHODS = tuple(
    Method(f"spectrum_stack_w{label}", f"Spectrum, stack seam, w {w:g}", "alpha", planned_alphas(STEPS, TARGETS),
           spectrum_stack(w), planned=planned_alphas)
    for w, label in ((1.0, "1"), (0.5, "05")))


def variant(spec: str) -> Method:
    """A SeaCache Apply variant from ``NAME:input=value,...`` (inputs as the node takes them; numbers parsed),
    its threshold swept like the defaults': any setting of the node can join the comparison. A bare ``speedup``
    among the inputs makes it a variant of the speedup method instead, planned like it (:func:`asked_speeds`)."""
    name, _, assignments = spec.partition(":")
    fixed = {}
    for item in filter(None, assignments.split(",")):
        key, _, value = item.partition("=")
        try:
            fixed[key] = float(value) if "." in value else int(value)
        except ValueError:
            fixed[key] = value
    label = f"SeaCache, {assignments.replace(',', ', ')}"
    if fixed.get("speedup") == "":
        del fixed["speedup"]
        return Method(name, label, "speedup", SPEEDUP.settings, seacache("speedup", **fixed), planned=asked_speeds)
    return Method(name, label, "threshold", METHODS[0].settings, seacache(**fixed))


def bracketing_settings(curve: list[tuple[float, float]], targets, margin: float = MARGIN) -> tuple[float, ...]:
    """The settings of a (setting, mean full calls) calibration curve that aim at each target's calls times
    1 + ``margin`` and 1 - ``margin`` (:func:`setting_at`), so that a pair's runs bracket the target although its
    calls differ from the calibration pairs' mean; distinct, ascending."""
    return tuple(sorted({setting_at(curve, t * f) for t in targets for f in (1 + margin, 1 - margin)}))


def setting_at(curve: list[tuple[float, float]], goal: float) -> float:
    """The setting of a (setting, mean full calls) curve, full calls falling, at which it computes ``goal`` calls."""
    if curve[0][1] <= goal:
        return curve[0][0]
    for (sa, fa), (sb, fb) in zip(curve, curve[1:]):
        if fa >= goal >= fb:
            w = 0.5 if fa == fb else (fa - goal) / (fa - fb)
            return float(f"{math.exp(math.log(sa) + w * (math.log(sb) - math.log(sa))):.4g}")
    fewest = min(f for _, f in curve)
    return next(s for s, f in curve if f == fewest)


# ----------------------------------------------------------------------------------------------- metrics
def natural_frames(latent: torch.Tensor) -> torch.Tensor:
    """RGB frames [T, 3, H, W] of a natural-proxy latent [1, C, T, h, w] in its model space (``proxy_natural.decode``,
    exact: the latent holds the patches' top C principal components)."""
    return natural.decode(latent[0].transpose(0, 1).float())


def metrics(x: torch.Tensor, reference: torch.Tensor, arch, mode: str) -> dict:
    """Errors of a final latent against the uncached one: relative L2; with frames, PSNR (dB, pixels in [0, 1],
    the mean squared error over the generated frames), mean per-frame SSIM, and the temporal error."""
    out = {"error": float((x - reference).norm() / reference.norm())}
    frames, ref = arch.frames(x), arch.frames(reference)
    if frames is None:
        return out
    first = 1 if mode == "i2v" else 0  # an I2V clip's first frame is the given image
    frames, ref = frames[first:].clamp(0, 1), ref[first:].clamp(0, 1)
    mse = float((frames - ref).pow(2).mean())
    out["psnr"] = 10 * math.log10(1.0 / max(mse, 1e-12))
    out["ssim"] = float(ssim(frames, ref).mean())
    motion, ref_motion = frames.diff(dim=0), ref.diff(dim=0)
    if len(motion):
        out["temporal"] = float((motion - ref_motion).norm() / ref_motion.norm())
    return out


def ssim(a: torch.Tensor, b: torch.Tensor, size: int = 11, sigma: float = 1.5) -> torch.Tensor:
    """Per-frame SSIM of RGB frames [T, 3, H, W] in [0, 1] (Gaussian window 11 / 1.5, the usual constants),
    averaged over channels and pixels."""
    coords = torch.arange(size, dtype=torch.float32) - (size - 1) / 2
    g = torch.exp(-coords**2 / (2 * sigma**2))
    g = (g / g.sum())
    window = (g[:, None] * g[None, :]).expand(a.shape[1], 1, size, size)
    blur = lambda v: F.conv2d(v, window, groups=a.shape[1])  # noqa: E731
    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b, cov = blur(a * a) - mu_a**2, blur(b * b) - mu_b**2, blur(a * b) - mu_a * mu_b
    c1, c2 = 0.01**2, 0.03**2
    value = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return value.mean(dim=(1, 2, 3))


# ----------------------------------------------------------------------------------------------- matching
def at_target(runs: list[tuple[float, dict]], target: float) -> tuple[dict, bool]:
    """One pair's metrics at ``target`` full calls from its runs (full calls, metrics) of one method: between the
    nearest runs below and above (log error, PSNR and SSIM linear in full calls); the nearest run where none
    bracket it (never extrapolated). Returns (metrics, bracketed)."""
    below = [r for r in runs if r[0] <= target]
    above = [r for r in runs if r[0] >= target]
    if not below or not above:
        nearest = min(runs, key=lambda r: abs(r[0] - target))
        return nearest[1], False
    (fa, ma), (fb, mb) = max(below, key=lambda r: r[0]), min(above, key=lambda r: r[0])
    w = 0.5 if fa == fb else (target - fa) / (fb - fa)
    out = {}
    for key in ma:
        if key in ("psnr", "ssim"):
            out[key] = ma[key] + w * (mb[key] - ma[key])
        else:
            out[key] = interpolated(fa, ma[key], fb, mb[key], target)
    return out, True


def matched(rows: list[dict], targets=TARGETS) -> dict[tuple, dict]:
    """Per (cell, method, target): per-pair metrics at the target and the bracketed count."""
    grouped: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["method"] != "uncached":
            grouped.setdefault((r["cell"], r["method"]), []).append(r)
    out = {}
    for (cell, method), group in grouped.items():
        pairs = group[0]["pairs"]
        for target in targets:
            values, inside = [], 0
            for i, _ in enumerate(pairs):
                runs = [(g["full"][i], g["metrics"][i]) for g in group]
                value, ok = at_target(runs, target)
                values.append(value)
                inside += ok
            out[(cell, method, target)] = dict(values=values, bracketed=inside, pairs=len(pairs))
    return out


def reached(result: dict) -> bool:
    """Whether a method reaches a target: the runs of at least half the pairs bracket it (the others take their
    nearest run). A method that cannot compute as few calls (a reuse cap) does not reach it."""
    return 2 * result["bracketed"] >= result["pairs"]


def speed_label(target: float, steps: int = STEPS) -> str:
    """A target as the table prints it: its calls and its speed in calls, e.g. "11.7 (3x)"."""
    return f"{target:.3g} ({steps / target:.2g}x)"


def summary(rows: list[dict], labels: dict[str, str], target: float = TARGETS[0], steps: int = STEPS) -> str:
    """The summary table of docs/peers.md at one target: per proxy and shift each method's geometric-mean error at
    ``target`` full calls (T2V / I2V; "-" where the method does not reach it, :func:`reached`), and the best SeaCache
    setting's paired ratio (95 % interval) to the best peer's (the lowest-error reached method that is not one of
    SeaCache's settings) and to the best Spectrum's (a method named ``spectrum...``), each pair named."""
    results = matched(rows, (target,))
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows if r["method"] != "uncached"))
    groups = list(dict.fromkeys(c.rsplit(", ", 1)[0] for c in cells))  # "proxy, shift s"
    lines = [f"Error at {speed_label(target, steps)} full calls of {steps}, T2V / I2V:",
             "| proxy, shift | " + " | ".join(labels.get(m, m) for m in methods)
             + " | best SeaCache / best peer [95% CI] | best SeaCache / best Spectrum [95% CI] |",
             "| --- |" + " ---: |" * (len(methods) + 2)]
    for group in groups:
        values, ratios = [], ([], [])
        for mode in MODES:
            cell = f"{group}, {mode.upper()}"
            if not any((cell, m, target) in results for m in methods):
                continue
            errors = {m: [v["error"] for v in results[(cell, m, target)]["values"]] for m in methods
                      if (cell, m, target) in results and reached(results[(cell, m, target)])}
            values.append({m: geometric_mean(e) for m, e in errors.items()})
            ours = [m for m in errors if m.startswith("seacache")]
            for column, theirs in zip(ratios, ([m for m in errors if not m.startswith("seacache")],
                                               [m for m in errors if m.startswith("spectrum")])):
                if ours and theirs:
                    best, mine = (min(family, key=lambda m: values[-1][m]) for family in (theirs, ours))
                    g, lo, hi, _ = paired_ratio(errors[mine], errors[best])
                    column.append(f"{mode.upper()} {g:.2f} [{lo:.2f}, {hi:.2f}] ({labels.get(mine, mine)} / {labels.get(best, best)})")
        cols = [" / ".join(f"{v[m]:.4f}" if m in v else "-" for v in values) for m in methods]
        lines.append(f"| {group} | " + " | ".join(cols) + " | " + " | ".join("; ".join(c) or "-" for c in ratios) + " |")
    return "\n".join(lines)


def frontier(rows: list[dict], labels: dict[str, str], targets=TARGETS, steps: int = STEPS) -> str:
    """The frontier at a glance: one line per method, one column per cell and target, the geometric-mean error over
    the pairs ("-" where the method does not reach the target, :func:`reached`; blank where it did not run)."""
    results = matched(rows, targets)
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows if r["method"] != "uncached"))
    columns = [(cell, target) for cell in cells for target in targets]
    lines = ["| cache | " + " | ".join(f"{cell}, {speed_label(target, steps)}" for cell, target in columns) + " |",
             "| --- |" + " ---: |" * len(columns)]
    for method in methods:
        values = []
        for cell, target in columns:
            result = results.get((cell, method, target))
            values.append("" if result is None else "-" if not reached(result) else
                          f"{geometric_mean([v['error'] for v in result['values']]):.4f}")
        lines.append(f"| {labels.get(method, method)} | " + " | ".join(values) + " |")
    return "\n".join(lines)


def proxy_of(cell: str) -> str:
    """The proxy a cell name belongs to: "Wan 2.1 natural, shift 3, T2V" -> "Wan 2.1 natural"."""
    return cell.split(", shift")[0]


def pooled(rows: list[dict], targets=TARGETS,
           group: Callable[[str], str] = proxy_of) -> dict[tuple, tuple[list[float], list[float]]]:
    """Per (proxy, method, target), for the methods that reach the target in every cell of the proxy
    (:func:`reached`): every pair's error at the target over the proxy's cells, and each cell's geometric mean.
    ``group`` names the cells pooled together (a cell's own name: no pooling)."""
    results = matched(rows, targets)
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    out = {}
    for proxy in dict.fromkeys(map(group, cells)):
        own = [c for c in cells if group(c) == proxy]
        for method in dict.fromkeys(r["method"] for r in rows if r["cell"] in own and r["method"] != "uncached"):
            for target in targets:
                found = [results.get((cell, method, target)) for cell in own]
                if all(f is not None and reached(f) for f in found):
                    out[(proxy, method, target)] = ([v["error"] for f in found for v in f["values"]],
                                                    [geometric_mean([v["error"] for v in f["values"]]) for f in found])
    return out


def headline(rows: list[dict], labels: dict[str, str], targets=TARGETS, steps: int = STEPS,
             per_cell: bool = False) -> str:
    """The README's table: per proxy and target, over all its cells (shifts and modes) and pairs (:func:`pooled`), the
    geometric-mean error of SeaCache Apply asked for the target's speed (:data:`SPEEDUP`), of the best Spectrum (a
    method named ``spectrum...``) and of the best other peer, each family's best being its lowest over the proxy;
    SeaCache's paired ratio to each over all the proxy's pairs (95 % interval) and the cells where its geometric mean
    is the lower. "-" where no method of a family reaches the target in every cell. ``per_cell``: the same per cell
    (proxy, shift and mode, nothing pooled), with the pairs where SeaCache is lower."""
    group = (lambda cell: cell) if per_cell else proxy_of
    errors = pooled(rows, targets, group)
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    counted = "pairs" if per_cell else "cells"
    lines = [f"| {'proxy, shift, mode' if per_cell else 'proxy'} | full calls of {steps} | SeaCache, speedup | "
             f"best Spectrum | best other peer | SeaCache / Spectrum [95% CI], {counted} lower | "
             f"SeaCache / other peer [95% CI], {counted} lower |", "| --- | ---: | ---: | --- | --- | ---: | ---: |"]
    for proxy in dict.fromkeys(map(group, cells)):
        for target in targets:
            reaching = [m for (p, m, t) in errors if p == proxy and t == target]
            ours = errors.get((proxy, SPEEDUP.name, target))
            cols = [f"{geometric_mean(ours[0]):.4f}" if ours else "-"]
            ratios = []
            for family in ([m for m in reaching if m.startswith("spectrum")],
                           [m for m in reaching if not m.startswith(("seacache", "spectrum"))]):
                if not family:
                    cols.append("-")
                    ratios.append("-")
                    continue
                best = min(family, key=lambda m: geometric_mean(errors[(proxy, m, target)][0]))
                theirs = errors[(proxy, best, target)]
                cols.append(f"{labels.get(best, best)}: {geometric_mean(theirs[0]):.4f}")
                if ours:
                    g, lo, hi, pairs_lower = paired_ratio(ours[0], theirs[0])
                    lower = sum(a < b for a, b in zip(ours[1], theirs[1]))
                    ratios.append(f"{g:.2f} [{lo:.2f}, {hi:.2f}], " + (f"{pairs_lower}/{len(ours[0])}" if per_cell
                                                                       else f"{lower}/{len(ours[1])}"))
                else:
                    ratios.append("-")
            lines.append(f"| {proxy} | {speed_label(target, steps)} | " + " | ".join(cols + ratios) + " |")
    return "\n".join(lines)


def shipped(rows: list[dict], steps: int = STEPS) -> str:
    """Per cell SeaCache Apply exactly as a user sets it: its default threshold, and each ``speedup`` asked for;
    mean full calls (range over pairs) and the error."""
    lines = []
    for r in rows:
        if r["method"] == DEFAULT_METHOD and r["setting"] == DEFAULTS.threshold:
            what = f"as shipped (threshold {DEFAULTS.threshold:g})"
        elif r["method"] == "seacache_speedup":
            what = f"speedup {r['setting']:g}"
        else:
            continue
        errors = [m["error"] for m in r["metrics"]]
        lines.append(f"{r['cell']}: SeaCache Apply {what}: {sum(r['full']) / len(r['full']):.1f} of {steps} full calls "
                     f"({min(r['full']):.0f}-{max(r['full']):.0f}), error {geometric_mean(errors):.4f}")
    return "\n".join(lines)


def replaced(parts: list[list[dict]]) -> list[dict]:
    """The rows of several saved runs, a later run's rows of a (cell, method) replacing an earlier run's (a method
    measured again, e.g. after a fix), in first-seen order."""
    latest: dict[tuple, list[dict]] = {}
    for rows in parts:
        fresh: dict[tuple, list[dict]] = {}
        for r in rows:
            fresh.setdefault((r["cell"], r["method"]), []).append(r)
        latest.update(fresh)
    return [r for group in latest.values() for r in group]


def table(rows: list[dict], labels: dict[str, str], targets=TARGETS, steps: int = STEPS) -> str:
    """Per cell and target: each method's geometric-mean error and its paired ratio to SeaCache's defaults
    (95 % CI, pairs where SeaCache is lower; "-" where either does not reach the target), PSNR, SSIM and temporal
    error where the proxy decodes, and how many pairs' runs bracket the target ("out of reach" where fewer than
    half do: those values are the nearest runs', at more calls than the target)."""
    results = matched(rows, targets)
    cells = list(dict.fromkeys(r["cell"] for r in rows))
    lines = [
        f"| proxy, shift, mode | full calls of {steps} | cache | error (rel. L2) | x SeaCache [95% CI], SeaCache lower | "
        "PSNR dB | SSIM | temporal error | bracketed |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for cell in cells:
        for target in targets:
            default = results.get((cell, DEFAULT_METHOD, target))
            for method in dict.fromkeys(r["method"] for r in rows if r["cell"] == cell and r["method"] != "uncached"):
                result = results[(cell, method, target)]
                values = result["values"]
                errors = [v["error"] for v in values]
                if method == DEFAULT_METHOD or default is None or not reached(default) or not reached(result):
                    versus = "-"
                else:
                    g, lo, hi, lower = paired_ratio(errors, [v["error"] for v in default["values"]])
                    versus = f"{g:.2f} [{lo:.2f}, {hi:.2f}], {len(errors) - lower}/{len(errors)}"
                frames = ["-", "-", "-"]
                if "psnr" in values[0]:
                    psnr, half = mean_ci([v["psnr"] for v in values])
                    frames = [f"{psnr:.1f} ± {half:.1f}", f"{sum(v['ssim'] for v in values) / len(values):.3f}",
                              f"{geometric_mean([v['temporal'] for v in values]):.4f}" if "temporal" in values[0] else "-"]
                bracket = f"{result['bracketed']}/{result['pairs']}" + ("" if reached(result) else " out of reach")
                lines.append(f"| {cell} | {speed_label(target, steps)} | {labels.get(method, method)} | "
                             f"{geometric_mean(errors):.4f} | {versus} | " + " | ".join(frames) + f" | {bracket} |")
    return "\n".join(lines)
