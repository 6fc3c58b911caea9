"""What every seam provides to the SeaCache runtime (:mod:`..runtime`): where the skippable stack begins
and ends inside the model and how to run it. Deciding, predicting and committing are the runtime's."""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

WRAPPER_KEY = "seacache"
"""Key under which SeaCache registers its wrappers on a MODEL clone (``add_wrapper_with_key``)."""


def no_binding(base_model, call):
    """For seams the call's ``transformer_options`` reach: nothing to bind."""
    return nullcontext()


def latent_numel(diffusion_model, input_shape) -> int:
    """Elements of one item of the sampler's latent (a residual taken on the whole model output)."""
    return math.prod(input_shape[1:])


def no_run_patches(model_options: dict) -> None:
    """For seams whose hooks were all registered at Apply time: nothing to add at run start."""


def no_attach(patched) -> None:
    """For seams that need nothing on the MODEL clone itself."""


@dataclass(frozen=True)
class Seam:
    """Where SeaCache takes the residual of a model.

    ``name`` is shown by the Stats node. ``attach(patched)`` adds, at Apply time, what must live on the MODEL clone
    itself (object patches, inert outside a gated call). ``enter_run(model_options)`` registers the seam's run-time hooks in the
    run's private model options, at run start when every patch of the final MODEL is known (block-stack seams wrap
    the block patches other nodes added). ``bind(base_model, call)`` is a context manager that hands the call to
    seams the call's ``transformer_options`` do not reach. ``residual_numel(diffusion_model, input_shape)`` is the
    element count of one item's residual, for the memory estimate. ``auto_order`` is the residual order SeaCache
    Apply's "auto" picks: 2 where it was measured better (the Cosmos3 architecture, README Quality), vLLM-Omni's 1
    elsewhere."""

    name: str
    residual_numel: Callable[[object, tuple], int] = latent_numel
    enter_run: Callable[[dict], None] = no_run_patches
    bind: Callable = no_binding
    attach: Callable[[object], None] = no_attach
    auto_order: int = 1
