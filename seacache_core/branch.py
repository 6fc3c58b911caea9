"""Per-branch gate state and the per-branch rule of docs/algorithm.md §5."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field

import torch

from .config import SeaCacheConfig
from .extrapolate import ResidualHistory

# How a call relates to the branch's previous on-schedule call.
NEW = "new"  # the branch has no state yet
NEXT = "next"  # the adjacent step of the same run
REPEAT = "repeat"  # the same step again (a second evaluation at one sigma)
RESET = "reset"  # a non-adjacent step, or sigma went up (a new run)


@dataclass
class BranchState:
    """What the gate remembers of one branch (cond, uncond, or a batch entry with its own conditioning).

    `indicator` is the float32 view the gate's indicator keeps of the branch's items at `last_step` (the SEA-filtered
    latent, or the raw latent for the same-sigma gate; `seacache_core.indicator`); `indicator_dtype` is
    the dtype of the latent it came from (a dtype change makes the distance +inf).
    """

    history: ResidualHistory
    indicator: torch.Tensor | None = None
    indicator_dtype: torch.dtype | None = None
    last_step: int | None = None
    last_sigma: float | None = None
    accumulated: float = 0.0
    consecutive: int = 0


@dataclass
class BranchPlan:
    """What `SeaCacheGate.decide` concluded for one branch; `commit` applies it to the branch state.

    `frozen` branches (off-schedule evaluations) keep their state untouched. A `repeat` branch (a second
    evaluation at the step it already saw, as Heun's corrector-then-step pattern makes) computes and refreshes
    only the step's indicator and residual record, so the next step compares with and extrapolates from the
    latest evaluation. `reason` is why the branch must compute, or None when it alone would reuse.
    `accumulated` is set only where the distance was accumulated (not on forced steps).
    """

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
    """Classify an on-schedule call against the branch's previous one (NEW, NEXT, REPEAT or RESET)."""
    if state is None:
        return NEW
    if sigma > state.last_sigma:
        return RESET
    if step == state.last_step:
        return REPEAT
    return NEXT if step == state.last_step + 1 else RESET


def forced_reason(
    config: SeaCacheConfig,
    state: BranchState | None,
    call_relation: str,
    step: int,
    num_steps: int,
    reuse_allowed: bool,
) -> str | None:
    """Why this branch must compute regardless of its distance, or None when the threshold decides.

    Precedence: warmup, end, reset, max_consecutive, no_history, window.
    """
    if step < config.warmup_steps:
        return "warmup"
    if step >= num_steps - config.end_steps:
        return "end"
    if call_relation == RESET:
        return "reset"
    consecutive = 0 if state is None else state.consecutive
    if config.max_consecutive != -1 and consecutive >= config.max_consecutive:
        return "max_consecutive"
    if state is None or state.indicator is None or len(state.history) == 0:
        return "no_history"
    if not reuse_allowed:
        return "window"
    return None
