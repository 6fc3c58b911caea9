"""What a run keeps between calls, added to ComfyUI's memory estimate so ComfyUI frees room for it before sampling."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import comfy.model_management

from ...seacache_core import SeaCacheConfig
from ...seacache_core.sea_filter import FIRST_BLOCK_GATES
from .seams.base import Seam

ESTIMATE_LOCK = threading.RLock()  # held while memory_required is shadowed on a shared model


def kept_bytes(seam: Seam, config: SeaCacheConfig, guided: bool, base_model, input_shape) -> int:
    """Device bytes a run keeps at its fullest for a batch of ``input_shape``: the residual history per item (per
    follower too when ``guided``), and under a first-block gate each item's view."""
    dtype = base_model.manual_cast_dtype or base_model.get_dtype()
    numel = seam.residual_numel(base_model.diffusion_model, tuple(input_shape))
    branches = input_shape[0] * (2 if guided else 1)
    size = comfy.model_management.dtype_size(dtype)
    kept = branches * config.history_bytes(numel, size)
    if config.gate in FIRST_BLOCK_GATES:
        kept += input_shape[0] * numel * size
    return kept


def counting_kept_memory(kept: Callable[[object, tuple], int]):
    """A ``PREPARE_SAMPLING`` wrapper adding ``kept(base_model, input_shape)`` to the model's estimate: ComfyUI reads it
    from ``memory_required`` alone, so that is shadowed (its signature kept) for this call, one thread at a time."""

    def count_kept_memory(executor, model, *args, **kwargs):
        base = model.model
        with ESTIMATE_LOCK:
            if "memory_required" in vars(base):
                return executor(model, *args, **kwargs)
            estimate = base.memory_required

            @functools.wraps(estimate)
            def memory_required(input_shape, *a, **kw):
                return estimate(input_shape, *a, **kw) + kept(base, input_shape)

            base.memory_required = memory_required
            try:
                return executor(model, *args, **kwargs)
            finally:
                del base.memory_required

    return count_kept_memory
