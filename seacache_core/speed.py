"""Speed as a setting: a controller that sets the gate's threshold at every step so that a run's stack calls reach
a target speedup (calls / ran) by its end (``SeaCacheConfig.speedup``; docs/algorithm.md §5).

At each free decision (no forced compute) the controller plans the rest of the run: it replays the gate's own rule
over the remaining steps (warmup, end, max_consecutive and the reuse window force computes by the run's own
rule, :func:`.run.forced_reason`), with this step's measured distance and a prediction of the distances ahead, and
takes the lowest threshold whose plan fits the calls left to run. The prediction is feedforward from the schedule:
each step's log-SNR step ``(s_prev - s) / (s (1 - s))`` in the flow convention, which follows the measured
distances' shape along the run (large first and last steps) far better than a constant does, scaled by the measured
/ predicted ratio of the last two steps and raised along that ratio's slope over the last three steps where it
rises (at most 2x): underpredicting the distances ahead starves the last steps, where they grow fastest on smooth
content, while overpredicting only holds calls back for later. Replanning at every step is the feedback: a run whose distances turn out larger than predicted gets a higher threshold later,
and calls the plan did not foresee (repeats, off-schedule evaluations, fallbacks) come out of the same budget.
Host floats only, so a run's decisions are deterministic. The plan uses every call the budget allows, so reuse
spreads over the run the way a fixed threshold spreads it, in proportion to the measured distances.

Where the forced computes alone need more calls than the target allows, the run first lifts its cap on reuses in a
row as far as the target needs (``SeaCacheConfig.speed_lifts_cap``; :meth:`SpeedController.reaches` is its test);
where even that is not enough, the controller reuses wherever it may, warns once per run and says so in the report.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

_SEARCH_ITERATIONS = 40
_MAX_RISE = math.log(2.0)  # the most the ratio's rising trend raises the prediction ahead


def log_snr_steps(flow_sigmas) -> list[float]:
    """Per step of a schedule in the flow convention (``steps + 1`` sigmas), its log-SNR step
    ``(s[k-1] - s[k]) / (s[k] (1 - s[k]))``, the shape the gate's distances follow (step 0 has none: 0)."""
    steps = []
    for k in range(len(flow_sigmas) - 1):
        s = min(max(flow_sigmas[k], 1e-6), 1 - 1e-6)
        steps.append(0.0 if k == 0 else max(flow_sigmas[k - 1] - flow_sigmas[k], 0.0) / (s * (1 - s)))
    return steps


@dataclass
class _CallTrack:
    """What the controller saw of one call stream (the calls with one set of branch keys: cond and uncond batched,
    or each of them, or one context window)."""

    calls: int = 0
    ran: int = 0
    steps: set[int] = field(default_factory=set)  # the schedule steps seen
    ratios: list[tuple[int, float]] = field(default_factory=list)  # (step, measured / predicted distance)


