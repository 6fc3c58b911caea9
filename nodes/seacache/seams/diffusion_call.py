"""Fallback seam for any other ComfyUI model: the diffusion-model call itself (``DIFFUSION_MODEL`` wrapper,
registered at run start innermost, so every other node's wrapper runs on every call). The residual is the model
output minus its input latent (the first output-channel-many input channels: ComfyUI appends concat conditioning
after the latent), extrapolated on reused calls; the whole network is skipped."""

from __future__ import annotations

import comfy.patcher_extension
import torch

from .base import CALL_OPTION, RUN_OPTION, WRAPPER_KEY, Seam, SeamCall

NAME = "diffusion-model call (output minus input)"


def _options(args, kwargs) -> dict:
    """The call's transformer_options, wherever the model's forward put them (keyword or positional)."""
    if isinstance(kwargs.get("transformer_options"), dict):
        return kwargs["transformer_options"]
    return next((a for a in args if isinstance(a, dict) and CALL_OPTION in a), {})


@torch.compiler.disable(recursive=False)  # untraced: a compile ignoring transformer_options (KJNodes) would replay one call's path
def diffusion_call_seam(executor, x, *args, **kwargs):
    """Skip the whole diffusion model on a reused call; record output minus input on a computed one. A model whose
    output does not match its input latent is not entered (the call runs whole and uncached)."""
    options = _options(args, kwargs)
    call: SeamCall | None = options.get(CALL_OPTION)
    if call is None:
        return executor(x, *args, **kwargs)
    stack_in = x[:, : options[RUN_OPTION].latent_channels]
    predicted = call.enter(stack_in)
    if predicted is not None:
        return predicted
    out = executor(x, *args, **kwargs)
    if out.shape == stack_in.shape:
        call.leave(out)
    return out


def _enter_run(model_options: dict) -> None:
    comfy.patcher_extension.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, WRAPPER_KEY,
                                                 diffusion_call_seam, model_options, is_model_options=True)


def seam_for(model_patcher, model_options: dict) -> Seam | None:
    """The diffusion-model seam for any ComfyUI diffusion MODEL (one with a model_sampling), None otherwise."""
    if getattr(getattr(model_patcher, "model", None), "model_sampling", None) is None:
        return None
    return Seam(NAME, enter_run=_enter_run)
