"""This pack's Cosmos3 seam: the generator stack, entered and left through the model's ``GEN_STACK_WRAPPER``; a reused
call runs neither the generator layers nor the text pathway."""

from __future__ import annotations

import comfy.patcher_extension
import torch

from ...cosmos3.base_model import Cosmos3
from ...cosmos3.transformer import GEN_STACK_WRAPPER
from ...cosmos3.latent_streams import item_tokens
from ....seacache_core.vision_tokens import noisy_frames_view
from .base import CALL_OPTION, WRAPPER_KEY, RunStart, Seam, SeamCall, any_conditioning

NAME = "Cosmos3 generator stack (this pack)"


def block_view_of(model, hidden: torch.Tensor, inputs) -> torch.Tensor:
    """The first generator layer's input norm on the video tokens of the noisy frames, ``[B, D, T', H, W]``: what
    diffusers' first-block indicator reads on Cosmos3 (one host read per call: the conditioned frames)."""
    with torch.no_grad():
        return noisy_frames_view(model.layers[0].input_layernorm_moe_gen(hidden), inputs.grid, inputs.frame_is_clean)


@torch.compiler.disable(recursive=False)  # untraced: a compile ignoring transformer_options (KJNodes) would replay one call's path
def gen_stack_seam(executor, hidden, inputs):
    """Enter the stack (the predicted output on a reused call) or run it and leave it."""
    call: SeamCall | None = inputs.transformer_options.get(CALL_OPTION)
    if call is None:
        return executor(hidden, inputs)
    predicted = call.enter(hidden, lambda: block_view_of(executor.class_obj, hidden, inputs))
    if predicted is not None:
        return predicted
    out = executor(hidden, inputs)
    call.leave(out)
    return out


def _enter_run(model_options: dict, run: RunStart) -> None:
    comfy.patcher_extension.add_wrapper_with_key(GEN_STACK_WRAPPER, WRAPPER_KEY, gen_stack_seam, model_options, is_model_options=True)


def _residual_numel(diffusion_model, input_shape) -> int:
    cfg = diffusion_model.config
    return item_tokens(cfg, input_shape) * cfg.hidden_size


def seam_for(model_patcher) -> Seam | None:
    """The generator-stack seam for this pack's Cosmos3, None for any other model."""
    if isinstance(getattr(model_patcher, "model", None), Cosmos3):
        return Seam(NAME, _residual_numel, _enter_run, auto_order=2, refuse_view_conds=any_conditioning)
    return None
