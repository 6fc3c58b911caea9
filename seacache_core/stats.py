"""A run's statistics (docs/algorithm.md §9): one record per gated call."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

COMPUTED = "computed"
REUSED = "reused"
FORCED = "forced"
_LETTERS = {FORCED: "F", COMPUTED: "C", REUSED: "R"}
_SCHEDULE_ENDS = ("warmup", "end", "no_history")  # what the schedule alone forces: its first steps (a branch's first
# step has no history where warmup_steps is 0) and its last
_WHY_COMPUTED = {"threshold": "reached the threshold (a higher threshold reuses more)",
                 "window": "lay outside the reuse window (start_percent / end_percent)"}


@dataclass
class StepRecord:
    """One gated call: ``decision`` "reused", "computed" (reason "threshold" or "fallback") or "forced" (``reason`` says
    why); ``distance`` and ``accumulated`` are branch maxima; ``branches`` each branch's own."""

    step: int | None
    sigma: float
    distance: float | None
    accumulated: float | None
    decision: str
    reason: str | None
    branches: dict[str, dict] = field(default_factory=dict)


def _json_safe(value):
    """Non-finite floats as None, so the report is strict JSON for the browser."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    return value


@dataclass
class RunStats:
    """A run's records and the counts and stack speedup estimate derived from them; the schedule's length and floor."""

    records: list[StepRecord] = field(default_factory=list)
    steps: int = 0
    min_steps: int = 0

    @property
    def calls(self) -> int:
        """Gated calls."""
        return len(self.records)

    @property
    def reused(self) -> int:
        """Calls whose stack was skipped."""
        return sum(r.decision == REUSED for r in self.records)

    @property
    def ran(self) -> int:
        """Calls that ran the stack."""
        return self.calls - self.reused

    @property
    def speedup(self) -> float:
        """Estimated stack speedup, calls / ran."""
        return self.calls / self.ran if self.ran else 1.0

    def to_dict(self) -> dict:
        """The JSON form; ``nothing_reused``: why a run that reused nothing did not, else None."""
        return {
            "calls": self.calls,
            "ran": self.ran,
            "reused": self.reused,
            "speedup": self.speedup,
            "records": [_json_safe(asdict(r)) for r in self.records],
            "nothing_reused": self.nothing_reused_because() if self.calls and not self.reused else None,
        }

    def summary(self) -> str:
        """Counts, speedup, forced reasons, a timeline and, when the run reused nothing, why not."""
        forced = Counter(r.reason for r in self.records if r.decision == FORCED)
        lines = [
            f"SeaCache: {self.calls} calls, {self.ran} ran the stack, {self.reused} reused, "
            f"estimated stack speedup {self.speedup:.2f}x",
            "forced: " + (", ".join(f"{reason} {n}" for reason, n in forced.items()) or "none"),
            "timeline (F forced, C computed, R reused): "
            + " ".join(_LETTERS[r.decision] for r in self.records),
        ]
        if self.calls and not self.reused:
            lines.append("reused nothing: " + self.nothing_reused_because())
        return "\n".join(lines)

    def nothing_reused_because(self) -> str:
        """Why a run that reused nothing did not: too few steps, the schedule's ends left no step free, or what made the
        steps between them compute (each step counted once, by its first evaluation)."""
        if any(r.reason == "few_steps" for r in self.records):
            return (f"{self.steps} steps are fewer than min_steps {self.min_steps} (few-step runs lose more than they "
                    "gain; lower min_steps to reuse)")
        steps = sorted({r.step for r in self.records if r.step is not None})
        free: dict[int, str] = {}
        for r in self.records:
            if r.step is not None and r.reason not in _SCHEDULE_ENDS:
                free.setdefault(r.step, r.reason)
        if not free:
            return f"{len(steps)} steps leave no step between the warm-up and the final steps"
        counts = Counter(free.values())
        if len(counts) == 1:
            steps_free = {1: "the step", 2: "both steps"}.get(len(free), f"all {len(free)} steps")
            return f"{steps_free} free to reuse {_why_computed(next(iter(counts)))}"
        return f"of the {len(free)} steps free to reuse, " + ", ".join(
            f"{n} {_why_computed(reason)}" for reason, n in counts.most_common())


def _why_computed(reason: str | None) -> str:
    return _WHY_COMPUTED.get(reason, f"computed ({reason})")
