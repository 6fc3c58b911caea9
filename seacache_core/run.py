"""One SeaCache run: the gate of docs/algorithm.md §5-7 over one sampling run, and the calls it decides.

A host (the ComfyUI wrappers, the demo's sampler) creates a :class:`SeaCacheRun` at run start with the run's sigma
schedule, then for each call of the skippable stack asks :meth:`SeaCacheRun.decide` (the stack's noisy latent, the
call's sigma, one branch key per batch item) and carries the call out through the returned :class:`Call`: the seam
enters the stack with its input (the predicted output on a reused call, None when the stack must run) and leaves
it with the computed output, whose residual is then committed. A call that never passed the stack is dropped
(its output is exact). :meth:`SeaCacheRun.run` does all of it for a stack that is one callable. Under a gate that
reads the first block's input (``sea_filter.FIRST_BLOCK_GATES``) the host asks :meth:`SeaCacheRun.pending`
instead: the same call, decided when the seam enters the stack and hands over that input.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from .config import SeaCacheConfig
from .extrapolate import ResidualHistory, quadratic_weight
from .forecast import ChebyshevHistory
from .sea_filter import GainCache, Indicator
from .speed import SpeedController
from .stats import COMPUTED, FORCED, REUSED, RunStats, StepRecord

# How a call relates to its branch's previous on-schedule call.
NEW = "new"  # the branch has no state yet
NEXT = "next"  # the adjacent step of the same run
REPEAT = "repeat"  # the same step again (a second evaluation at one sigma)
RESET = "reset"  # a non-adjacent step, or sigma went up (a new run)


@dataclass
class BranchState:
    """What the run remembers of one branch (cond, uncond, or a batch entry with its own conditioning):
    ``indicator`` is the gate's view of the branch's latent (or first block's input) at ``last_step``
    (:class:`.sea_filter.Indicator`) and ``indicator_dtype`` the dtype of the tensor it came from (a dtype change
    makes the distance +inf)."""

    history: ResidualHistory
    indicator: torch.Tensor | None = None
    indicator_dtype: torch.dtype | None = None
    last_step: int | None = None
    last_sigma: float | None = None
    accumulated: float = 0.0
    consecutive: int = 0


@dataclass
class BranchPlan:
    """What :meth:`SeaCacheRun.decide` concluded for one branch of a call; :meth:`Call.commit` applies it.

    ``frozen`` branches (off-schedule evaluations) keep their state untouched. A ``repeat`` branch (a second
    evaluation at the step it already saw, as Heun's corrector makes) computes and refreshes only that step's view
    and residual, so the next step compares with and extrapolates from the latest evaluation. ``reason`` is why the
    branch must compute, None when it alone would reuse; ``accumulated`` is set only where the distance was
    accumulated."""

    key: Hashable
    items: tuple[int, ...]
    frozen: bool
    reason: str | None
    reset: bool = False
    repeat: bool = False
    distance: float | None = None
    accumulated: float | None = None
    indicator: torch.Tensor | None = field(default=None, repr=False)


def relation(state: BranchState | None, step: int, sigma: float) -> str:
    """How an on-schedule call relates to the branch's previous one (NEW, NEXT, REPEAT or RESET)."""
    if state is None:
        return NEW
    if sigma > state.last_sigma:
        return RESET
    if step == state.last_step:
        return REPEAT
    return NEXT if step == state.last_step + 1 else RESET


def forced_reason(config: SeaCacheConfig, step: int, num_steps: int, consecutive: int, cap: int, in_window: bool,
                  reset: bool = False, no_history: bool = False) -> str | None:
    """Why a branch must compute at ``step`` whatever its distance, or None when the threshold decides: the one
    home of this rule, which the speed controller replays for the steps ahead (with no reset and a history).
    ``cap`` is the run's cap on reuses in a row (``config.max_consecutive``, or what a speed target lifted it to:
    :attr:`SeaCacheRun.max_consecutive`). Precedence: warmup, end, reset, max_consecutive, no_history, window."""
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
    """``reuse`` when this process samples alone. Across the ranks of a sequence-parallel run (``torch.distributed``
    with more than one rank; every rank samples the full latent and the attention is split), True only if every
    rank may reuse: a rank that skipped the stack would skip the collectives inside it and hang the others. One
    all-reduce MAX of "must compute" per gated call (on ``device`` for NCCL, on the CPU for gloo); every rank makes
    it once per gated call, which holds when all ranks sample the same run."""
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return reuse
    where = torch.device("cpu") if dist.get_backend() == "gloo" else device
    must_compute = torch.tensor([0 if reuse else 1], dtype=torch.int32, device=where)
    dist.all_reduce(must_compute, op=dist.ReduceOp.MAX)
    return not bool(must_compute.item())


def _group(keys: Sequence[Hashable]) -> dict[Hashable, tuple[int, ...]]:
    """The batch rows of each branch key, keys in order of first appearance."""
    groups: dict[Hashable, tuple[int, ...]] = {}
    for index, key in enumerate(keys):
        groups[key] = (*groups.get(key, ()), index)
    return groups


def _rows(items: tuple[int, ...]) -> slice | list[int]:
    """An index for the rows ``items``: a slice when they are consecutive (cond and uncond halves always are), so no
    index tensor is copied to the device (a copy from pageable host memory waits for the GPU)."""
    if items == tuple(range(items[0], items[-1] + 1)):
        return slice(items[0], items[-1] + 1)
    return list(items)


@dataclass(eq=False)
class Call:
    """One gated call: the run's verdict, carried out where the seam enters and leaves the stack.

    ``reuse`` is True only when every branch may reuse (and, in a sequence-parallel run, every rank). ``reason`` says
    why the call computes (warmup, end, reset, max_consecutive, no_history, window, off_schedule, repeat,
    other_rank, threshold; a follower's: leader_computed, no_leader, no_history, repeat, reset, off_schedule), None
    on reuse. ``distance`` and ``accumulated`` are maxima over the branches. ``follows`` marks a guidance pass that
    follows its leaders' decision (:meth:`SeaCacheRun.follow`; no record of its own). ``pending`` holds, for a call
    of a first-block gate (:meth:`SeaCacheRun.pending`), what its decision needs besides the first block's view,
    (sigma, keys, filter_sigma), until :meth:`enter` takes the verdict; every verdict field is unset until then.

    The seam contract: :meth:`enter` with the stack input (rows in batch order, all at once or item by item) returns
    the output to use instead of running the stack on a reused call, else None; :meth:`leave` records the computed
    output and commits the residual once every row has passed. Neither raises inside the model: the first failure
    is kept in ``failure`` and every later step does nothing, so the model's own code computes (the host then
    computes the rest of the run whole); a seam runs any other step of its own inside the model through
    :meth:`guarded`. A seam that can reach the first block's input hands :meth:`enter` a function giving its view;
    only a pending call calls it. ``done``: the call was committed; a call that never passed the stack is simply
    dropped (the model ran whole: its output is exact)."""

    run: SeaCacheRun = field(repr=False)
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
    reusing: bool | None = None  # decided when the stack is first entered
    predicted: torch.Tensor | None = field(default=None, repr=False)
    row: int = 0
    inputs: list[torch.Tensor] = field(default_factory=list, repr=False)
    outputs: list[torch.Tensor] = field(default_factory=list, repr=False)
    failure: Exception | None = None
    done: bool = False  # committed: the run has the call's outcome
    pending: tuple | None = field(default=None, repr=False)

    def guarded(self, step, *args):
        """``step(*args)`` inside someone else's forward; None (run the model's own code) once it or an earlier
        step raised."""
        if self.failure is not None:
            return None
        try:
            return step(*args)
        except Exception as exc:  # noqa: BLE001 - any failure of SeaCache's code falls back to the whole computation
            self.failure = exc
            return None

    @torch.compiler.disable
    def enter(self, stack_in: torch.Tensor,
              first_block: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Stack output for these rows on a reused call (input plus the extrapolated residual), else None (also once
        SeaCache's code failed in this call: the stack then runs). ``first_block`` gives the first block's view of
        every item, ``[B, D, T, H, W]`` (``first_block.first_block_view``), on which a pending call is decided here;
        a pending call must enter with all its rows at once."""
        if self.failure is not None:
            return None
        try:
            if self.pending is not None:
                self._decide(first_block)
            if self.reusing is None:
                like = stack_in if stack_in.shape[0] == self.batch else stack_in[:1].expand(self.batch, *stack_in.shape[1:])
                self.predicted = self.predict(like)
                self.reusing = self.predicted is not None
            if self.reusing:
                rows = stack_in.shape[0]
                self.row += rows
                return stack_in + self.predicted[self.row - rows : self.row]
            self.inputs.append(stack_in)
        except Exception as exc:  # noqa: BLE001 - any failure of SeaCache's code falls back to the whole computation
            self.failure = exc
        return None

    def _decide(self, first_block: Callable[[], torch.Tensor] | None) -> None:
        """Take the verdict of a pending call on the first block's view."""
        if first_block is None:
            raise ValueError("the gate reads the first block's input, which this seam does not hand over")
        sigma, keys, filter_sigma = self.pending
        verdict = self.run.decide(first_block(), sigma, keys, filter_sigma)
        for name in ("reuse", "reason", "step", "sigma", "distance", "accumulated", "branches", "latent_dtype"):
            setattr(self, name, getattr(verdict, name))
        self.pending = None

    @torch.compiler.disable
    def leave(self, stack_out: torch.Tensor) -> None:
        """Record the computed output of the rows entered last; commit the residual after the last row."""
        if self.failure is not None:
            return
        try:
            self.outputs.append(stack_out)
            if sum(o.shape[0] for o in self.outputs) < self.batch:
                return
            if len(self.outputs) == 1:
                residual = self.outputs[0] - self.inputs[0]
            else:
                residual = torch.cat([o - i for o, i in zip(self.outputs, self.inputs)])
            self.inputs.clear()
            self.outputs.clear()
            self.commit(residual)
        except Exception as exc:  # noqa: BLE001 - any failure of SeaCache's code falls back to the whole computation
            self.failure = exc

    @torch.compiler.disable
    def predict(self, like: torch.Tensor) -> torch.Tensor | None:
        """On a reuse decision, the extrapolated residual of every item, shaped like the stack input ``like``
        [B, ...] (its device and dtype), with the reuse committed; None when the call must compute (no reuse, or a
        branch's history does not fit ``like``: the caller then commits the computed residual, a "fallback")."""
        if not self.reuse:
            return None
        if like.shape[0] != self.batch:
            raise ValueError(f"like has batch {like.shape[0]}, the call {self.batch}")
        with self.run.lock:
            parts = []
            for plan in self.branches:
                predicted = self.run.states[plan.key].history.predict(self.step, like.device, like.dtype)
                if predicted.shape != (len(plan.items), *like.shape[1:]):
                    return None
                parts.append((plan.items, predicted))
            if len(parts) == 1:
                out = parts[0][1]
            else:
                out = like.new_empty(like.shape)
                for items, predicted in parts:
                    out[_rows(items)] = predicted
            self._commit(None)
        return out

    @torch.compiler.disable
    def commit(self, residual: torch.Tensor) -> None:
        """Record the stack residual [B, ...] (output minus input) of a computed call. The history keeps a reference
        to it (no copy when one branch holds the whole batch): do not modify it in place afterwards."""
        with self.run.lock:
            self._commit(residual)

    def _commit(self, residual: torch.Tensor | None) -> None:
        """Apply the branch plans and append the call's record (under the run's lock); ``residual`` None: the
        predicted residual was applied."""
        if self.done:
            raise RuntimeError("this call was committed already")
        computed = residual is not None or not self.reuse
        active = [plan for plan in self.branches if not plan.frozen]
        if computed and active and residual is None:
            raise ValueError(f"a computed call must commit its stack residual (reason {self.reason})")
        if residual is not None and residual.shape[0] != self.batch:
            raise ValueError(f"residual has batch {residual.shape[0]}, the call {self.batch}")
        self.done = True
        run = self.run
        for plan in active:
            state = run.states.get(plan.key)
            if state is None:
                state = run.states[plan.key] = BranchState(run.new_history())
            if plan.reset:
                state.history.clear()
            state.indicator, state.indicator_dtype = plan.indicator, self.latent_dtype
            if plan.repeat:
                state.history.append(self.step, residual[_rows(plan.items)])
                continue
            state.last_step, state.last_sigma = self.step, self.sigma
            if computed:
                state.accumulated, state.consecutive = 0.0, 0
                state.history.append(self.step, residual[_rows(plan.items)])
            else:
                state.accumulated, state.consecutive = plan.accumulated, state.consecutive + 1
        if self.follows:
            return
        if not computed:
            kind, reason = REUSED, None
        elif self.reuse:
            kind, reason = COMPUTED, "fallback"
        else:
            kind, reason = (COMPUTED if self.reason == "threshold" else FORCED), self.reason
        branches = {str(plan.key): {"reason": plan.reason, "distance": plan.distance, "accumulated": plan.accumulated}
                    for plan in self.branches}
        if run.speed is not None:
            run.speed.observe(tuple(plan.key for plan in self.branches), self.step, self.distance, computed)
        run.stats.records.append(StepRecord(self.step, self.sigma, self.distance, self.accumulated, kind, reason, branches))


class SeaCacheRun:
    """The gate over one sampling run: its schedule, reuse window, speed controller, branch states, statistics and
    report, and the lock that serialises concurrent calls of the run (cond and uncond in threads on two devices);
    each residual stays on its call's device. State is kept per branch key, so cond and uncond (separate calls or
    batched in one) are gated alike; a call reuses only if all its branches may.

    ``sigmas``: the run's schedule, ``steps + 1`` values ending at the final sigma (a call whose sigma is not one of
    its steps is off the schedule: computed, state untouched). ``reuse_steps``: the steps where reuse may happen
    (None: all). ``flow_sigmas``: the schedule in the flow convention, for the speed controller's prediction
    (None: the schedule already is one). The host also counts here what it ran around the gate: ``uncached_calls``
    (calls that never passed the stack), guidance passes, and ``stopped`` (why SeaCache stopped caching mid-run).

    ``max_consecutive`` is the run's cap on reuses in a row: the configured one, or, where a speed target needs it
    (``config.speed_lifts_cap``), the smallest larger one that lets the forced computes reach the target, else -1
    (no cap); the forced rule and the speed controller read this one."""

    def __init__(self, config: SeaCacheConfig, sigmas: Sequence[float] | torch.Tensor,
                 reuse_steps: range | None = None, flow_sigmas: Sequence[float] | None = None):
        self.config = config
        values = sigmas.flatten().tolist() if isinstance(sigmas, torch.Tensor) else list(sigmas)
        self.sigmas = [float(s) for s in values]
        self.steps = max(len(self.sigmas) - 1, 0)
        self.reuse_steps = range(self.steps) if reuse_steps is None else reuse_steps
        self.lock = threading.Lock()
        self.gains = GainCache()
        self.indicator = Indicator(config.gate, config.sound_weight)
        self.states: dict[Hashable, BranchState] = {}
        self.stats = RunStats()
        self.speed: SpeedController | None = None
        self.quadratic_weight = config.quadratic_weight  # None: follows the schedule's shift
        if self.quadratic_weight is None:
            self.quadratic_weight = quadratic_weight(self.sigmas if flow_sigmas is None else list(flow_sigmas))
        self.max_consecutive = config.max_consecutive
        if config.speed_target is not None:
            self.speed = SpeedController(config, self.forced_later)
            self.speed.set_schedule(self.sigmas if flow_sigmas is None else list(flow_sigmas))
            if config.speed_lifts_cap:
                self.max_consecutive = self._cap_for_target()
                if self.max_consecutive != config.max_consecutive:
                    self.speed.lifted_cap = (config.max_consecutive, self.max_consecutive)
        self.uncached_calls = 0
        self.guidance_calls = self.guidance_followed = self.guidance_reused = 0
        self.stopped: str | None = None

    def step_of(self, sigma: float) -> int | None:
        """Index of ``sigma`` among the schedule's steps, None for an evaluation off the schedule."""
        for i, s in enumerate(self.sigmas[: self.steps]):
            if math.isclose(s, sigma, rel_tol=1e-5, abs_tol=1e-7):
                return i
        return None

    def forced_later(self, step: int, consecutive: int, max_consecutive: int | None = None) -> bool:
        """Whether a later step computes whatever its distance (the speed controller's plan), under the run's cap or
        ``max_consecutive``."""
        cap = self.max_consecutive if max_consecutive is None else max_consecutive
        return forced_reason(self.config, step, self.steps, consecutive, cap, step in self.reuse_steps) is not None

    def _cap_for_target(self) -> int:
        """The smallest cap on reuses in a row, from the configured one up, whose forced computes allow the speed
        target over this run's steps and reuse window; -1 (no cap) when none does. A cap of 0 (never reuse) stays.
        The speedup the forced computes allow grows with the cap, so the search is a bisection."""
        configured = self.config.max_consecutive
        reaches = lambda cap: self.speed.reaches(self.steps, lambda step, run: self.forced_later(step, run, cap))  # noqa: E731
        if configured in (-1, 0) or configured >= self.steps or reaches(configured):
            return configured  # no cap, never reuse, a cap no run of these steps meets, or one that allows the target
        if not reaches(self.steps):  # a cap of `steps` is no cap
            return -1
        low, high = configured, self.steps  # low does not reach the target, high does
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if reaches(middle) else (middle, high)
        return high

    def new_history(self) -> ResidualHistory:
        """A new branch's residual history for the configured forecaster. The Chebyshev fit maps this run's steps
        onto [-1, 1] and fits what the Newton extrapolation misses (centre "newton"): on the trained Cosmos3 proxy
        both had lower errors at 2x to 4x than Spectrum's fixed 50-step map and uncentred fit (docs/spectrum.md,
        "Time map and centring")."""
        config = self.config
        if config.forecaster == "newton":
            return ResidualHistory(config.order, config.residual_storage, self.quadratic_weight)
        return ChebyshevHistory(config.order, config.residual_storage, degree=config.chebyshev_degree,
                                ridge_lambda=config.chebyshev_lambda, blend=config.chebyshev_blend,
                                capacity=config.chebyshev_capacity, step_span=max(self.steps, 1), centre="newton")

    @torch.compiler.disable
    def decide(self, latent: torch.Tensor, sigma: float | torch.Tensor, keys: Sequence[Hashable],
               filter_sigma: float | torch.Tensor | None = None, sound: torch.Tensor | None = None) -> Call:
        """The call's verdict; no state changes until the call commits.

        ``latent`` [B, C, T, H, W] or [B, C, H, W] is what the stack's model call sees, ``keys[i]`` the branch of
        item i. ``sigma`` is a float, or a one-value tensor on the latent's device read together with the distances
        (one host read per call; float64 keeps its decisions those of the host float). ``filter_sigma`` is the noise
        level in the flow convention the SEA filter assumes (latent = (1 - s) x0 + s eps); None: ``sigma`` is one.
        ``sound``: the call's sound latent of an audio-video model ([B, C, T, ...], time on dim 2), read with the
        video when ``config.sound_weight`` > 0. In a sequence-parallel run the verdict is agreed across ranks; a
        call that raises before agreeing still takes its part ("compute"), so the ranks' collectives stay matched."""
        agreed = False
        with self.lock:
            try:
                keys = list(keys)
                if len(keys) != latent.shape[0] or (sound is not None and sound.shape[0] != latent.shape[0]):
                    raise ValueError(f"got {len(keys)} keys for a batch of {latent.shape[0]}"
                                     + ("" if sound is None else f" and a sound batch of {sound.shape[0]}"))
                groups = _group(keys)
                if latent.ndim not in (4, 5):
                    raise ValueError(f"latent must be [B, C, T, H, W] or [B, C, H, W], got shape {tuple(latent.shape)}")
                # The views and the distances of every branch with a previous view of this dtype, on the device.
                filter_at = sigma if filter_sigma is None else filter_sigma
                # the filter's prior exponent: the configured one, else 3 for a video latent, 2 for a single frame;
                # 3 for the first block's tokens of images too, as the published indicator filters them
                power = 3.0 if latent.ndim == 5 and (latent.shape[2] > 1 or self.indicator.reads_first_block) else 2.0
                power = power if self.config.power is None else float(self.config.power)
                at = (filter_at, power, (-3, -2, -1) if latent.ndim == 5 else (-2, -1), self.gains)
                with torch.no_grad():
                    observed, shapes = self.indicator.observe(latent, at, sound)
                    views = {key: observed[_rows(items)] for key, items in groups.items()}
                    measured = {key: self.indicator.distances(views[key], self.states[key].indicator, at, shapes).mean()
                                for key in groups if key in self.states and self.states[key].indicator_dtype == latent.dtype}
                values = [] if not isinstance(sigma, torch.Tensor) else [sigma.reshape(1).to(latent.device, torch.float64)]
                if measured:
                    values.append(torch.stack(list(measured.values())).to(torch.float64))
                read = torch.cat(values).tolist() if values else []  # the call's one host read
                if isinstance(sigma, torch.Tensor):
                    sigma, *read = read
                sigma, distances = float(sigma), dict(zip(measured, read))
                step = self.step_of(sigma)
                plans = []
                for key, items in groups.items():
                    state = self.states.get(key)
                    call_relation = NEW if step is None else relation(state, step, sigma)
                    if step is None:
                        plans.append(BranchPlan(key, items, frozen=True, reason="off_schedule"))
                    elif call_relation == REPEAT:
                        plans.append(BranchPlan(key, items, frozen=False, reason="repeat", repeat=True, indicator=views[key]))
                    else:
                        distance = distances.get(key, math.inf) if call_relation == NEXT else None
                        no_history = state is None or state.indicator is None or len(state.history) == 0
                        reason = forced_reason(self.config, step, self.steps, 0 if state is None else state.consecutive,
                                               self.max_consecutive, step in self.reuse_steps, call_relation == RESET,
                                               no_history)
                        plans.append(BranchPlan(key, items, frozen=False, reason=reason, reset=call_relation == RESET,
                                                distance=distance, indicator=views[key]))
                if step is not None:
                    threshold = self.config.threshold if self.speed is None else self._speed_threshold(groups, distances, step)
                    for plan in plans:
                        if plan.reason is None:
                            plan.accumulated = self.states[plan.key].accumulated + plan.distance
                            plan.reason = None if plan.accumulated < threshold else "threshold"
                wanted = all(not plan.frozen and plan.reason is None for plan in plans)
                agreed = True
                reuse = agreed_reuse(wanted, latent.device)
            except Exception:
                if not agreed:
                    agreed_reuse(False, latent.device)  # this rank's part in the call's agreement (no-op alone)
                raise
            forced = [plan.reason for plan in plans if plan.reason not in (None, "threshold")]
            reason = None if reuse else ("other_rank" if wanted else forced[0] if forced else "threshold")
            distance = max((p.distance for p in plans if p.distance is not None), default=None)
            accumulated = max((p.accumulated for p in plans if p.accumulated is not None), default=None)
            return Call(self, reuse, reason, step, sigma, distance, accumulated, tuple(plans), len(keys), latent.dtype)

    def _speed_threshold(self, groups, distances: dict[Hashable, float], step: int) -> float:
        """The speed controller's threshold for this call: its accumulated distance and reuses in a row are the
        maxima over its branches (+inf for a branch without a previous step)."""
        states = [self.states.get(key) for key in groups]
        accumulated = max(s.accumulated + distances.get(k, math.inf) if s else math.inf for k, s in zip(groups, states))
        consecutive = max(s.consecutive if s else 0 for s in states)
        return self.speed.threshold(tuple(groups), step, self.steps, accumulated, consecutive)

    def pending(self, sigma: float | torch.Tensor, keys: Sequence[Hashable],
                filter_sigma: float | torch.Tensor | None = None) -> Call:
        """A call of a first-block gate, decided when the seam enters the stack with the first block's view
        (:meth:`Call.enter`), on that view as :meth:`decide` decides on a latent; the arguments are :meth:`decide`'s.
        Nothing is read or changed until then."""
        keys = list(keys)
        return Call(self, False, None, None, math.nan, None, None, (), len(keys), pending=(sigma, keys, filter_sigma))

    @torch.compiler.disable
    def follow(self, keys: Sequence[Hashable], leaders: Sequence[Hashable], sigma: float) -> Call:
        """A pass that follows another branch's call of the same step (a skip-layer guidance pass follows the call
        of its conditioning): follower ``keys[i]`` reuses from its own residual history exactly when its leader
        ``leaders[i]`` reused at this step and its history continues from the previous step; otherwise it computes
        and commits its residual. Nothing is reused where the leader computed, so a run that reuses nothing computes
        every pass exactly. A follower whose leader the run has not seen (or a call off the schedule) computes and
        leaves every state untouched. Followers add no statistics record."""
        keys, leaders = list(keys), list(leaders)
        if len(keys) != len(leaders):
            raise ValueError(f"got {len(keys)} keys and {len(leaders)} leaders")
        groups, leader_of, sigma = _group(keys), dict(zip(keys, leaders)), float(sigma)
        step = self.step_of(sigma)
        plans = []
        with self.lock:
            for key, items in groups.items():
                leader = self.states.get(leader_of[key])
                if step is None or leader is None:
                    reason = "off_schedule" if step is None else "no_leader"
                    plans.append(BranchPlan(key, items, frozen=True, reason=reason))
                    continue
                state = self.states.get(key)
                call_relation = relation(state, step, sigma)
                if leader.last_step != step or leader.consecutive == 0:
                    reason = "leader_computed"
                elif call_relation != NEXT or len(state.history) == 0:
                    reason = "no_history" if call_relation in (NEW, NEXT) else call_relation  # or "repeat", "reset"
                else:
                    reason = None
                plans.append(BranchPlan(key, items, frozen=False, reason=reason, reset=call_relation == RESET,
                                        repeat=call_relation == REPEAT, accumulated=0.0))
        reuse = all(not plan.frozen and plan.reason is None for plan in plans)
        reason = None if reuse else next(plan.reason for plan in plans if plan.reason is not None)
        return Call(self, reuse, reason, step, sigma, None, None, tuple(plans), len(keys), follows=True)

    def run(self, stack: Callable[[torch.Tensor], torch.Tensor], stack_in: torch.Tensor, latent: torch.Tensor,
            sigma: float, keys: Sequence[Hashable], sound: torch.Tensor | None = None) -> torch.Tensor:
        """The stack output of one call whose stack is one callable: ``stack_in`` plus the extrapolated residual when
        the gate allows, otherwise ``stack(stack_in)`` with its residual committed. A gate that reads the first
        block's input is refused (ValueError): its host enters the stack with that view (:meth:`pending`)."""
        if self.indicator.reads_first_block:
            raise ValueError(f"gate {self.config.gate!r} reads the first block's input, not the latent: create the "
                             f"call with pending() and enter the stack with the first block's view")
        call = self.decide(latent, sigma, keys, sound=sound)
        residual = call.predict(stack_in)
        if residual is not None:
            return stack_in + residual
        out = stack(stack_in)
        call.commit(out - stack_in)
        return out

    def report(self, status: str) -> dict:
        """JSON report for displays (Stats node, browser, demo): the statistics plus the run's status ("completed" or
        "failed"), threshold (None under a speedup target, whose controller sets it per step), step count, the calls
        the host ran around the gate, and a text summary (which names a cap the speed target lifted)."""
        summary = self.stats.summary()
        if self.speed is not None:
            summary += "\n" + self.speed.summary(self.stats.calls, self.stats.ran)
        return {**self.stats.to_dict(), "status": status, "steps": self.steps, "summary": summary,
                "threshold": None if self.speed is not None else self.config.threshold,
                "speedup_target": self.config.speed_target, "uncached_calls": self.uncached_calls,
                "guidance_calls": self.guidance_calls, "guidance_followed": self.guidance_followed,
                "guidance_reused": self.guidance_reused, "stopped": self.stopped}

    def release(self) -> None:
        """Free every view, residual and cached gain (end of run); the statistics stay readable."""
        self.states.clear()
        self.gains.clear()
