"""SeaCache core: the spectral-evolution-aware step cache, independent of ComfyUI (torch and stdlib only).

docs/algorithm.md describes what this package implements, section by section.
"""

from .call import GatedCall
from .config import SeaCacheConfig
from .distance import rel_l1
from .extrapolate import ResidualHistory, extrapolate_residual
from .gate import Decision, SeaCacheGate
from .replay import replay
from .sea_filter import GainCache, sea_filter_float32
from .schedule import RunSchedule, validate_window
from .session import SeaCacheSession
from .stats import RunStats, StepRecord

__all__ = [
    "Decision",
    "GainCache",
    "GatedCall",
    "ResidualHistory",
    "RunSchedule",
    "RunStats",
    "SeaCacheConfig",
    "SeaCacheGate",
    "SeaCacheSession",
    "StepRecord",
    "extrapolate_residual",
    "rel_l1",
    "replay",
    "sea_filter_float32",
    "validate_window",
]
