"""Configuration of the SeaCache gate."""

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
    r"""
    Configuration of SeaCache (spectral-evolution-aware step cache); see docs/algorithm.md. These defaults are
    SeaCache Apply's (nodes/seacache/apply.py reads its widget defaults from them), so `replay(SeaCacheConfig(), ...)`
    replays the gate the node runs. The paper's recipe is `SeaCacheConfig(threshold=0.25, gate="sea")`.

    Args:
        threshold (`float`, defaults to `0.13`):
            A branch may reuse while the accumulated relative L1 distance between consecutive
            SEA-filtered latents stays strictly below this value. `0` never reuses (output identical
            to the uncached model); higher values reuse more and trade quality for speed. 0.13 with the default
            gate makes about as many full calls as the paper's 0.25 with gate `"sea"` (docs/quality.md).
        order (`int`, defaults to `1`):
            Order (0..2) of the Newton extrapolation of the stack residual over step indices on a
            reused step; `order + 1` residuals are kept per branch. 1 is linear (vLLM-Omni's); 2 (quadratic) was
            measured better on the pack's trained Cosmos3-architecture proxy (docs/quality.md), and the default
            stays 1 while the same evidence is missing for the other model families SeaCache serves. The node's
            `auto` takes the seam's order instead (2 on Cosmos3, this default elsewhere).
        quadratic_weight (`float`, *optional*, defaults to `1.0`):
            Share of order 2's quadratic term in a prediction (the rest: order 1's held line through the last two
            residuals); only order 2 reads it. `None` follows the schedule's shift
            (`extrapolate.quadratic_weight`: 0.5 up to shift 3, 1 from shift 5), which SeaCache Apply's `auto` order
            takes where it picks order 2. Only reused steps more than `extrapolate.FULL_REACH` (2) steps past the
            last computed one are blended (docs/quality.md, "Order 2 at low shift").
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
        residual_storage (`str`, defaults to `"compute"`):
            Where the residual history lives: `"compute"` keeps it on the device of the stack,
            `"cpu"` offloads it to CPU memory and moves it back when a residual is predicted.
        gate (`str`, defaults to `"sea_same_sigma"`):
            What the gate accumulates: `"sea"` the paper's distance between consecutive latents, each
            SEA-filtered at its own step's sigma; `"sea_same_sigma"` the distance of both latents filtered at the
            current step's sigma, which leaves out the filter's own change along the schedule (see
            `seacache_core.sea_filter`). `"first_block"` and `"first_block_same_sigma"` do the same on the first
            transformer block's modulated input (vision tokens only), the published indicator: the host hands it
            over at the stack's entry (`SeaCacheRun.pending`, `seacache_core.first_block`), `power` None means 3
            there for images too, and the sound latent is not read. Thresholds do not carry over between the
            latent and the first block (diffusers' first-block recipe: `first_block.published_config()`).
        sound_weight (`float`, defaults to `1.0`):
            For audio-video calls whose host passes the sound latent (`SeaCacheRun.decide(..., sound=)`): the
            gate's distance is `(video + sound_weight * sound) / (1 + sound_weight)`, the sound's distance taken on
            the sound latent filtered along its time axis at the current sigma (`sea_filter.Indicator`). `0` reads
            the video only. Calls without a sound latent are unaffected. On the trained audio-video proxy the joint
            gate (weight 1) lowered the sound's error at equal speed without raising the video's (docs/quality.md,
            Sound).
        speedup (`float`, defaults to `0.0`):
            Target stack speedup of the run (calls / ran). From 1 on, a controller sets the threshold at every
            step so that the run reaches this speedup by its end (`seacache_core.speed`) and `threshold` is unused;
            below 1 (`0` by default) no speedup is asked for and `threshold` decides.
        speed_lifts_cap (`bool`, defaults to `True`):
            With a `speedup` target that `warmup_steps`, `end_steps`, `max_consecutive` and the reuse window leave
            out of reach, the run raises its cap on reuses in a row just as far as the target needs (the smallest
            cap from `max_consecutive` up that reaches it, else no cap) and its report says so; `max_consecutive`
            0 (never reuse) is kept. `False` keeps the cap, and the run falls short of the target.
        forecaster (`str`, defaults to `"newton"`):
            How a reused step's residual is predicted: `"newton"` the Newton extrapolation of `order` through the
            last `order + 1` computed steps; `"chebyshev"` Spectrum's Chebyshev ridge regression over the last
            `chebyshev_capacity` computed steps, blended with that extrapolation
            (`seacache_core.forecast.ChebyshevHistory`; docs/spectrum.md).
        chebyshev_degree (`int`, defaults to `4`):
            Highest Chebyshev polynomial of the fit (Spectrum's M).
        chebyshev_lambda (`float`, defaults to `0.1`):
            Ridge penalty of the fit (Spectrum's lambda).
        chebyshev_blend (`float`, defaults to `0.5`):
            Share of the Chebyshev fit in the forecast, the rest the Newton extrapolation of `order` (Spectrum's w):
            `1` the fit alone, `0` the extrapolation alone.
        chebyshev_capacity (`int`, defaults to `12`):
            Computed steps the fit reads, kept per branch (at least `max(order, chebyshev_degree) + 1`). 12 holds
            every computed step of a 35-step run at 3x or more (11.7 calls; Spectrum's own schedule computes 12 of
            35), so at those speeds the fit reads all of them, as Spectrum's does, while memory stays at 12
            residuals per branch (docs/spectrum.md, "Memory").
    """

    threshold: float = 0.13
    order: int = 1
    quadratic_weight: float | None = 1.0
    max_consecutive: int = 2
    warmup_steps: int = 1
    end_steps: int = 1
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
        """Raise ValueError naming the first parameter outside its allowed range, so bad node inputs fail early."""
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
        if not _is_int(self.warmup_steps) or self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an integer >= 0, got {self.warmup_steps!r}")
        if not _is_int(self.end_steps) or self.end_steps < 0:
            raise ValueError(f"end_steps must be an integer >= 0, got {self.end_steps!r}")
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
        """The run's target speedup, None when the threshold decides (``speedup`` below 1)."""
        return float(self.speedup) if self.speedup >= 1 else None

    @property
    def residuals_kept(self) -> int:
        """Residuals one branch's history holds at most: `order + 1` for the Newton extrapolation,
        `chebyshev_capacity` for the Chebyshev forecast."""
        return self.chebyshev_capacity if self.forecaster == "chebyshev" else self.order + 1

    def history_bytes(self, residual_numel: int, element_size: int) -> int:
        """Compute-device bytes one branch's residual history holds at most: `residuals_kept` residuals of
        `residual_numel` elements (none when the history lives on the CPU). Memory planners add it per branch."""
        if self.residual_storage == "cpu":
            return 0
        return self.residuals_kept * residual_numel * element_size
