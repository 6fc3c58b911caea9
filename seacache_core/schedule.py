"""The run's schedule as the gate reads it: which step a call's sigma is, and whether that step may reuse."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch


def validate_window(start_percent: float, end_percent: float) -> None:
    """Raise ValueError unless 0 <= start_percent <= end_percent <= 1 (the reuse window, as step fractions)."""
    if not 0.0 <= start_percent <= end_percent <= 1.0:
        raise ValueError(
            f"start_percent ({start_percent}) and end_percent ({end_percent}) must satisfy 0 <= start <= end <= 1."
        )


class RunSchedule:
    """The sigma schedule of one run and its reuse window: ``start_percent``/``end_percent`` bound the fraction
    of the schedule's steps (step / steps) where reuse is allowed; evaluations off the schedule always compute."""

    def __init__(self, start_percent: float = 0.0, end_percent: float = 1.0):
        validate_window(start_percent, end_percent)
        self.start_percent, self.end_percent = start_percent, end_percent
        self.sigmas: list[float] | None = None

    @property
    def steps(self) -> int:
        """Steps of the schedule (its length minus the final sigma), 0 before it is known."""
        return max(len(self.sigmas or []) - 1, 0)

    def set(self, sigmas: Sequence[float] | torch.Tensor) -> None:
        """The run's sigma schedule, ``steps + 1`` values ending at the final sigma."""
        values = sigmas.flatten().tolist() if isinstance(sigmas, torch.Tensor) else list(sigmas)
        self.sigmas = [float(s) for s in values]

    def step_of(self, sigma: float) -> int | None:
        """Index of ``sigma`` among the schedule's steps, or None for an evaluation off the schedule."""
        for i, s in enumerate((self.sigmas or [])[: self.steps]):
            if math.isclose(s, sigma, rel_tol=1e-5, abs_tol=1e-7):
                return i
        return None

    def reuse_allowed(self, step: int | None) -> bool:
        """Whether ``step`` lies inside the configured window of the schedule."""
        if step is None or self.steps == 0:
            return False
        return self.start_percent <= step / self.steps <= self.end_percent
