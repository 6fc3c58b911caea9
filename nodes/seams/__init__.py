"""Where SeaCache takes the residual of a skipped computation: one module per seam, tried deepest first.

- :mod:`.cosmos3_stack`: this pack's Cosmos3, the generator stack (gated by the model's own wrapper).
- :mod:`.community_cosmos3`: the community ComfyUI-Cosmos3 MODEL, its decoder-layer stack.
- :mod:`.block_stack`: Wan, HunyuanVideo, LTX-Video, Flux, Qwen-Image, all blocks via ``patches_replace``.
- :mod:`.diffusion_call`: any other diffusion MODEL, the diffusion-model call.
"""

from __future__ import annotations

import comfy.patcher_extension

from ..cosmos3_model import GEN_STACK_WRAPPER
from . import block_stack, community_cosmos3, cosmos3_stack, diffusion_call
from .base import WRAPPER_KEY, Seam

PLANNERS = (cosmos3_stack.plan, community_cosmos3.plan, block_stack.plan, diffusion_call.plan)
WRAPPER_TYPES = (
    comfy.patcher_extension.WrappersMP.OUTER_SAMPLE,
    comfy.patcher_extension.WrappersMP.APPLY_MODEL,
    comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL,
    GEN_STACK_WRAPPER,
)


def remove_seacache(patched) -> None:
    """Remove every wrapper and patch an earlier SeaCache Apply installed on this clone."""
    for wrapper_type in WRAPPER_TYPES:
        patched.remove_wrappers_with_key(wrapper_type, WRAPPER_KEY)
    block_stack.remove(patched)
    community_cosmos3.remove(patched)


def select_seam(model) -> Seam:
    """The deepest seam this MODEL allows; ValueError naming the problem for something that is no diffusion MODEL."""
    for plan in PLANNERS:
        seam = plan(model)
        if seam is not None:
            return seam
    kind = type(getattr(model, "model", model)).__name__
    raise ValueError(
        f"SeaCache Apply needs a diffusion MODEL (a model loader's MODEL output); got a {kind} without a noise "
        "schedule. Connect the MODEL output of a checkpoint or diffusion-model loader."
    )
