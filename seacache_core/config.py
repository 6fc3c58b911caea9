"""Configuration of the SeaCache gate."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .indicator import GATES

RESIDUAL_DEVICES = ("compute", "cpu")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class SeaCacheConfig:
    r"""
    Configuration of SeaCache (spectral-evolution-aware step cache); see docs/algorithm.md.

    Args:
        threshold (`float`, defaults to `0.25`):
            A branch may reuse while the accumulated relative L1 distance between consecutive
            SEA-filtered latents stays strictly below this value. `0` never reuses (output identical
            to the uncached model); higher values reuse more and trade quality for speed.
        order (`int`, defaults to `1`):
            Order (0..2) of the Newton extrapolation of the stack residual over step indices on a
            reused step; `order + 1` residuals are kept per branch. 2 (quadratic) halved the error of 1 (linear,
            vLLM-Omni's) on the pack's trained Cosmos3-architecture proxy at the same speed (README, Quality); the
            default stays 1 while the same evidence is missing for the other model families SeaCache serves.
        max_consecutive (`int`, defaults to `2`):
            Most reused steps in a row per branch before a compute is forced. `0` never reuses,
            `-1` sets no cap.
        warmup_steps (`int`, defaults to `1`):
            Number of first steps that are always computed.
        end_steps (`int`, defaults to `1`):
            Number of last steps that are always computed.
        power (`float`, *optional*, defaults to `None`):
            Exponent `p` of the power-law prior of the SEA filter. `None` chooses it from the latent:
            3.0 when it has more than one frame (video), 2.0 for a single frame (image).
        residual_device (`str`, defaults to `"compute"`):
            Where the residual history lives: `"compute"` keeps it on the device of the stack,
            `"cpu"` offloads it to CPU memory and moves it back when a residual is predicted.
        gate (`str`, defaults to `"sea"`):
            What the gate accumulates: `"sea"` the paper's distance between consecutive latents, each
            SEA-filtered at its own step's sigma; `"sea_same_sigma"` the distance of both latents filtered at the
            current step's sigma, which leaves out the filter's own change along the schedule (see
            `seacache_core.indicator`).
        speedup (`float`, defaults to `0.0`):
            Target stack speedup of the run (calls / ran, >= 1). `0` is off: `threshold` decides. Otherwise a
            controller sets the threshold at every step so that the run reaches this speedup by its end
            (`seacache_core.speed`); `threshold` is then unused.
    """

    threshold: float = 0.25
    order: int = 1
    max_consecutive: int = 2
    warmup_steps: int = 1
    end_steps: int = 1
    power: float | None = None
    residual_device: str = "compute"
    gate: str = "sea"
    speedup: float = 0.0

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the first parameter outside its allowed range, so bad node inputs fail early."""
        if not _is_number(self.threshold) or not math.isfinite(self.threshold) or self.threshold < 0:
            raise ValueError(f"threshold must be a finite number >= 0, got {self.threshold!r}")
        if not _is_int(self.order) or not 0 <= self.order <= 2:
            raise ValueError(f"order must be an integer in 0..2, got {self.order!r}")
        if not _is_int(self.max_consecutive) or self.max_consecutive < -1:
            raise ValueError(
                f"max_consecutive must be an integer >= -1 (-1 = no cap, 0 = never reuse), got {self.max_consecutive!r}"
            )
        if not _is_int(self.warmup_steps) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {self.warmup_steps!r}")
        if not _is_int(self.end_steps) or self.end_steps < 0:
            raise ValueError(f"end_steps must be an integer >= 0, got {self.end_steps!r}")
        if self.power is not None and (
            not _is_number(self.power) or not math.isfinite(self.power) or self.power <= 0
        ):
            raise ValueError(f"power must be None (auto) or a finite number > 0, got {self.power!r}")
        if self.residual_device not in RESIDUAL_DEVICES:
            raise ValueError(f"residual_device must be one of {RESIDUAL_DEVICES}, got {self.residual_device!r}")
        if self.gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {self.gate!r}")
        if not _is_number(self.speedup) or not (self.speedup == 0 or 1 <= self.speedup <= 100):
            raise ValueError(f"speedup must be 0 (off: the threshold decides) or a number in 1..100, got {self.speedup!r}")

    def resolve_power(self, frames: int) -> float:
        """Filter exponent for a latent of `frames` frames: the configured one, else 3 (video) or 2 (image)."""
        if self.power is not None:
            return float(self.power)
        return 3.0 if frames > 1 else 2.0

    def history_bytes(self, residual_numel: int, element_size: int) -> int:
        """Compute-device bytes one branch's residual history holds at most: `order + 1` residuals of
        `residual_numel` elements (none when the history lives on the CPU). Memory planners add it per branch."""
        if self.residual_device == "cpu":
            return 0
        return (self.order + 1) * residual_numel * element_size
