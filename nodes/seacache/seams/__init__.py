"""Where SeaCache takes the residual of a skipped computation: one module per seam, tried deepest first. Each
module's ``seam_for(model_patcher)`` returns its :class:`.base.Seam` for a MODEL it serves, else None.

- :mod:`.context_windows`: around any of these, the windows of one step gated as one call (moving context windows).
- :mod:`.cosmos3_stack`: this pack's Cosmos3, the generator stack (the model's ``GEN_STACK_WRAPPER`` hook).
- :mod:`.community_cosmos3`: the community ComfyUI-Cosmos3 MODEL, its decoder-layer stack.
- :mod:`.block_stack`: Wan, HunyuanVideo, LTX-Video, Flux, Qwen-Image, all blocks via ``patches_replace``.
- :mod:`.diffusion_call`: any other diffusion MODEL, the diffusion-model call.
"""

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
"""The wrappers SeaCache Apply registers on the MODEL clone; the rest live in a run's private options only."""


def remove_seacache(patched) -> None:
    """Remove every wrapper an earlier SeaCache Apply registered on this clone (its seam's own patches go with
    ``Seam.detach``)."""
    for wrapper_type in WRAPPER_TYPES:
        patched.remove_wrappers_with_key(wrapper_type, WRAPPER_KEY)


def select_seam(model_patcher, model_options: dict) -> Seam:
    """The deepest seam this MODEL allows with these model options; ValueError naming the problem for something
    that is no diffusion MODEL."""
    for seam_for in SEAM_FINDERS:
        seam = seam_for(model_patcher)
        if seam is not None:
            return context_windows.around(seam, model_options)
    kind = type(getattr(model_patcher, "model", model_patcher)).__name__
    raise ValueError(
        f"SeaCache Apply needs a diffusion MODEL (a model loader's MODEL output); got a {kind} without a noise "
        "schedule. Connect the MODEL output of a checkpoint or diffusion-model loader."
    )
