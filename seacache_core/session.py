"""A SeaCache session: one sampling run of a model whose expensive stack is wrapped by the gate.

Hosts (the ComfyUI nodes, the demo's plain sampler) hand every stack call to :meth:`SeaCacheSession.run`
with the stack's input, the noisy latent, the call's sigma and one branch key per batch item; the session
maps sigma to a step of the run's schedule, asks the gate, and either applies the extrapolated residual or
runs the stack and records its residual.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import torch

from .config import SeaCacheConfig
from .gate import SeaCacheGate
from .speed import SpeedController
from .stats import RunStats


def validate_window(start_percent: float, end_percent: float) -> None:
    """Raise ValueError unless 0 <= start_percent <= end_percent <= 1 (the reuse window, as step fractions)."""
    if not 0.0 <= start_percent <= end_percent <= 1.0:
        raise ValueError(
            f"start_percent ({start_percent}) and end_percent ({end_percent}) must satisfy 0 <= start <= end <= 1."
        )


class SeaCacheSession:
    """Gate, schedule and reuse window of one run. ``start_percent``/``end_percent`` bound the fraction of
    the schedule's steps (step / steps) where reuse is allowed; evaluations off the schedule always compute.
    ``flow_sigma`` maps a schedule sigma to the flow convention (for the speed controller's prediction; None: the
    schedule already is one)."""

    def __init__(self, config: SeaCacheConfig, start_percent: float = 0.0, end_percent: float = 1.0,
                 flow_sigma: Callable[[float], float] | None = None):
        validate_window(start_percent, end_percent)
        self.flow_sigma = flow_sigma or float  # a schedule sigma in the flow convention (identity: flow models)
        self.gate = SeaCacheGate(config)
        if config.speedup:
            self.gate.speed = SpeedController(config, self.reuse_allowed)
        self.start_percent = start_percent
        self.end_percent = end_percent
        self.schedule: list[float] | None = None

    @property
    def stats(self) -> RunStats:
        """The run's statistics so far."""
        return self.gate.stats

    @property
    def steps(self) -> int:
        """Steps of the schedule (its length minus the final sigma), 0 before it is known."""
        return max(len(self.schedule or []) - 1, 0)

    def set_schedule(self, sigmas: Sequence[float] | torch.Tensor) -> None:
        """The run's sigma schedule, ``steps + 1`` values ending at the final sigma."""
        values = sigmas.flatten().tolist() if isinstance(sigmas, torch.Tensor) else list(sigmas)
        self.schedule = [float(s) for s in values]
        if self.gate.speed is not None:
            self.gate.speed.set_schedule([self.flow_sigma(s) for s in self.schedule])

    def step_of(self, sigma: float) -> int | None:
        """Index of ``sigma`` among the schedule's steps, or None for an evaluation off the schedule."""
        for i, s in enumerate((self.schedule or [])[: self.steps]):
            if math.isclose(s, sigma, rel_tol=1e-5, abs_tol=1e-7):
                return i
        return None

    def reuse_allowed(self, step: int | None) -> bool:
        """Whether ``step`` lies inside the configured window of the schedule."""
        if step is None or self.steps == 0:
            return False
        return self.start_percent <= step / self.steps <= self.end_percent

    def decide(
        self,
        latent: torch.Tensor,
        sigma: float | torch.Tensor,
        keys: Sequence[Hashable],
        filter_sigma: float | torch.Tensor | None = None,
    ):
        """The gate's decision for one call at schedule sigma ``sigma`` (hosts whose stack is not one callable use
        this, then ``gate.predict``/``gate.commit``); ``filter_sigma`` as in :meth:`SeaCacheGate.decide`. A
        one-value tensor ``sigma`` (and ``filter_sigma``) on the latent's device is read in the gate's one host read
        (:meth:`SeaCacheGate.decide_on_device`)."""
        if isinstance(sigma, torch.Tensor):
            return self.gate.decide_on_device(keys, latent, sigma, self.locate, filter_sigma)
        step, steps, reuse_allowed = self.locate(sigma)
        return self.gate.decide(keys, latent, sigma, step, steps, reuse_allowed, filter_sigma)

    def locate(self, sigma: float) -> tuple[int | None, int, bool]:
        """``(step, steps, reuse_allowed)`` of a call at ``sigma``: its step of the schedule (None off it), the
        schedule's step count, and whether the step lies in the reuse window."""
        step = self.step_of(sigma)
        return step, self.steps, self.reuse_allowed(step)

    def run(
        self,
        stack: Callable[[torch.Tensor], torch.Tensor],
        stack_in: torch.Tensor,
        latent: torch.Tensor,
        sigma: float,
        keys: Sequence[Hashable],
    ) -> torch.Tensor:
        """The stack output for one call: ``stack_in`` plus the extrapolated residual when the gate allows,
        otherwise ``stack(stack_in)`` with its residual recorded."""
        decision = self.decide(latent, sigma, keys)
        if decision.reuse:
            residual = self.gate.predict(decision, like=stack_in)
            if residual is not None:
                self.gate.commit(decision)
                return stack_in + residual
        out = stack(stack_in)
        self.gate.commit(decision, out - stack_in)
        return out

    def report(self, status: str) -> dict:
        """JSON report of the run for displays (Stats node, browser, demo): the statistics plus the run's
        status ("completed"/"failed"), threshold, step count and text summary."""
        report = self.stats.to_dict()
        summary = self.stats.summary()
        if self.gate.speed is not None:
            summary += "\n" + self.gate.speed.summary(self.stats.calls, self.stats.ran)
        report.update(status=status, threshold=self.gate.config.threshold, steps=self.steps, summary=summary,
                      speedup_target=self.gate.config.speedup or None)
        return report

    def release(self) -> None:
        """Free every tensor the run holds (statistics stay readable)."""
        self.gate.release()
