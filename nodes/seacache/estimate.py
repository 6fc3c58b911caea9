"""What SeaCache keeps between calls (the residual history; a first-block gate's views) in ComfyUI's memory
estimate, so ComfyUI frees room for it before sampling."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable

import comfy.model_management

from ...seacache_core import SeaCacheConfig
from ...seacache_core.sea_filter import FIRST_BLOCK_GATES
from .seams.base import Seam

ESTIMATE_LOCK = threading.RLock()
"""Held while a run's memory estimate shadows ``memory_required`` on the (shared) model instance."""


def kept_bytes(seam: Seam, config: SeaCacheConfig, guided: bool, base_model, input_shape) -> int:
    """Device bytes a run keeps between calls at its fullest for a model batch of ``input_shape``, in the stack's
    compute dtype: the residual history, one branch per item (and one follower per item when the run has guidance
    functions, ``guided``); under a first-block gate also each item's view of the first block, which the gate keeps
    in that dtype (the video tokens' part of one residual at most: ``Seam.refuse_view_conds``). The gate's view of a
    latent (float32, a latent's size) is not counted."""
    dtype = base_model.manual_cast_dtype or base_model.get_dtype()
    numel = seam.residual_numel(base_model.diffusion_model, tuple(input_shape))
    branches = input_shape[0] * (2 if guided else 1)
    size = comfy.model_management.dtype_size(dtype)
    kept = branches * config.history_bytes(numel, size)
    if config.gate in FIRST_BLOCK_GATES:
        kept += input_shape[0] * numel * size
    return kept


def counting_kept_memory(kept: Callable[[object, tuple], int]):
    """A ``PREPARE_SAMPLING`` wrapper (registered in a run's private options at run start) under which ComfyUI's
    memory estimate of the run includes ``kept(base_model, input_shape)``, the bytes the run keeps between calls.
    ComfyUI takes the estimate from the model's ``memory_required`` alone, so it is shadowed on the model instance
    for this call only, one thread at a time, and restored however it ends; the shadow shows the model's own
    signature (``functools.wraps``): newer ComfyUI passes keywords such as ``memory_efficient_attention`` only to
    estimators whose signature takes them."""

    def count_kept_memory(executor, model, *args, **kwargs):
        base = model.model
        with ESTIMATE_LOCK:  # two threads preparing runs of one model would see (and delete) each other's shadow
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
