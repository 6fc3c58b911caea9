"""Statistics over prompt/seed pairs that the quality benchmarks share: a pair's error at a target count of full
calls (interpolated between two runs), geometric means, paired ratios and 95 % intervals.

A sweep row is a dict of one variant at one setting with per-pair lists: ``section`` (proxy and shift), ``gate``,
``order``, ``full`` (full calls per pair) and ``error`` (per pair). A variant's two settings are two rows with the
same section, gate and order, and bracket the target when one computes more full calls and the other fewer.
"""

from __future__ import annotations

import math

EXACT = 1e-12  # an exact (zero) error counts as this much, so that its logarithm and ratios stay finite


def log_error(value: float) -> float:
    """The logarithm every statistic here takes of an error, an exact one counting as :data:`EXACT`."""
    return math.log(max(value, EXACT))


def interpolated(fa: float, ea: float, fb: float, eb: float, target: float) -> float:
    """One pair's error at ``target`` full calls from two runs (full calls, error): log error linear in full calls,
    the nearer run's error where the two do not bracket the target (never extrapolated)."""
    la, lb = log_error(ea), log_error(eb)
    w = 0.5 if fa == fb else min(max((target - fa) / (fb - fa), 0.0), 1.0)
    return math.exp(la + w * (lb - la))


def by_variant(rows: list[dict]) -> dict[tuple, list[dict]]:
    """Rows grouped per (section, gate, order), in first-seen order."""
    grouped: dict[tuple, list[dict]] = {}
    for r in rows:
        grouped.setdefault((r["section"], r["gate"], r["order"]), []).append(r)
    return grouped


def matched(rows: list[dict], targets: dict[str, float]) -> dict[tuple, list[float]]:
    """Per (section, gate, order) each pair's error at its section's target full calls (``targets[section]``): log
    error interpolated linearly in full calls between the variant's two settings (the nearer setting's error where
    they do not bracket the target: never extrapolated)."""
    out = {}
    for key, (a, b) in ((k, v[:2]) for k, v in by_variant(rows).items()):
        target = targets[key[0]]
        out[key] = [interpolated(*values, target) for values in zip(a["full"], a["error"], b["full"], b["error"])]
    return out


def bracketed(rows: list[dict], targets: dict[str, float]) -> tuple[int, int]:
    """(pair runs whose two settings bracket their section's target full calls, all pair runs) over every variant."""
    inside = total = 0
    for (section, _, _), (a, b) in ((k, v[:2]) for k, v in by_variant(rows).items()):
        target = targets[section]
        inside += sum(min(fa, fb) <= target <= max(fa, fb) for fa, fb in zip(a["full"], b["full"]))
        total += len(a["full"])
    return inside, total


def paired_ratio(a: list[float], b: list[float]) -> tuple[float, float, float, int]:
    """Geometric mean of a/b over pairs, its 95 % interval (1.96 standard errors of the mean log ratio), and
    the number of pairs where a is lower (an exact error counts as :data:`EXACT`)."""
    logs = [log_error(x) - log_error(y) for x, y in zip(a, b)]
    mean, half = mean_ci(logs)
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half), sum(v < 0 for v in logs)


def geometric_mean(values: list[float]) -> float:
    """Geometric mean; an exact (zero) error counts as :data:`EXACT`."""
    return math.exp(sum(map(log_error, values)) / len(values))


def mean_ci(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95 % interval (1.96 standard errors) over pairs."""
    n = len(values)
    mean = sum(values) / n
    half = 1.96 * math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1) / n) if n > 1 else 0.0
    return mean, half
