"""Seam for this pack's Cosmos3: the generator stack (``run_gen_stack``, every layer's generator pathway over
cached text K/V), entered and left through the model's own ``GEN_STACK_WRAPPER`` hook. A reused call runs neither
the generator layers nor the text pathway. It reaches the first block's input: first-block gates decide on
:func:`first_block_of` at the stack's entry."""

from __future__ import annotations

import comfy.patcher_extension
import torch

from ...cosmos3.comfy_model import Cosmos3
from ...cosmos3.diffusion_model import GEN_STACK_WRAPPER
from ...cosmos3.latent_streams import item_tokens
from ....seacache_core.first_block import noisy_frames_view
from .base import CALL_OPTION, WRAPPER_KEY, Seam, SeamCall, any_conditioning

NAME = "Cosmos3 generator stack (this pack)"


def first_block_of(model, hidden: torch.Tensor, inputs) -> torch.Tensor:
    """The first generator layer's input norm of the stack input ``hidden`` on the video tokens of the noisy frames,
    as a video ``[B, D, T', H, W]``: what diffusers' ``first_block`` indicator reads on Cosmos3 (conditioned frames
    and the sound tokens after the video's left out). One host read per call: the conditioned frames."""
    with torch.no_grad():
        return noisy_frames_view(model.layers[0].input_layernorm_moe_gen(hidden), inputs.grid, inputs.frame_is_clean)


@torch.compiler.disable(recursive=False)  # untraced: a compile ignoring transformer_options (KJNodes) would replay one call's path
def gen_stack_seam(executor, hidden, inputs):
    """Enter the stack (the predicted output on a reused call) or run it and leave it; a plain call outside a
    gated call (e.g. an uncached guidance call)."""
    call: SeamCall | None = inputs.transformer_options.get(CALL_OPTION)
    if call is None:
        return executor(hidden, inputs)
    predicted = call.enter(hidden, lambda: first_block_of(executor.class_obj, hidden, inputs))
    if predicted is not None:
        return predicted
    out = executor(hidden, inputs)
    call.leave(out)
    return out


def _enter_run(model_options: dict) -> None:
    comfy.patcher_extension.add_wrapper_with_key(GEN_STACK_WRAPPER, WRAPPER_KEY, gen_stack_seam, model_options, is_model_options=True)


def _residual_numel(diffusion_model, input_shape) -> int:
    cfg = diffusion_model.config
    return item_tokens(cfg, input_shape) * cfg.hidden_size


def seam_for(model_patcher, model_options: dict) -> Seam | None:
    """The generator-stack seam for a MODEL from this pack's Cosmos3 Loader, None for any other model."""
    if isinstance(getattr(model_patcher, "model", None), Cosmos3):
        return Seam(NAME, _residual_numel, _enter_run, auto_order=2, first_block=any_conditioning)
    return None
