"""Where SeaCache takes the residual of a skipped computation, one module per seam, tried deepest first: this pack's
Cosmos3 generator stack, the community Cosmos3's layer stack, the core models' block stack, any other model's
diffusion-model call; :mod:`.context_windows` wraps any of them for moving context windows."""

from __future__ import annotations

import comfy.patcher_extension

from . import block_stack, community_cosmos3, context_windows, cosmos3_stack, diffusion_call
from .base import WRAPPER_KEY, Seam

SEAM_FINDERS = (
    cosmos3_stack.seam_for,
    community_cosmos3.seam_for,
    block_stack.seam_for,
    diffusion_call.seam_for,
)
WRAPPER_TYPES = (comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, comfy.patcher_extension.WrappersMP.APPLY_MODEL)


def remove_seacache(patched) -> None:
    """Remove the wrappers an earlier SeaCache Apply registered on this clone (``Seam.detach`` the rest)."""
    for wrapper_type in WRAPPER_TYPES:
        patched.remove_wrappers_with_key(wrapper_type, WRAPPER_KEY)


def select_seam(model_patcher, model_options: dict) -> Seam:
    """The deepest seam this MODEL allows with these options; ValueError for no diffusion MODEL."""
    for seam_for in SEAM_FINDERS:
        seam = seam_for(model_patcher)
        if seam is not None:
            return context_windows.around(seam, model_options)
    kind = type(getattr(model_patcher, "model", model_patcher)).__name__
    raise ValueError(
        f"SeaCache Apply needs a diffusion MODEL (a model loader's MODEL output); got a {kind} without a noise "
        "schedule. Connect the MODEL output of a checkpoint or diffusion-model loader."
    )