class SpeedController:
    """The threshold of each step for a target speedup; one per run, fed by the run (:meth:`threshold` at a free
    decision, :meth:`observe` at every commit). ``forced(step, consecutive)`` says whether the run's rule computes a
    later step whatever its distance, after ``consecutive`` reuses in a row; :meth:`set_schedule` gives the schedule
    in the flow convention (without it every step is predicted alike)."""

    def __init__(self, config, forced: Callable[[int, int], bool]):
        self.config, self.target = config, config.speed_target
        self.forced = forced
        self.shape: list[float] | None = None
        self._tracks: dict[tuple, _CallTrack] = {}
        self.best: float | None = None  # the highest speedup the forced computes allow (known after the first call)
        self.lifted_cap: tuple[int, int] | None = None  # (configured, run's) cap on reuses in a row, when lifted
        self.short = False  # the sampler's extra evaluations left the target out of reach (warned once)

    def set_schedule(self, flow_sigmas) -> None:
        """The run's schedule in the flow convention (``steps + 1`` sigmas): the shape of the prediction."""
        self.shape = log_snr_steps(list(flow_sigmas))

    def _shape(self, step: int) -> float:
        return 1.0 if self.shape is None or step >= len(self.shape) else self.shape[step]

    def _ahead(self, track: _CallTrack, step: int, num_steps: int) -> list[float]:
        """The distance predicted for each step after ``step``: the schedule's shape times the measured / predicted
        ratio (mean log of the last two, raised along the rising slope of the last three, at most 2x)."""
        points = track.ratios[-3:]
        if not points:
            return [0.0] * (num_steps - step - 1)
        logs = [math.log(ratio) for _, ratio in points]
        base, slope, last = sum(logs[-2:]) / len(logs[-2:]), 0.0, points[-1][0]
        if len(points) > 1:
            xs = [s for s, _ in points]
            mean_x, mean_y = sum(xs) / len(xs), sum(logs) / len(logs)
            spread = sum((x - mean_x) ** 2 for x in xs)  # 0 when the points share a step (a restarted schedule)
            slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, logs)) / spread if spread > 0 else 0.0
        return [math.exp(base + min(max(slope, 0.0) * (k - last), _MAX_RISE)) * self._shape(k)
                for k in range(step + 1, num_steps)]

    def _plan(self, threshold: float, step: int, num_steps: int, accumulated: float, consecutive: int,
              ahead: list[float], forced: Callable[[int, int], bool] | None = None) -> int:
        """Stack runs the gate's rule makes from ``step`` to the end at ``threshold``: ``accumulated`` is this
        step's accumulated distance (+inf computes it), ``ahead[k - step - 1]`` the distance predicted for step k;
        ``forced`` replaces the run's rule."""
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
        """The highest speedup the forced computes (the run's, or ``forced``) allow over ``num_steps`` steps: every
        step they leave free reuses, except step 0 (no history yet)."""
        ran = self._plan(math.inf, 0, num_steps, math.inf, 0, [0.0] * num_steps, forced)
        return num_steps / max(ran, 1)

    def reaches(self, num_steps: int, forced: Callable[[int, int], bool] | None = None) -> bool:
        """Whether the forced computes (the run's, or ``forced``) allow the target over ``num_steps`` steps."""
        return self.target <= self.reach(num_steps, forced) * (1.0 + 1e-9)

    def _check_reachable(self, num_steps: int) -> None:
        """Once per run: the highest speedup the forced computes allow; warn when the target lies above it."""
        if self.best is not None:
            return
        self.best = self.reach(num_steps)
        if self.target > self.best * (1.0 + 1e-9):
            logger.warning("SeaCache: speedup %.2fx is out of reach; warmup, end, max_consecutive and the reuse window "
                           "leave at most %.2fx over %d steps (lower the target or relax them).", self.target, self.best,
                           num_steps)

    def threshold(self, call: tuple[Hashable, ...], step: int, num_steps: int, accumulated: float,
                  consecutive: int) -> float:
        """The threshold for a free decision of the call stream ``call`` at ``step``: ``accumulated`` is the call's
        accumulated distance including this step's (the maximum over its branches), ``consecutive`` its reuses in
        a row. The lowest threshold whose plan of the remaining steps fits the budget; +inf when none does."""
        self._check_reachable(num_steps)
        if not math.isfinite(accumulated):
            return math.inf  # a changed input: the gate computes whatever the threshold
        track = self._tracks.setdefault(call, _CallTrack())
        ahead = self._ahead(track, step, num_steps)
        remaining = num_steps - step
        # evaluations beyond one per step so far (a Heun repeat, a midpoint off the schedule) always compute:
        # expect as many per remaining step, in the calls and out of the budget
        extra = remaining * (track.calls - len(track.steps)) / len(track.steps) if track.steps else 0.0
        total = track.calls + remaining + extra
        budget = math.floor(total / self.target + 0.5) - track.ran - round(extra)
        plan = lambda threshold: self._plan(threshold, step, num_steps, accumulated, consecutive, ahead)  # noqa: E731
        if plan(0.0) <= budget:
            return 0.0  # the budget runs every remaining step
        if plan(math.inf) > budget:
            if extra and not self.short:
                self.short = True
                logger.warning("SeaCache: speedup %.2fx is out of reach with this sampler's extra evaluations per step "
                               "(they always compute); reusing wherever the gate may.", self.target)
            return math.inf  # out of reach: reuse wherever the gate may
        low, high = 0.0, max(accumulated, *ahead, 1e-6)
        while plan(high) > budget:
            low, high = high, high * 2.0
        for _ in range(_SEARCH_ITERATIONS):
            middle = 0.5 * (low + high)
            low, high = (middle, high) if plan(middle) > budget else (low, middle)
        return high

    def observe(self, call: tuple[Hashable, ...], step: int | None, distance: float | None, computed: bool) -> None:
        """Count one committed call of the stream ``call`` at ``step``; ``distance`` its measured distance (None
        where none)."""
        track = self._tracks.setdefault(call, _CallTrack())
        track.calls += 1
        track.ran += computed
        if step is not None:
            track.steps.add(step)
        if step is not None and distance is not None and math.isfinite(distance) and distance > 0 and self._shape(step) > 0:
            track.ratios.append((step, distance / self._shape(step)))

    def summary(self, calls: int, ran: int) -> str:
        """One line for the report: the target, what the run reached, and whether the forced computes allowed it."""
        reached = calls / ran if ran else 1.0
        line = f"speedup target {self.target:.2f}x, reached {reached:.2f}x"
        if self.lifted_cap is not None:
            configured, lifted = self.lifted_cap
            line += (f"; max_consecutive lifted from {configured} to {'no cap' if lifted == -1 else lifted} "
                     "for this target")
        if self.best is not None and self.target > self.best * (1.0 + 1e-9):
            line += (f" (out of reach: warmup, end, max_consecutive and the reuse window allow at most {self.best:.2f}x; "
                     "lower the target or relax them)")
        elif self.short:
            line += " (out of reach: the sampler's extra evaluations per step always compute; lower the target)"
        return line
