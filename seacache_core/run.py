"""One sampling run of the gate (docs/algorithm.md §5-7): decide gives each call's Verdict, predict or commit applies
it; the run makes every state change. A Call carries a verdict to a seam (docs/architecture.md)."""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .config import SeaCacheConfig
from .extrapolate import ResidualHistory, quadratic_weight, schedule_shift
from .forecast import ChebyshevHistory
from .sea_filter import GainCache, Indicator, index_of
from .speed import SpeedController
from .stats import COMPUTED, FORCED, REUSED, RunStats, StepRecord

NEW, NEXT, REPEAT, RESET = "new", "next", "repeat", "reset"  # a call's relation to its branch's previous one
LOW_SHIFT_WARMUP, WARMUP_SHIFT_LIMIT, WARMUP_SPEED_LIMIT = 4, math.sqrt(3.0 * 5.0), math.sqrt(3.0 * 4.0)


@dataclass
class BranchState:
    """What the run keeps of one branch: its gate view (of the latent or the first block's input) at ``last_step``, that
    view's source dtype, and the history, which is never empty (a state exists once its branch computed)."""

    history: ResidualHistory
    indicator: torch.Tensor | None = None
    indicator_dtype: torch.dtype | None = None
    last_step: int | None = None
    last_sigma: float | None = None
    accumulated: float = 0.0
    consecutive: int = 0


@dataclass
class BranchPlan:
    """A verdict's plan for one branch, applied at commit: ``frozen`` keeps its state, ``repeat`` refreshes only the
    step's view and residual; ``reason`` is why it computes (None: it would reuse)."""

    key: Hashable
    items: tuple[int, ...]
    frozen: bool
    reason: str | None
    reset: bool = False
    repeat: bool = False
    distance: float | None = None
    accumulated: float | None = None
    indicator: torch.Tensor | None = field(default=None, repr=False)


@dataclass(eq=False)
class Verdict:
    """The decision for one gated call: ``reuse`` only if every branch (and rank) may; ``reason`` why it computes;
    ``distance`` and ``accumulated`` are branch maxima; ``committed`` is set by the run."""

    reuse: bool
    reason: str | None
    step: int | None
    sigma: float
    distance: float | None
    accumulated: float | None
    branches: tuple[BranchPlan, ...] = field(repr=False)
    batch: int
    latent_dtype: torch.dtype | None = None
    follows: bool = False
    committed: bool = False


def relation(state: BranchState | None, step: int, sigma: float) -> str:
    """How an on-schedule call relates to its branch's previous one: NEW, NEXT, REPEAT or RESET."""
    if state is None:
        return NEW
    if sigma > state.last_sigma:
        return RESET
    if step == state.last_step:
        return REPEAT
    return NEXT if step == state.last_step + 1 else RESET


def shift_warmup(flow_sigmas: Sequence[float], speed_target: float | None = None) -> int:
    """``warmup_steps`` None's value: 4 below shift 3.9 and speedup 3.5, else 1 (docs/quality.md, "Wan's warm-up")."""
    low_shift = schedule_shift(flow_sigmas) < WARMUP_SHIFT_LIMIT
    return LOW_SHIFT_WARMUP if low_shift and (speed_target or 0.0) < WARMUP_SPEED_LIMIT else 1


def forced_reason(config: SeaCacheConfig, step: int, num_steps: int, consecutive: int, cap: int, in_window: bool,
                  reset: bool = False, no_history: bool = False) -> str | None:
    """Why a branch computes at ``step`` whatever its distance, else None: the rule's one home, which the speed
    controller replays. A run shorter than ``min_steps`` reuses nothing: few steps lose more than they gain."""
    if num_steps < config.min_steps:
        return "few_steps"
    if step < config.warmup_steps:
        return "warmup"
    if step >= num_steps - config.end_steps:
        return "end"
    if reset:
        return "reset"
    if cap != -1 and consecutive >= cap:
        return "max_consecutive"
    if no_history:
        return "no_history"
    return None if in_window else "window"


