"""A SeaCache session: one sampling run of a model whose expensive stack is wrapped by the gate.

Hosts (the ComfyUI nodes, the demo's plain sampler) start every stack call with :meth:`SeaCacheSession.start_call`
(the stack's noisy latent, the call's sigma, one branch key per batch item) and carry it out through the returned
:class:`~seacache_core.call.GatedCall`; :meth:`SeaCacheSession.run` does both for a stack that is one callable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence

import torch

from .call import GatedCall
from .config import SeaCacheConfig
from .gate import Decision, SeaCacheGate
from .schedule import RunSchedule
from .speed import SpeedController
from .stats import RunStats


class SeaCacheSession:
    """Gate, schedule and reuse window of one run (see :class:`~seacache_core.schedule.RunSchedule`). ``lock``
    serialises the gate between concurrent calls of the run. ``flow_sigma`` maps a schedule sigma to the flow
    convention (for the speed controller's prediction; None: the schedule already is one)."""

    def __init__(self, config: SeaCacheConfig, start_percent: float = 0.0, end_percent: float = 1.0,
                 flow_sigma: Callable[[float], float] | None = None):
        self.gate = SeaCacheGate(config, RunSchedule(start_percent, end_percent))
        self.lock = threading.Lock()
        self.flow_sigma = flow_sigma or float  # a schedule sigma in the flow convention (identity: flow models)
        if config.speedup:
            self.gate.speed = SpeedController(config, self.reuse_allowed)

    @property
    def stats(self) -> RunStats:
        """The run's statistics so far."""
        return self.gate.stats

    @property
    def schedule(self) -> RunSchedule:
        """The run's schedule and reuse window, which the gate looks each call's sigma up in."""
        return self.gate.schedule

    @property
    def steps(self) -> int:
        """Steps of the schedule (its length minus the final sigma), 0 before it is known."""
        return self.schedule.steps

    def set_schedule(self, sigmas: Sequence[float] | torch.Tensor) -> None:
        """The run's sigma schedule, ``steps + 1`` values ending at the final sigma."""
        self.schedule.set(sigmas)
        if self.gate.speed is not None:
            self.gate.speed.set_schedule([self.flow_sigma(s) for s in self.schedule.sigmas])

    def step_of(self, sigma: float) -> int | None:
        """Index of ``sigma`` among the schedule's steps, or None for an evaluation off the schedule."""
        return self.schedule.step_of(sigma)

    def reuse_allowed(self, step: int | None) -> bool:
        """Whether ``step`` lies inside the configured window of the schedule."""
        return self.schedule.reuse_allowed(step)

    def decide(
        self,
        latent: torch.Tensor,
        sigma: float | torch.Tensor,
        keys: Sequence[Hashable],
        filter_sigma: float | torch.Tensor | None = None,
        sound: torch.Tensor | None = None,
    ) -> Decision:
        """The gate's decision for one call at sigma ``sigma`` (a float, or a one-value tensor on the latent's
        device, read together with the distances); ``filter_sigma`` and ``sound`` (the call's sound latent, for the
        joint gate of audio-video models) as in :meth:`SeaCacheGate.decide`."""
        with self.lock:
            return self.gate.decide(keys, latent, sigma, filter_sigma=filter_sigma, sound=sound)

    def start_call(
        self,
        latent: torch.Tensor,
        sigma: float | torch.Tensor,
        keys: Sequence[Hashable],
        filter_sigma: float | torch.Tensor | None = None,
        sound: torch.Tensor | None = None,
    ) -> GatedCall:
        """One call, decided (see :meth:`decide`), to be carried out through the returned :class:`GatedCall`."""
        return GatedCall(self.gate, self.decide(latent, sigma, keys, filter_sigma, sound), self.lock)

    def start_follower(self, keys: Sequence[Hashable], leaders: Sequence[Hashable], sigma: float) -> GatedCall:
        """A pass that follows its leaders' calls of this step (:meth:`SeaCacheGate.follow`), to be carried out
        through the returned :class:`GatedCall`."""
        with self.lock:
            decision = self.gate.follow(keys, leaders, sigma)
        return GatedCall(self.gate, decision, self.lock)

    def run(
        self,
        stack: Callable[[torch.Tensor], torch.Tensor],
        stack_in: torch.Tensor,
        latent: torch.Tensor,
        sigma: float,
        keys: Sequence[Hashable],
        sound: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """The stack output for one call: ``stack_in`` plus the extrapolated residual when the gate allows,
        otherwise ``stack(stack_in)`` with its residual recorded (``sound``: as in :meth:`decide`)."""
        call = self.start_call(latent, sigma, keys, sound=sound)
        residual = call.predict(stack_in)
        if residual is not None:
            return stack_in + residual
        out = stack(stack_in)
        call.commit(out - stack_in)
        return out

    def report(self, status: str) -> dict:
        """JSON report of the run for displays (Stats node, browser, demo): the statistics plus the run's
        status ("completed"/"failed"), threshold (None under a speedup target, whose controller sets it per step:
        no fixed line to draw), step count and text summary."""
        report = self.stats.to_dict()
        summary = self.stats.summary()
        if self.gate.speed is not None:
            summary += "\n" + self.gate.speed.summary(self.stats.calls, self.stats.ran)
        threshold = None if self.gate.speed is not None else self.gate.config.threshold
        report.update(status=status, threshold=threshold, steps=self.steps, summary=summary,
                      speedup_target=self.gate.config.speedup or None)
        return report

    def release(self) -> None:
        """Free every tensor the run holds (statistics stay readable)."""
        self.gate.release()
