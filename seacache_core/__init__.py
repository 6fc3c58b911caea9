"""SeaCache's algorithm, torch only (docs/algorithm.md)."""

from .config import SeaCacheConfig
from .extrapolate import ResidualHistory, extrapolate_residual
from .run import Call, SeaCacheRun, Verdict
from .sea_filter import GainCache, item_distances, sea_filter_float32
from .stats import RunStats, StepRecord

__all__ = [
    "Call",
    "GainCache",
    "ResidualHistory",
    "RunStats",
    "SeaCacheConfig",
    "SeaCacheRun",
    "StepRecord",
    "Verdict",
    "extrapolate_residual",
    "item_distances",
    "sea_filter_float32",
]
