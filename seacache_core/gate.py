"""The SeaCache gate: per-run decision, prediction and bookkeeping for each gated transformer call."""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import torch

from .branch import NEW, NEXT, REPEAT, RESET, BranchPlan, BranchState, forced_reason, relation
from .config import SeaCacheConfig
from .extrapolate import ResidualHistory
from .indicator import SOUND_FILTER_POWER, WithSound, make_indicator
from .ranks import agreed_reuse
from .schedule import RunSchedule
from .sea_filter import GainCache, sea_filter_float32
from .speed import SpeedController
from .stats import COMPUTED, FORCED, REUSED, RunStats, StepRecord


@dataclass
class Decision:
    """The verdict of `SeaCacheGate.decide` for one call.

    `reuse` is True only when every branch may reuse (and, in a sequence-parallel run, every rank: `.ranks`).
    `follows` marks a decision of `SeaCacheGate.follow` (a guidance pass following its branch's call; no record;
    its own reasons: leader_computed, no_leader, no_history, repeat, reset, off_schedule).
    `reason` says why the call computes: a forced reason (warmup, end, reset, max_consecutive, no_history, window,
    off_schedule, repeat, other_rank) or "threshold"; None on reuse. `distance` and `accumulated` are maxima over
    the branches (None where none was evaluated). `branches` holds the per-branch plans that `commit` applies.
    """

    reuse: bool
    reason: str | None
    distance: float | None
    accumulated: float | None
    step: int | None
    sigma: float
    branches: tuple[BranchPlan, ...] = field(default=(), repr=False)
    latent_dtype: torch.dtype | None = field(default=None, repr=False)
    follows: bool = False

    @property
    def batch(self) -> int:
        """Number of batch items the call holds."""
        return sum(len(plan.items) for plan in self.branches)


def _group(keys: Sequence[Hashable]) -> dict[Hashable, tuple[int, ...]]:
    """Item indices of each branch key, in order of first appearance."""
    groups: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    return {key: tuple(items) for key, items in groups.items()}


def _rows(items: tuple[int, ...]) -> slice | list[int]:
    """An index for the rows `items`: a slice when they are consecutive (cond and uncond halves always are),
    so no index tensor has to be copied to the device (a copy from pageable host memory waits for the GPU)."""
    if items == tuple(range(items[0], items[-1] + 1)):
        return slice(items[0], items[-1] + 1)
    return list(items)


def _select(tensor: torch.Tensor, items: tuple[int, ...]) -> torch.Tensor:
    """The rows `items` of `tensor`; a view when they are consecutive, the tensor itself when they are all of it."""
    if items == tuple(range(tensor.shape[0])):
        return tensor
    return tensor[_rows(items)]


def _max(values) -> float | None:
    values = [v for v in values if v is not None]
    return max(values) if values else None


