"""What SeaCache keeps between calls (the residual history; a first-block gate's views) in ComfyUI's memory
estimate, so ComfyUI frees room for it before sampling."""

from __future__ import annotations

import functools
import threading

import comfy.model_management

from .seams.base import RUN_OPTION

ESTIMATE_LOCK = threading.RLock()
"""Held while a run's memory estimate shadows ``memory_required`` on the (shared) model instance."""


def kept_bytes(run, base_model, input_shape) -> int:
    """Device bytes the run keeps between calls at its fullest for a model batch of ``input_shape``, in the stack's
    compute dtype: the residual history, one branch per item (and one follower per item when the run has guidance
    functions); under a first-block gate also each item's view of the first block, which the gate keeps in that
    dtype (the video tokens' part of one residual at most: ``Seam.first_block``). The gate's view of a latent
    (float32, a latent's size) is not counted."""
    dtype = base_model.manual_cast_dtype or base_model.get_dtype()
    numel = run.seam.residual_numel(base_model.diffusion_model, tuple(input_shape))
    branches = input_shape[0] * (2 if run.guided else 1)
    size = comfy.model_management.dtype_size(dtype)
    kept = branches * run.gate.config.history_bytes(numel, size)
    if run.gate.indicator.reads_first_block:
        kept += input_shape[0] * numel * size
    return kept


def count_history_in_memory_estimate(executor, model, *args, **kwargs):
    """``PREPARE_SAMPLING`` wrapper: while ComfyUI estimates the memory a run needs and frees it, the model's estimate
    includes what the run keeps (:func:`kept_bytes`; every seam, every ComfyUI version: the estimate is taken from
    ``memory_required``, which is shadowed on the model instance for this call only, one thread at a time, and
    restored however it ends). The shadow shows the model's own signature (``functools.wraps``): newer ComfyUI passes
    keywords such as ``memory_efficient_attention`` only to estimators whose signature takes them."""
    options = kwargs.get("model_options") or {}
    run = options.get("transformer_options", {}).get(RUN_OPTION)
    base = model.model
    if run is None:
        return executor(model, *args, **kwargs)
    with ESTIMATE_LOCK:  # two threads preparing runs of one model would see (and delete) each other's shadow
        if "memory_required" in vars(base):
            return executor(model, *args, **kwargs)
        estimate = base.memory_required

        @functools.wraps(estimate)
        def memory_required(input_shape, *a, **kw):
            return estimate(input_shape, *a, **kw) + kept_bytes(run, base, input_shape)

        base.memory_required = memory_required
        try:
            return executor(model, *args, **kwargs)
        finally:
            del base.memory_required
