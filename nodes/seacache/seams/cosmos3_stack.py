"""Seam for this pack's Cosmos3: the generator stack (``run_gen_stack``, every layer's generator pathway over
cached text K/V), entered and left through the model's own ``GEN_STACK_WRAPPER`` hook. A reused call runs neither
the generator layers nor the text pathway."""

from __future__ import annotations

import comfy.patcher_extension

from ...cosmos3.comfy_model import Cosmos3
from ...cosmos3.diffusion_model import GEN_STACK_WRAPPER
from ...cosmos3.latent_streams import item_tokens
from .base import CALL_OPTION, WRAPPER_KEY, Seam, SeamCall

NAME = "Cosmos3 generator stack (this pack)"


def gen_stack_seam(executor, hidden, inputs):
    """Enter the stack (the predicted output on a reused call) or run it and leave it; a plain call outside a
    gated call (e.g. an uncached guidance call)."""
    call: SeamCall | None = inputs.transformer_options.get(CALL_OPTION)
    if call is None:
        return executor(hidden, inputs)
    predicted = call.enter(hidden)
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
        return Seam(NAME, _residual_numel, _enter_run, auto_order=2)
    return None
