"""The settings of the SeaCache gate and their one validation."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .sea_filter import GATES

RESIDUAL_STORAGES = ("compute", "cpu")
FORECASTERS = ("newton", "chebyshev")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class SeaCacheConfig:
    """SeaCache's settings (docs/algorithm.md); the defaults are SeaCache Apply's (their evidence: docs/quality.md); the
    paper's recipe is ``threshold=0.25, gate="sea"``.

    - ``threshold``: a branch reuses while its accumulated distance stays below it; 0 never reuses.
    - ``order``: Newton order (0..2) of the residual extrapolation; ``order + 1`` residuals kept per branch.
    - ``quadratic_weight``: order 2's share of its quadratic term past ``FULL_REACH``; None follows the shift.
    - ``max_consecutive``: most reuses in a row (0 never, -1 no cap); ``warmup_steps``, ``end_steps`` always compute.
    - ``min_steps``: a run of fewer steps reuses nothing (0: no floor).
    - ``power``: the SEA prior's exponent; None: 3 for videos and the first-block gates, 2 for images.
    - ``residual_storage``: the history on the stack's device ("compute") or offloaded ("cpu").
    - ``gate``: "sea", "sea_same_sigma", or the first block's input ("first_block", "first_block_same_sigma").
    - ``sound_weight``: the sound distance's weight beside the video's (0: video only).
    - ``speedup``: from 1 on, the target the threshold is steered to; ``speed_lifts_cap`` lets it lift the cap.
    - ``forecaster``: "newton", or "chebyshev" with the ``chebyshev_*`` settings of ``forecast.py``."""

    threshold: float = 0.13
    order: int = 1
    quadratic_weight: float | None = 1.0
    max_consecutive: int = 2
    warmup_steps: int | None = 1
    end_steps: int = 1
    min_steps: int = 8
    power: float | None = None
    residual_storage: str = "compute"
    gate: str = "sea_same_sigma"
    sound_weight: float = 1.0
    speedup: float = 0.0
    speed_lifts_cap: bool = True
    forecaster: str = "newton"
    chebyshev_degree: int = 4
    chebyshev_lambda: float = 0.1
    chebyshev_blend: float = 0.5
    chebyshev_capacity: int = 12

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """ValueError naming the first setting out of range, so bad node inputs fail before sampling."""
        if not _is_number(self.threshold) or not math.isfinite(self.threshold) or self.threshold < 0:
            raise ValueError(f"threshold must be a finite number >= 0, got {self.threshold!r}")
        if not _is_int(self.order) or not 0 <= self.order <= 2:
            raise ValueError(f"order must be an integer in 0..2, got {self.order!r}")
        if self.quadratic_weight is not None and (not _is_number(self.quadratic_weight)
                                                  or not 0 <= self.quadratic_weight <= 1):
            raise ValueError(f"quadratic_weight must be None (follow the schedule's shift) or a number in [0, 1], "
                             f"got {self.quadratic_weight!r}")
        if not _is_int(self.max_consecutive) or self.max_consecutive < -1:
            raise ValueError(
                f"max_consecutive must be an integer >= -1 (-1 = no cap, 0 = never reuse), got {self.max_consecutive!r}"
            )
        if self.warmup_steps is not None and (not _is_int(self.warmup_steps) or self.warmup_steps < 0):
            raise ValueError(f"warmup_steps must be None (follow the schedule's shift) or an integer >= 0, "
                             f"got {self.warmup_steps!r}")
        if not _is_int(self.end_steps) or self.end_steps < 0:
            raise ValueError(f"end_steps must be an integer >= 0, got {self.end_steps!r}")
        if not _is_int(self.min_steps) or self.min_steps < 0:
            raise ValueError(f"min_steps must be an integer >= 0 (0 = no floor), got {self.min_steps!r}")
        if self.power is not None and (
            not _is_number(self.power) or not math.isfinite(self.power) or self.power <= 0
        ):
            raise ValueError(f"power must be None (auto) or a finite number > 0, got {self.power!r}")
        if self.residual_storage not in RESIDUAL_STORAGES:
            raise ValueError(f"residual_storage must be one of {RESIDUAL_STORAGES}, got {self.residual_storage!r}")
        if self.gate not in GATES:
            raise ValueError(f"gate must be one of {GATES}, got {self.gate!r}")
        if not _is_number(self.sound_weight) or not math.isfinite(self.sound_weight) or self.sound_weight < 0:
            raise ValueError(f"sound_weight must be a finite number >= 0 (0 = the gate reads the video only), "
                             f"got {self.sound_weight!r}")
        if not _is_number(self.speedup) or not 0 <= self.speedup <= 100:
            raise ValueError(f"speedup must be a number in 0..100 (below 1: off, the threshold decides), "
                             f"got {self.speedup!r}")
        if not isinstance(self.speed_lifts_cap, bool):
            raise ValueError(f"speed_lifts_cap must be True or False, got {self.speed_lifts_cap!r}")
        if self.forecaster not in FORECASTERS:
            raise ValueError(f"forecaster must be one of {FORECASTERS}, got {self.forecaster!r}")
        if not _is_int(self.chebyshev_degree) or self.chebyshev_degree < 0:
            raise ValueError(f"chebyshev_degree must be an integer >= 0, got {self.chebyshev_degree!r}")
        if not _is_number(self.chebyshev_lambda) or not math.isfinite(self.chebyshev_lambda) or self.chebyshev_lambda < 0:
            raise ValueError(f"chebyshev_lambda must be a finite number >= 0, got {self.chebyshev_lambda!r}")
        if not _is_number(self.chebyshev_blend) or not 0 <= self.chebyshev_blend <= 1:
            raise ValueError(f"chebyshev_blend must be a number in [0, 1] (1 = the Chebyshev fit alone, 0 = the "
                             f"Newton extrapolation alone), got {self.chebyshev_blend!r}")
        least = max(self.order, self.chebyshev_degree) + 1
        if not _is_int(self.chebyshev_capacity) or self.chebyshev_capacity < least:
            raise ValueError(f"chebyshev_capacity must be an integer >= max(order, chebyshev_degree) + 1 = {least}, "
                             f"got {self.chebyshev_capacity!r}")

    @property
    def speed_target(self) -> float | None:
        """The target speedup, None when the threshold decides."""
        return float(self.speedup) if self.speedup >= 1 else None

    @property
    def residuals_kept(self) -> int:
        """Residuals one branch's history holds at most."""
        return self.chebyshev_capacity if self.forecaster == "chebyshev" else self.order + 1

    def history_bytes(self, residual_numel: int, element_size: int) -> int:
        """Compute-device bytes one branch's history holds at most (0 with "cpu" storage)."""
        if self.residual_storage == "cpu":
            return 0
        return self.residuals_kept * residual_numel * element_size
