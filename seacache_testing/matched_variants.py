"""SeaCache variants compared at matched speed through ComfyUI (``bench_fp8``, ``bench_warmup``).

A variant is SeaCache Apply with some inputs set, on one of the loaded MODELs of a proxy (full precision, or W8A8),
asked for the speeds whose call budgets bracket each target (``peer_comparison.asked_speeds``: 17 and 18 calls of 35
around 2x, 11 and 12 around 3x); each pair's metrics are interpolated at the target between the runs around it
(``peer_comparison.at_target``: log error linear in full calls). A variant may run inside a context (a
benchmark-only behaviour, patched in for its runs). Metrics of a final latent against each named uncached reference:
``error_REF`` (relative L2 of the latent) and ``temporal_REF`` (relative L2 of the frame-to-frame differences:
flicker and motion error; on decoded RGB frames where the proxy's latent decodes, else on the latent's frames).

A row is a dict with ``cell``, ``method`` (the variant's name), ``setting`` (the speed asked), and per pair ``pairs``,
``full`` (full stack calls, normalised to the uncached run's per step), ``metrics`` and ``timelines`` (the run's
decisions, SeaCache Stats' letters: F forced, C computed, R reused).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Callable

import torch

from seacache_testing.anymodel_runs import last_report
from seacache_testing.pair_stats import geometric_mean, paired_ratio
from seacache_testing.peer_comparison import asked_speeds, at_target, matched, seacache, speed_label

TARGETS = (17.5, 35 / 3)  # full calls of 35: 2x and 3x


@dataclass(frozen=True)
class Variant:
    """SeaCache Apply with ``inputs`` on the MODEL named ``model``, asked for each speed; ``context()`` is active
    while it samples."""

    name: str
    model: str
    inputs: dict = field(default_factory=dict)
    context: Callable = nullcontext


def frames_of(latent: torch.Tensor, frames: Callable | None) -> torch.Tensor:
    """[T, ...] frames of a final latent [1, C, T, H, W]: ``frames(latent)`` (decoded RGB) or the latent's own."""
    return frames(latent) if frames is not None else latent[0].transpose(0, 1).float()


def errors(x: torch.Tensor, references: dict[str, torch.Tensor], frames: Callable | None) -> dict[str, float]:
    """``error_REF`` and ``temporal_REF`` of a final latent against each reference."""
    out = {}
    clip = frames_of(x, frames)
    motion = clip.diff(dim=0)
    for name, reference in references.items():
        ref_motion = frames_of(reference, frames).diff(dim=0)
        out[f"error_{name}"] = float((x - reference).norm() / reference.norm())
        out[f"temporal_{name}"] = float((motion - ref_motion).norm() / ref_motion.norm())
    return out


def pack_runs() -> list:
    """Every ``SeaCacheRun`` class loaded in this process: the plain import's and the pack's (ComfyUI loads the
    pack under a module named after its folder, so its ``seacache_core`` is a second module object)."""
    return [module.SeaCacheRun for name, module in list(sys.modules.items())
            if name.endswith("seacache_core.run") and hasattr(module, "SeaCacheRun")]


@contextmanager
def full_history():
    """Benchmark-only: a branch may reuse only with ``order + 1`` computed steps in its history (a Newton history
    holds at most that many); with fewer its call computes, as with none (reason ``no_history``, which ranks after
    the warm-up, end, reset and cap reasons and before the window, as the run ranks it)."""
    classes = pack_runs()
    originals = [cls._plan for cls in classes]

    def patched(original):
        def _plan(self, groups, views, distances, step, sigma):
            plans = original(self, groups, views, distances, step, sigma)
            for plan in plans:
                state = self.states.get(plan.key)
                if (plan.reason in (None, "threshold", "window") and not plan.frozen and not plan.repeat
                        and state is not None and len(state.history) < self.config.order + 1):
                    plan.reason, plan.accumulated = "no_history", None
            return plans
        return _plan

    for cls, original in zip(classes, originals):
        cls._plan = patched(original)
    try:
        yield
    finally:
        for cls, original in zip(classes, originals):
            cls._plan = original