class SeaCacheGate:
    """Per-run SeaCache gate, called once per gated transformer call: `decide`, then `predict` on a reuse
    decision, then `commit` after the call finished.

    State is kept per branch key so that cond and uncond (separate calls or batched in one call) are gated
    independently; a call reuses only if all its branches may. Several decisions may be in flight at once
    (concurrent calls on different branches, e.g. cond and uncond on two devices); each is committed once, and
    the host serialises the calls into the gate. Use one gate per sampling run (or call `reset()` between runs:
    the statistics cover everything committed since). The public entry points are excluded from
    `torch.compile` tracing.
    """

    def __init__(self, config: SeaCacheConfig | None = None, schedule: RunSchedule | None = None) -> None:
        self.config = config if config is not None else SeaCacheConfig()
        self.schedule = schedule if schedule is not None else RunSchedule()
        self.gains = GainCache()
        self.indicator = make_indicator(self.config.gate)
        self._states: dict[Hashable, BranchState] = {}
        self._stats = RunStats()
        self._in_flight: list[Decision] = []
        self._agreed = False  # whether the call being decided took its part in the ranks' agreement
        self.speed: SpeedController | None = None  # set for a speedup target (SeaCacheSession does)

    @property
    def stats(self) -> RunStats:
        """Records of every committed call of this run."""
        return self._stats

    def branch_state(self, key: Hashable) -> BranchState | None:
        """The state of one branch (for inspection and tests), None if the branch has not been seen."""
        return self._states.get(key)

    def _sea_filter(self, latent: torch.Tensor, sigma: float | torch.Tensor):
        """The SEA filter of this step for latents shaped like ``latent``, as a callable (float32 out)."""
        if latent.ndim == 5:
            frames, dims = latent.shape[2], (-3, -2, -1)
        elif latent.ndim == 4:
            frames, dims = 1, (-2, -1)
        else:
            raise ValueError(f"latent must be [B, C, T, H, W] or [B, C, H, W], got shape {tuple(latent.shape)}")
        power = self.config.resolve_power(frames)

        def sea_filter(x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                return sea_filter_float32(x, sigma, power, dims, self.gains)

        return sea_filter

    def _observe(self, groups, latent: torch.Tensor, filter_sigma: float | torch.Tensor,
                 sound: torch.Tensor | None = None):
        """This step's distance function and each branch's indicator of ``latent`` (and of ``sound`` when given and
        ``config.sound_weight`` > 0: :class:`~seacache_core.indicator.WithSound`), with no host read."""
        sea_filter = self._sea_filter(latent, filter_sigma)
        indicator = self.indicator
        if sound is not None and self.config.sound_weight > 0:
            def sound_filter(x: torch.Tensor) -> torch.Tensor:
                with torch.no_grad():
                    return sea_filter_float32(x, filter_sigma, SOUND_FILTER_POWER, (2,), self.gains)

            indicator = WithSound(self.indicator, self.config.sound_weight, sound_filter)
            observed = indicator.observe(latent, sea_filter, sound)
        else:
            observed = indicator.observe(latent, sea_filter)
        measure = lambda current, previous: indicator.distances(current, previous, sea_filter)  # noqa: E731
        return measure, {key: _select(observed, items) for key, items in groups.items()}

    def _pending(self, keys, indicators: dict, dtype: torch.dtype, measure) -> dict[Hashable, torch.Tensor]:
        """On the device, the distance of each branch in ``keys`` whose previous indicator has ``dtype`` (a branch
        of another dtype has distance +inf, see :meth:`_plans`)."""
        return {
            key: measure(indicators[key], self._states[key].indicator).mean()
            for key in keys
            if self._states[key].indicator_dtype == dtype
        }

    def _plans(
        self,
        groups: dict[Hashable, tuple[int, ...]],
        indicators: dict[Hashable, torch.Tensor],
        distances: dict[Hashable, float],
        sigma: float,
        step: int,
        num_steps: int,
        reuse_allowed: bool,
    ) -> list[BranchPlan]:
        """Per-branch verdicts of an on-schedule call (docs/algorithm.md §5), without touching any state.
        ``distances`` holds the host values of the branches measured (+inf for a NEXT branch not measured); only
        those of NEXT branches count."""
        threshold = self.config.threshold if self.speed is None else self._speed_threshold(groups, distances, step, num_steps)
        plans = []
        for key, items in groups.items():
            call_relation = relation(self._states.get(key), step, sigma)
            if call_relation == REPEAT:
                plans.append(BranchPlan(key, items, frozen=False, reason="repeat", repeat=True, indicator=indicators[key]))
                continue
            state = self._states.get(key)
            distance = distances.get(key, float("inf")) if call_relation == NEXT else None
            reason = forced_reason(self.config, state, call_relation, step, num_steps, reuse_allowed)
            accumulated = None
            if reason is None:
                accumulated = state.accumulated + distance
                reason = None if accumulated < threshold else "threshold"
            plans.append(
                BranchPlan(
                    key,
                    items,
                    frozen=False,
                    reason=reason,
                    reset=call_relation == RESET,
                    distance=distance,
                    accumulated=accumulated,
                    indicator=indicators[key],
                )
            )
        return plans

    def _speed_threshold(self, groups, distances: dict[Hashable, float], step: int, num_steps: int) -> float:
        """The speed controller's threshold for this call: its accumulated distance and reuses in a row are the
        maxima over its branches (+inf for a branch without a previous step)."""
        states = [self._states.get(key) for key in groups]
        accumulated = max(s.accumulated + distances.get(k, math.inf) if s else math.inf for k, s in zip(groups, states))
        consecutive = max(s.consecutive if s else 0 for s in states)
        return self.speed.threshold(tuple(groups), step, num_steps, accumulated, consecutive)

    def _decision(self, plans: list[BranchPlan], step: int | None, sigma: float, latent: torch.Tensor) -> Decision:
        """The call's verdict from its branch plans, registered as in flight."""
        wanted = all(not plan.frozen and plan.reason is None for plan in plans)
        self._agreed = True
        reuse = agreed_reuse(wanted, latent.device)  # across ranks of a sequence-parallel run, else ``wanted``
        forced = [plan.reason for plan in plans if plan.reason not in (None, "threshold")]
        reason = None if reuse else ("other_rank" if wanted else forced[0] if forced else "threshold")
        decision = Decision(
            reuse,
            reason,
            _max(plan.distance for plan in plans),
            _max(plan.accumulated for plan in plans),
            step,
            sigma,
            tuple(plans),
            latent.dtype,
        )
        self._in_flight.append(decision)
        return decision

    @staticmethod
    def _off_schedule(groups) -> list[BranchPlan]:
        return [BranchPlan(key, items, frozen=True, reason="off_schedule") for key, items in groups.items()]

    @torch.compiler.disable
    def decide(
        self,
        keys: Sequence[Hashable],
        latent: torch.Tensor,
        sigma: float | torch.Tensor,
        step: int | None = None,
        num_steps: int | None = None,
        reuse_allowed: bool = True,
        filter_sigma: float | torch.Tensor | None = None,
        sound: torch.Tensor | None = None,
    ) -> Decision:
        """Decide whether this call may skip the stack; changes no state until `commit`.

        `keys` names the branch of each batch item of `latent` ([B, C, T, H, W] or [B, C, H, W]). `sigma` is a
        Python float, or a one-value tensor on the latent's device (float64 keeps the decisions those of the host
        float). The call's step comes from the gate's schedule (`self.schedule`: its step, step count and reuse
        window), unless the caller of a float sigma passes `step` and `num_steps` itself (`step` None: an
        evaluation off the schedule, forced compute, state untouched; `reuse_allowed=False` forces a compute,
        reason "window"). A step looked up in the schedule is always in range.
        `filter_sigma` is the noise level in the flow convention the SEA filter assumes (latent = (1 - s) x0 +
        s eps); None means `sigma` already is one (flow-matching models). `sound`: the call's sound latent of an
        audio-video model ([B, C, T, ...], time on dim 2), read with the video when `config.sound_weight` > 0
        (:class:`~seacache_core.indicator.WithSound`); None reads the video only.

        One host read: a tensor sigma together with the distances of every branch that has a previous indicator
        (a distance measured for a branch that turns out not to continue from its previous step is ignored); a
        float sigma is looked up first, and only the branches that continue are measured (no read when none does).
        In a sequence-parallel run the decision is agreed across ranks (:mod:`.ranks`, one more read); should this
        call raise before agreeing, it still takes its part in the agreement ("compute") so that the other ranks'
        collectives stay matched.
        """
        self._agreed = False
        try:
            return self._decide(keys, latent, sigma, step, num_steps, reuse_allowed, filter_sigma, sound)
        except Exception:
            if not self._agreed:
                agreed_reuse(False, latent.device)  # this rank's part in the call's agreement (no-op alone)
            raise

    def _decide(self, keys, latent, sigma, step, num_steps, reuse_allowed, filter_sigma, sound) -> Decision:
        """:meth:`decide` itself."""
        keys = list(keys)
        if len(keys) != latent.shape[0]:
            raise ValueError(f"got {len(keys)} keys for a batch of {latent.shape[0]}")
        if sound is not None and sound.shape[0] != latent.shape[0]:
            raise ValueError(f"sound latent has batch {sound.shape[0]}, the video latent {latent.shape[0]}")
        groups = _group(keys)
        on_host = not isinstance(sigma, torch.Tensor)
        if on_host:
            sigma = float(sigma)
            filter_sigma = None if filter_sigma is None else float(filter_sigma)
            if num_steps is None:
                step, num_steps, reuse_allowed = self._locate(sigma)
            if step is None:
                return self._decision(self._off_schedule(groups), step, sigma, latent)
            if not 0 <= step < num_steps:
                raise ValueError(f"step must be in 0..{num_steps - 1}, got {step!r}")
            measured = [key for key in groups if relation(self._states.get(key), step, sigma) == NEXT]
        else:
            measured = [key for key in groups if key in self._states]
        measure, indicators = self._observe(groups, latent, sigma if filter_sigma is None else filter_sigma, sound)
        pending = self._pending(measured, indicators, latent.dtype, measure)
        values = [] if on_host else [sigma.reshape(1).to(device=latent.device, dtype=torch.float64)]
        if pending:
            values.append(torch.stack(list(pending.values())).to(torch.float64))
        read = torch.cat(values).tolist() if values else []  # the call's one host read
        if not on_host:
            sigma, *read = read
            step, num_steps, reuse_allowed = self._locate(sigma)
            if step is None:
                return self._decision(self._off_schedule(groups), step, sigma, latent)
        plans = self._plans(groups, indicators, dict(zip(pending, read)), sigma, step, num_steps, reuse_allowed)
        return self._decision(plans, step, sigma, latent)

    @torch.compiler.disable
    def follow(self, keys: Sequence[Hashable], leaders: Sequence[Hashable], sigma: float) -> Decision:
        """The decision of a pass that follows another branch's call of the same step (a skip-layer guidance pass
        follows the call of its conditioning): the follower ``keys[i]`` reuses from its own residual history
        exactly when its leader ``leaders[i]`` reused at this step and its history continues from the previous
        step; otherwise it computes and commits its residual. Nothing is reused where the leader computed, so a run
        that reuses nothing computes every pass exactly. A follower whose leader the gate has not seen (or a call
        off the schedule) computes and leaves every state untouched. Followers add no statistics record."""
        keys, leaders = list(keys), list(leaders)
        if len(keys) != len(leaders):
            raise ValueError(f"got {len(keys)} keys and {len(leaders)} leaders")
        groups, leader_of = _group(keys), dict(zip(keys, leaders))
        sigma = float(sigma)
        step = self.schedule.step_of(sigma)
        plans = []
        for key, items in groups.items():
            leader = self._states.get(leader_of[key])
            if step is None or leader is None:
                reason = "off_schedule" if step is None else "no_leader"
                plans.append(BranchPlan(key, items, frozen=True, reason=reason))
                continue
            state = self._states.get(key)
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
        decision = Decision(reuse, reason, None, None, step, sigma, tuple(plans), follows=True)
        self._in_flight.append(decision)
        return decision

    def _locate(self, sigma: float) -> tuple[int | None, int, bool]:
        """``(step, num_steps, reuse_allowed)`` of a call at ``sigma`` in the gate's schedule."""
        step = self.schedule.step_of(sigma)
        return step, self.schedule.steps, self.schedule.reuse_allowed(step)

    def _check_in_flight(self, decision: Decision) -> None:
        if not any(d is decision for d in self._in_flight):
            raise RuntimeError("predict()/commit() must use a decision of decide() not yet committed")

    @torch.compiler.disable
    def predict(self, decision: Decision, like: torch.Tensor) -> torch.Tensor | None:
        """Extrapolated stack residual for every item of a reuse decision, stacked in item order, on `like`'s
        device and dtype (`like` is the stack input [B, ...]). None when some branch's history does not fit
        `like`; the caller then computes and commits the residual (recorded as a "fallback" compute).
        """
        self._check_in_flight(decision)
        if not decision.reuse:
            raise ValueError(f"predict() needs a reuse decision, this call computes ({decision.reason})")
        if like.shape[0] != decision.batch:
            raise ValueError(f"like has batch {like.shape[0]}, the decision {decision.batch}")
        parts = []
        for plan in decision.branches:
            predicted = self._states[plan.key].history.predict(decision.step, like.device, like.dtype)
            if predicted.shape != (len(plan.items), *like.shape[1:]):
                return None
            parts.append((plan.items, predicted))
        if len(parts) == 1:
            return parts[0][1]
        out = like.new_empty(like.shape)
        for items, predicted in parts:
            out[_rows(items)] = predicted
        return out

    @torch.compiler.disable
    def commit(self, decision: Decision, residual: torch.Tensor | None = None) -> None:
        """Finish a call: update the branch states and append its statistics record.

        Pass the stack residual [B, ...] (stack_out - stack_in) when the stack ran, nothing when the predicted
        residual was applied. A residual on a reuse decision means prediction failed and the call was computed
        ("fallback"). Off-schedule evaluations record nothing in the branch states; a repeated evaluation
        refreshes only its step's indicator and residual record. The history
        keeps a reference to the residual (no copy when one branch holds the whole batch): do not modify it in
        place afterwards.
        """
        self._check_in_flight(decision)
        computed = residual is not None or not decision.reuse
        active = [plan for plan in decision.branches if not plan.frozen]
        if computed and active and residual is None:
            raise ValueError(f"a computed call must commit its stack residual (reason {decision.reason})")
        if residual is not None and residual.shape[0] != decision.batch:
            raise ValueError(f"residual has batch {residual.shape[0]}, the decision {decision.batch}")
        self._in_flight = [d for d in self._in_flight if d is not decision]
        for plan in active:
            state = self._states.get(plan.key)
            if state is None:
                state = BranchState(ResidualHistory(self.config.order, self.config.residual_storage))
                self._states[plan.key] = state
            if plan.reset:
                state.history.clear()
            state.indicator = plan.indicator
            state.indicator_dtype = decision.latent_dtype
            if plan.repeat:
                state.history.append(decision.step, _select(residual, plan.items))
                continue
            state.last_step, state.last_sigma = decision.step, decision.sigma
            if computed:
                state.accumulated, state.consecutive = 0.0, 0
                state.history.append(decision.step, _select(residual, plan.items))
            else:
                state.accumulated, state.consecutive = plan.accumulated, state.consecutive + 1
        if decision.follows:
            return
        if not computed:
            kind, reason = REUSED, None
        elif decision.reuse:
            kind, reason = COMPUTED, "fallback"
        else:
            kind, reason = (COMPUTED if decision.reason == "threshold" else FORCED), decision.reason
        branches = {
            str(plan.key): {"reason": plan.reason, "distance": plan.distance, "accumulated": plan.accumulated}
            for plan in decision.branches
        }
        if self.speed is not None:
            self.speed.observe(tuple(plan.key for plan in decision.branches), decision.step, decision.distance, computed)
        self._stats.append(
            StepRecord(decision.step, decision.sigma, decision.distance, decision.accumulated, kind, reason, branches)
        )

    @torch.compiler.disable
    def discard(self, decision: Decision) -> None:
        """Drop an uncommitted decision whose call ran without passing the stack (branch states and statistics
        stay untouched, as for a call the gate never saw)."""
        self._in_flight = [d for d in self._in_flight if d is not decision]

    def release(self) -> None:
        """Free every indicator, residual and cached gain (end of run); the statistics stay readable."""
        self._states.clear()
        self.gains.clear()
        self._in_flight.clear()

    def reset(self) -> None:
        """Release everything and start fresh statistics, ready for a new run."""
        self.release()
        self._stats = RunStats()