def agreed_reuse(reuse: bool, device: torch.device) -> bool:
    """``reuse`` agreed by every rank of a sequence-parallel run (one all-reduce), so none skips a collective."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return reuse
    where = torch.device("cpu") if dist.get_backend() == "gloo" else device
    must_compute = torch.tensor([0 if reuse else 1], dtype=torch.int32, device=where)
    dist.all_reduce(must_compute, op=dist.ReduceOp.MAX)
    return not bool(must_compute.item())


def _group(keys: Sequence[Hashable]) -> dict[Hashable, tuple[int, ...]]:
    """The batch rows of each branch key, in order of first appearance."""
    groups: dict[Hashable, tuple[int, ...]] = {}
    for index, key in enumerate(keys):
        groups[key] = (*groups.get(key, ()), index)
    return groups


@dataclass(eq=False)
class Call:
    """A verdict carried into the model with the seam's buffers (contract: ``seams/base.py`` ``SeamCall``); the first
    failure is kept in ``failure`` and the model's own code runs, so nothing raises inside the model."""

    run: SeaCacheRun = field(repr=False)
    verdict: Verdict | None
    pending: tuple | None = field(default=None, repr=False)
    stack_skipped: bool | None = None
    predicted: torch.Tensor | None = field(default=None, repr=False)
    row: int = 0
    inputs: list[torch.Tensor] = field(default_factory=list, repr=False)
    outputs: list[torch.Tensor] = field(default_factory=list, repr=False)
    failure: Exception | None = None

    def guarded(self, function, *args):
        """``function(*args)``, or None once it or an earlier step of this call raised."""
        if self.failure is not None:
            return None
        try:
            return function(*args)
        except Exception as exc:
            self.failure = exc
            return None

    @torch.compiler.disable
    def enter(self, stack_in: torch.Tensor,
              block_view: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """The stack output for these rows on a reused call, else None; a pending call is decided here on
        ``block_view()``, with all its rows at once."""
        if self.failure is not None:
            return None
        try:
            if self.verdict is None:
                if block_view is None:
                    raise ValueError("the gate reads the first block's input, which this seam does not hand over")
                self.verdict = self.run.decide(block_view(), *self.pending)
            if self.stack_skipped is None:
                batch = self.verdict.batch
                like = stack_in if stack_in.shape[0] == batch else stack_in[:1].expand(batch, *stack_in.shape[1:])
                self.predicted = self.run.predict(self.verdict, like)
                self.stack_skipped = self.predicted is not None
            if self.stack_skipped:
                rows = stack_in.shape[0]
                self.row += rows
                return stack_in + self.predicted[self.row - rows : self.row]
            self.inputs.append(stack_in)
        except Exception as exc:
            self.failure = exc
        return None

    @torch.compiler.disable
    def leave(self, stack_out: torch.Tensor) -> None:
        """Keep the computed output of the rows entered last; commit the residual after the last row."""
        if self.failure is not None:
            return
        try:
            self.outputs.append(stack_out)
            if sum(o.shape[0] for o in self.outputs) < self.verdict.batch:
                return
            if len(self.outputs) == 1:
                residual = self.outputs[0] - self.inputs[0]
            else:
                residual = torch.cat([o - i for o, i in zip(self.outputs, self.inputs)])
            self.inputs.clear()
            self.outputs.clear()
            self.run.commit(self.verdict, residual)
        except Exception as exc:
            self.failure = exc


class SeaCacheRun:
    """The gate over one sampling run: schedule (``steps + 1`` sigmas; ``flow_sigmas`` in the flow convention for the
    speed controller), reuse window, branch states, statistics, and the lock serialising its calls. ``reuse_cap`` is
    ``max_consecutive``, or the cap a speed target lifted it to."""

    def __init__(self, config: SeaCacheConfig, sigmas: Sequence[float] | torch.Tensor,
                 reuse_steps: range | None = None, flow_sigmas: Sequence[float] | None = None):
        values = sigmas.flatten().tolist() if isinstance(sigmas, torch.Tensor) else list(sigmas)
        self.sigmas = [float(s) for s in values]
        flow = self.sigmas if flow_sigmas is None else list(flow_sigmas)
        if config.warmup_steps is None:
            config = dataclasses.replace(config, warmup_steps=shift_warmup(flow, config.speed_target))
        self.config = config
        self.steps = max(len(self.sigmas) - 1, 0)
        self.reuse_steps = range(self.steps) if reuse_steps is None else reuse_steps
        self.lock = threading.Lock()
        self.gains = GainCache()
        self.indicator = Indicator(config.gate, config.sound_weight, config.power)
        self.schedule_steps = {s: self.step_of(s) for s in self.sigmas[: self.steps]}
        self.alone = not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)
        self.states: dict[Hashable, BranchState] = {}
        self.stats = RunStats(steps=self.steps, min_steps=config.min_steps)
        self.speed: SpeedController | None = None
        self.quadratic_weight = config.quadratic_weight
        if self.quadratic_weight is None:
            self.quadratic_weight = quadratic_weight(flow)
        self.reuse_cap = config.max_consecutive
        if config.speed_target is not None:
            self.speed = SpeedController(config, self.forced_later)
            self.speed.set_schedule(flow)
            if config.speed_lifts_cap:
                self.reuse_cap = self._cap_for_target()
                if self.reuse_cap != config.max_consecutive:
                    self.speed.lifted_cap = (config.max_consecutive, self.reuse_cap)

    def step_of(self, sigma: float) -> int | None:
        """The step of ``sigma`` in the schedule, None off the schedule."""
        for i, s in enumerate(self.sigmas[: self.steps]):
            if math.isclose(s, sigma, rel_tol=1e-5, abs_tol=1e-7):
                return i
        return None

    def forced_later(self, step: int, consecutive: int, cap: int | None = None) -> bool:
        """Whether the rule forces a later step, under the run's cap or ``cap``."""
        cap = self.reuse_cap if cap is None else cap
        return forced_reason(self.config, step, self.steps, consecutive, cap, step in self.reuse_steps) is not None

    def _cap_for_target(self) -> int:
        """The smallest cap from the configured one up that reaches the speed target (bisection), -1 when none does."""
        configured = self.config.max_consecutive
        reaches = lambda cap: self.speed.reaches(self.steps, lambda step, run: self.forced_later(step, run, cap))
        if configured in (-1, 0) or configured >= self.steps or reaches(configured):
            return configured
        if self.speed.reach(self.steps) <= 1:  # no step is free: no cap would reach further
            return configured
        if not reaches(self.steps):
            return -1
        low, high = configured, self.steps
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if reaches(middle) else (middle, high)
        return high

    def new_history(self) -> ResidualHistory:
        """A new branch's residual history for the configured forecaster."""
        config = self.config
        if config.forecaster == "newton":
            return ResidualHistory(config.order, config.residual_storage, self.quadratic_weight)
        return ChebyshevHistory(config.order, config.residual_storage, degree=config.chebyshev_degree,
                                ridge_lambda=config.chebyshev_lambda, blend=config.chebyshev_blend,
                                capacity=config.chebyshev_capacity, step_span=max(self.steps, 1))

    @torch.compiler.disable
    def decide(self, latent: torch.Tensor, sigma: float | torch.Tensor, keys: Sequence[Hashable],
               filter_sigma: float | torch.Tensor | None = None, sound: torch.Tensor | None = None) -> Verdict:
        """The call's verdict: measure, plan each branch, agree; nothing changes until it is committed. ``sigma`` may be
        a one-value device tensor (read with the distances); ``filter_sigma`` is the flow sigma the filter assumes
        (None: ``sigma``). A rank that raises before agreeing still takes its part in the agreement."""
        agreed = False
        with self.lock:
            try:
                keys = list(keys)
                if len(keys) != latent.shape[0] or (sound is not None and sound.shape[0] != latent.shape[0]):
                    raise ValueError(f"got {len(keys)} keys for a batch of {latent.shape[0]}"
                                     + ("" if sound is None else f" and a sound batch of {sound.shape[0]}"))
                groups = _group(keys)
                previous = {key: self.states[key].indicator for key in groups
                            if key in self.states and self.states[key].indicator_dtype == latent.dtype}
                views, sigma, distances = self.indicator.measure(latent, sigma, filter_sigma, groups, previous,
                                                                 self.gains, sound)
                step = self.schedule_steps[sigma] if sigma in self.schedule_steps else self.step_of(sigma)
                plans = self._plan(groups, views, distances, step, sigma)
                wanted = all(not plan.frozen and plan.reason is None for plan in plans)
                agreed = True
                reuse = wanted if self.alone else agreed_reuse(wanted, latent.device)
            except Exception:
                if not (agreed or self.alone):
                    agreed_reuse(False, latent.device)
                raise
        forced = [plan.reason for plan in plans if plan.reason not in (None, "threshold")]
        reason = None if reuse else ("other_rank" if wanted else forced[0] if forced else "threshold")
        distance = max((p.distance for p in plans if p.distance is not None), default=None)
        accumulated = max((p.accumulated for p in plans if p.accumulated is not None), default=None)
        return Verdict(reuse, reason, step, sigma, distance, accumulated, tuple(plans), len(keys), latent.dtype)

    def _plan(self, groups: dict, views: dict, distances: dict, step: int | None, sigma: float) -> list[BranchPlan]:
        """Each branch's plan at ``step``: off the schedule, a repeat, forced, or its accumulated distance against the
        threshold (the speed controller's under a target)."""
        plans = []
        for key, items in groups.items():
            state = self.states.get(key)
            if step is None:
                plans.append(BranchPlan(key, items, frozen=True, reason="off_schedule"))
                continue
            kind = relation(state, step, sigma)
            if kind == REPEAT:
                plans.append(BranchPlan(key, items, frozen=False, reason="repeat", repeat=True, indicator=views[key]))
                continue
            no_history = state is None or state.indicator is None
            reason = forced_reason(self.config, step, self.steps, 0 if state is None else state.consecutive,
                                   self.reuse_cap, step in self.reuse_steps, kind == RESET, no_history)
            plans.append(BranchPlan(key, items, frozen=False, reason=reason, reset=kind == RESET,
                                    distance=distances.get(key, math.inf) if kind == NEXT else None,
                                    indicator=views[key]))
        if step is not None:
            threshold = self.config.threshold if self.speed is None else self._speed_threshold(groups, distances, step)
            for plan in plans:
                if plan.reason is None:
                    plan.accumulated = self.states[plan.key].accumulated + plan.distance
                    plan.reason = None if plan.accumulated < threshold else "threshold"
        return plans

    def _speed_threshold(self, groups, distances: dict[Hashable, float], step: int) -> float:
        """The speed controller's threshold, on the call's branch maxima."""
        states = [self.states.get(key) for key in groups]
        accumulated = max(s.accumulated + distances.get(k, math.inf) if s else math.inf for k, s in zip(groups, states))
        consecutive = max(s.consecutive if s else 0 for s in states)
        return self.speed.threshold(tuple(groups), step, self.steps, accumulated, consecutive)

    def pending(self, sigma: float | torch.Tensor, keys: Sequence[Hashable],
                filter_sigma: float | torch.Tensor | None = None) -> Call:
        """A first-block gate's call, decided when the seam enters the stack with the view."""
        return Call(self, None, pending=(sigma, list(keys), filter_sigma))

    @torch.compiler.disable
    def follow(self, keys: Sequence[Hashable], leaders: Sequence[Hashable], sigma: float) -> Verdict:
        """A pass following its leaders' call of the same step (skip-layer guidance): it reuses from its own history
        exactly when its leader reused; no record."""
        keys, leaders = list(keys), list(leaders)
        if len(keys) != len(leaders):
            raise ValueError(f"got {len(keys)} keys and {len(leaders)} leaders")
        groups, leader_of, sigma = _group(keys), dict(zip(keys, leaders)), float(sigma)
        step = self.schedule_steps[sigma] if sigma in self.schedule_steps else self.step_of(sigma)
        plans = []
        with self.lock:
            for key, items in groups.items():
                leader = self.states.get(leader_of[key])
                if step is None or leader is None:
                    reason = "off_schedule" if step is None else "no_leader"
                    plans.append(BranchPlan(key, items, frozen=True, reason=reason))
                    continue
                state = self.states.get(key)
                kind = relation(state, step, sigma)
                if leader.last_step != step or leader.consecutive == 0:
                    reason = "leader_computed"
                elif kind != NEXT or len(state.history) == 0:
                    reason = "no_history" if kind in (NEW, NEXT) else kind
                else:
                    reason = None
                plans.append(BranchPlan(key, items, frozen=False, reason=reason, reset=kind == RESET,
                                        repeat=kind == REPEAT, accumulated=0.0))
        reuse = all(not plan.frozen and plan.reason is None for plan in plans)
        reason = None if reuse else next(plan.reason for plan in plans if plan.reason is not None)
        return Verdict(reuse, reason, step, sigma, None, None, tuple(plans), len(keys), follows=True)

    @torch.compiler.disable
    def predict(self, verdict: Verdict, like: torch.Tensor) -> torch.Tensor | None:
        """On a reuse verdict, the extrapolated residual shaped like ``like`` (its device and dtype), the reuse
        committed; None when the call must compute (the host then commits, a "fallback")."""
        if not verdict.reuse:
            return None
        if like.shape[0] != verdict.batch:
            raise ValueError(f"like has batch {like.shape[0]}, the call {verdict.batch}")
        with self.lock:
            parts = []
            for plan in verdict.branches:
                predicted = self.states[plan.key].history.predict(verdict.step, like.device, like.dtype)
                if predicted.shape != (len(plan.items), *like.shape[1:]):
                    return None
                parts.append((plan.items, predicted))
            if len(parts) == 1:
                out = parts[0][1]
            else:
                out = like.new_empty(like.shape)
                for items, predicted in parts:
                    out[index_of(items)] = predicted
            self._apply(verdict, None)
        return out

    @torch.compiler.disable
    def commit(self, verdict: Verdict, residual: torch.Tensor) -> None:
        """Record a computed call's residual (output minus input); the history keeps a reference to it."""
        with self.lock:
            self._apply(verdict, residual)

    def _apply(self, verdict: Verdict, residual: torch.Tensor | None) -> None:
        """Apply the verdict: branch states, the speed controller's count, the record (under the lock)."""
        if verdict.committed:
            raise RuntimeError("this call was committed already")
        computed = residual is not None or not verdict.reuse
        active = [plan for plan in verdict.branches if not plan.frozen]
        if computed and active and residual is None:
            raise ValueError(f"a computed call must commit its stack residual (reason {verdict.reason})")
        if residual is not None and residual.shape[0] != verdict.batch:
            raise ValueError(f"residual has batch {residual.shape[0]}, the call {verdict.batch}")
        verdict.committed = True
        for plan in active:
            state = self.states.get(plan.key)
            if state is None:
                state = self.states[plan.key] = BranchState(self.new_history())
            if plan.reset:
                state.history.clear()
            state.indicator, state.indicator_dtype = plan.indicator, verdict.latent_dtype
            if plan.repeat:
                state.history.append(verdict.step, residual[index_of(plan.items)])
                continue
            state.last_step, state.last_sigma = verdict.step, verdict.sigma
            if computed:
                state.accumulated, state.consecutive = 0.0, 0
                state.history.append(verdict.step, residual[index_of(plan.items)])
            else:
                state.accumulated, state.consecutive = plan.accumulated, state.consecutive + 1
        if verdict.follows:
            return
        if not computed:
            kind, reason = REUSED, None
        elif verdict.reuse:
            kind, reason = COMPUTED, "fallback"
        else:
            kind, reason = (COMPUTED if verdict.reason == "threshold" else FORCED), verdict.reason
        branches = {str(plan.key): {"reason": plan.reason, "distance": plan.distance, "accumulated": plan.accumulated}
                    for plan in verdict.branches}
        if self.speed is not None:
            self.speed.observe(tuple(plan.key for plan in verdict.branches), verdict.step, verdict.distance, computed)
        self.stats.records.append(StepRecord(verdict.step, verdict.sigma, verdict.distance, verdict.accumulated,
                                             kind, reason, branches))

    def report(self, status: str) -> dict:
        """The run's JSON report: statistics, status, threshold (None under a speed target), steps, summary."""
        summary = self.stats.summary()
        if self.speed is not None:
            summary += "\n" + self.speed.summary(self.stats.calls, self.stats.ran)
        return {**self.stats.to_dict(), "status": status, "steps": self.steps, "summary": summary,
                "threshold": None if self.speed is not None else self.config.threshold,
                "speedup_target": self.config.speed_target}

    def release(self) -> None:
        """Free every view, residual and cached gain; the statistics stay."""
        self.states.clear()
        self.gains.clear()