def measure(ns, cell, models: dict, variants: list[Variant], references: dict[str, torch.Tensor], pair: int,
            sample: Callable, per_step: float, steps: int, targets=TARGETS, thresholds=()) -> list[dict]:
    """One pair of ``cell``: each variant at each speed asked for ``targets`` (``thresholds``: at each of these
    thresholds instead, SeaCache Apply's threshold mode), one row each (one pair's values);
    ``sample(model, pair) -> (stack runs, final latent)``; ``models[name]`` the MODELs, ``references`` the pair's
    uncached latents the metrics are taken against; full calls are stack runs over ``per_step``, the uncached
    run's per step."""
    frames = cell.arch.frames if cell.arch.decodes else None
    knob, settings = ("threshold", thresholds) if thresholds else ("speedup", asked_speeds(steps, targets))
    rows = []
    for v in variants:
        for setting in settings:
            model = seacache(knob, **v.inputs)(ns, models[v.model], setting)
            with v.context():
                runs, x = sample(model, pair)
            timeline = "".join(r["decision"][0].upper() for r in last_report(model)["records"])
            rows.append(dict(cell=cell.name, method=v.name, setting=setting, pairs=[pair], full=[runs / per_step],
                             metrics=[errors(x, references, frames)], timelines=[timeline]))
    return rows


def at_own_calls(rows: list[dict], base: str, setting: float) -> dict[tuple, list[dict]]:
    """Per (cell, method) each pair's metrics at the full calls that method ``base`` made at ``setting`` on that pair
    (``peer_comparison.at_target`` over the method's runs of the pair): every variant at the base's own speed."""
    joined_rows = joined(rows)
    calls = {(r["cell"], p): f for r in joined_rows if (r["method"], r["setting"]) == (base, setting)
             for p, f in zip(r["pairs"], r["full"])}
    runs: dict[tuple, dict] = {}
    for r in joined_rows:
        for p, f, m in zip(r["pairs"], r["full"], r["metrics"]):
            runs.setdefault((r["cell"], r["method"]), {}).setdefault(p, []).append((f, m))
    return {key: [at_target(found, calls[(key[0], p)])[0] for p, found in by_pair.items()]
            for key, by_pair in runs.items()}


LISTS = ("pairs", "full", "metrics", "timelines")


def joined(rows: list[dict]) -> list[dict]:
    """Rows of the same cell, method and setting (one per pair) joined into one row with per-pair lists."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["cell"], r["method"], r["setting"])
        if key in out:
            for k in LISTS:
                out[key][k] = out[key][k] + r.get(k, [])
        else:
            out[key] = {**r, **{k: list(r.get(k, [])) for k in LISTS}}
    return list(out.values())


def at_targets(rows: list[dict], targets=TARGETS) -> dict[tuple, dict]:
    """Per (cell, method, target): per-pair metrics at the target and the pairs whose runs bracket it."""
    return matched(joined(rows), targets)


def metric(results: dict, key: tuple, name: str) -> list[float]:
    """One metric of every pair of ``results[key]``."""
    return [values[name] for values in results[key]["values"]]


def ratio_text(a: list[float], b: list[float]) -> str:
    """Paired ratio of per-pair values ``a`` over ``b``: "g [lo, hi] lower/pairs" (``pair_stats.paired_ratio``)."""
    g, lo, hi, lower = paired_ratio(a, b)
    return f"{g:.2f} [{lo:.2f}, {hi:.2f}] {lower}/{len(a)}"


def level_table(results: dict, columns: list[str], steps: int = 35) -> str:
    """Per cell, target and method the geometric mean of each metric in ``columns`` at the target, and how many pairs'
    runs bracket it."""
    lines = ["| proxy, shift | target | variant | " + " | ".join(columns) + " | pairs bracketed |",
             "| --- | --- | --- | " + " | ".join("---:" for _ in columns) + " | ---: |"]
    for (cell, method, target), result in results.items():
        values = " | ".join(f"{geometric_mean(metric(results, (cell, method, target), c)):.4f}" for c in columns)
        lines.append(f"| {cell} | {speed_label(target, steps)} | {method} | {values} | "
                     f"{result['bracketed']}/{result['pairs']} |")
    return "\n".join(lines)
