"""A speedup target as a setting (docs/algorithm.md §5): at each free decision the controller replays the gate's rule
over the rest of the run, with this step's distance and a prediction of the distances ahead, and takes the lowest
threshold whose plan fits the calls the target leaves. Replanning every step is the feedback; host floats keep the
decisions deterministic."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

_SEARCH_ITERATIONS = 40
_MAX_RISE = math.log(2.0)


def log_snr_steps(flow_sigmas) -> list[float]:
    """Each step's log-SNR step ``(s[k-1] - s[k]) / (s[k] (1 - s[k]))`` of a flow-convention schedule (step 0: 0), the
    shape the gate's distances follow."""
    steps = []
    for k in range(len(flow_sigmas) - 1):
        s = min(max(flow_sigmas[k], 1e-6), 1 - 1e-6)
        steps.append(0.0 if k == 0 else max(flow_sigmas[k - 1] - flow_sigmas[k], 0.0) / (s * (1 - s)))
    return steps


@dataclass
class _CallTrack:
    """What the controller saw of one call stream (the calls with one set of branch keys)."""

    calls: int = 0
    ran: int = 0
    steps: set[int] = field(default_factory=set)
    ratios: list[tuple[int, float]] = field(default_factory=list)  # (step, measured / predicted)


class SpeedController:
    """The threshold of each free decision for a target speedup, fed by the run (:meth:`threshold`, :meth:`observe`);
    ``forced(step, consecutive)`` is the run's rule for a later step."""

    def __init__(self, config, forced: Callable[[int, int], bool]):
        self.config, self.target = config, config.speed_target
        self.forced = forced
        self.shape: list[float] | None = None
        self._tracks: dict[tuple, _CallTrack] = {}
        self.best: float | None = None  # the highest speedup the forced computes allow
        self.lifted_cap: tuple[int, int] | None = None  # (configured, run's) cap, when lifted
        self.short = False  # extra evaluations left the target out of reach (warned once)

    def set_schedule(self, flow_sigmas) -> None:
        """The flow-convention schedule, the shape of the prediction."""
        self.shape = log_snr_steps(list(flow_sigmas))

    def _shape(self, step: int) -> float:
        return 1.0 if self.shape is None or step >= len(self.shape) else self.shape[step]

    def _ahead(self, track: _CallTrack, step: int, num_steps: int) -> list[float]:
        """The distances predicted after ``step``: the schedule's shape times the measured / predicted ratio (of the
        last two, raised along the rising slope of the last three, at most 2x)."""
        points = track.ratios[-3:]
        if not points:
            return [0.0] * (num_steps - step - 1)
        logs = [math.log(ratio) for _, ratio in points]
        base, slope, last = sum(logs[-2:]) / len(logs[-2:]), 0.0, points[-1][0]
        if len(points) > 1:
            xs = [s for s, _ in points]
            mean_x, mean_y = sum(xs) / len(xs), sum(logs) / len(logs)
            spread = sum((x - mean_x) ** 2 for x in xs)
            slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, logs)) / spread if spread > 0 else 0.0
        return [math.exp(base + min(max(slope, 0.0) * (k - last), _MAX_RISE)) * self._shape(k)
                for k in range(step + 1, num_steps)]

    def _plan(self, threshold: float, step: int, num_steps: int, accumulated: float, consecutive: int,
              ahead: list[float], forced: Callable[[int, int], bool] | None = None) -> int:
        """Stack runs the rule makes from ``step`` on at ``threshold``, from this step's ``accumulated`` and the
        distances ``ahead``; ``forced`` replaces the run's rule."""
        forced = self.forced if forced is None else forced
        ran = 0
        for k in range(step, num_steps):
            if k > step:
                if forced(k, consecutive):
                    ran, accumulated, consecutive = ran + 1, 0.0, 0
                    continue
                accumulated += ahead[k - step - 1]
            if accumulated < threshold:
                consecutive += 1
            else:
                ran, accumulated, consecutive = ran + 1, 0.0, 0
        return ran

    def reach(self, num_steps: int, forced: Callable[[int, int], bool] | None = None) -> float:
        """The highest speedup the forced computes allow over ``num_steps`` (step 0 always runs)."""
        ran = self._plan(math.inf, 0, num_steps, math.inf, 0, [0.0] * num_steps, forced)
        return num_steps / max(ran, 1)

    def reaches(self, num_steps: int, forced: Callable[[int, int], bool] | None = None) -> bool:
        """Whether the forced computes allow the target."""
        return self.target <= self.reach(num_steps, forced) * (1.0 + 1e-9)

    def _check_reachable(self, num_steps: int) -> None:
        """Once per run: warn when the target lies above what the forced computes allow."""
        if self.best is not None:
            return
        self.best = self.reach(num_steps)
        if self.target > self.best * (1.0 + 1e-9):
            logger.warning("SeaCache: speedup %.2fx is out of reach; min_steps, warmup, end, max_consecutive and the "
                           "reuse window leave at most %.2fx over %d steps (lower the target or relax them).",
                           self.target, self.best, num_steps)

    def threshold(self, call: tuple[Hashable, ...], step: int, num_steps: int, accumulated: float,
                  consecutive: int) -> float:
        """The lowest threshold whose plan of the remaining steps fits the budget, +inf when none does; extra
        evaluations per step (a Heun repeat) always compute and come out of the budget."""
        self._check_reachable(num_steps)
        if not math.isfinite(accumulated):
            return math.inf
        track = self._tracks.setdefault(call, _CallTrack())
        ahead = self._ahead(track, step, num_steps)
        remaining = num_steps - step
        extra = remaining * (track.calls - len(track.steps)) / len(track.steps) if track.steps else 0.0
        total = track.calls + remaining + extra
        budget = math.floor(total / self.target + 0.5) - track.ran - round(extra)
        plan = lambda threshold: self._plan(threshold, step, num_steps, accumulated, consecutive, ahead)
        if plan(0.0) <= budget:
            return 0.0
        if plan(math.inf) > budget:
            if extra and not self.short:
                self.short = True
                logger.warning("SeaCache: speedup %.2fx is out of reach with this sampler's extra evaluations per step "
                               "(they always compute); reusing wherever the gate may.", self.target)
            return math.inf
        low, high = 0.0, max(accumulated, *ahead, 1e-6)
        while plan(high) > budget:
            low, high = high, high * 2.0
        for _ in range(_SEARCH_ITERATIONS):
            middle = 0.5 * (low + high)
            low, high = (middle, high) if plan(middle) > budget else (low, middle)
        return high

    def observe(self, call: tuple[Hashable, ...], step: int | None, distance: float | None, computed: bool) -> None:
        """Count one committed call of the stream ``call`` and its measured distance."""
        track = self._tracks.setdefault(call, _CallTrack())
        track.calls += 1
        track.ran += computed
        if step is not None:
            track.steps.add(step)
        if step is not None and distance is not None and math.isfinite(distance) and distance > 0 and self._shape(step) > 0:
            track.ratios.append((step, distance / self._shape(step)))

    def summary(self, calls: int, ran: int) -> str:
        """The report's line: target, reached speedup, and whether the target was in reach."""
        reached = calls / ran if ran else 1.0
        line = f"speedup target {self.target:.2f}x, reached {reached:.2f}x"
        if self.lifted_cap is not None:
            configured, lifted = self.lifted_cap
            line += (f"; max_consecutive lifted from {configured} to {'no cap' if lifted == -1 else lifted} "
                     "for this target")
        if self.best is not None and self.target > self.best * (1.0 + 1e-9):
            line += (f" (out of reach: min_steps, warmup, end, max_consecutive and the reuse window allow at most "
                     f"{self.best:.2f}x; lower the target or relax them)")
        elif self.short:
            line += " (out of reach: the sampler's extra evaluations per step always compute; lower the target)"
        return line
