"""The fallback seam of any other model: the whole diffusion-model call (``DIFFUSION_MODEL`` wrapper, registered
innermost at run start so every other wrapper runs), its residual the output minus the latent's channels."""

from __future__ import annotations

import functools

import comfy.patcher_extension
import torch

from .base import CALL_OPTION, WRAPPER_KEY, RunStart, Seam, SeamCall

NAME = "diffusion-model call (output minus input)"


def _options(args, kwargs) -> dict:
    """The call's transformer_options, wherever the model's forward put them."""
    if isinstance(kwargs.get("transformer_options"), dict):
        return kwargs["transformer_options"]
    return next((a for a in args if isinstance(a, dict) and CALL_OPTION in a), {})


@torch.compiler.disable(recursive=False)  # untraced: a compile ignoring transformer_options (KJNodes) would replay one call's path
def diffusion_call_seam(latent_channels: int, executor, x, *args, **kwargs):
    """Skip the diffusion model on a reused call; record output minus input on a computed one (an output that does not
    match the latent is not recorded: the call runs whole)."""
    options = _options(args, kwargs)
    call: SeamCall | None = options.get(CALL_OPTION)
    if call is None:
        return executor(x, *args, **kwargs)
    stack_in = x[:, :latent_channels]
    predicted = call.enter(stack_in)
    if predicted is not None:
        return predicted
    out = executor(x, *args, **kwargs)
    if out.shape == stack_in.shape:
        call.leave(out)
    return out


def _enter_run(model_options: dict, run: RunStart) -> None:
    comfy.patcher_extension.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, WRAPPER_KEY,
                                                 functools.partial(diffusion_call_seam, run.latent_channels),
                                                 model_options, is_model_options=True)


def seam_for(model_patcher) -> Seam | None:
    """The diffusion-model seam for any model with a ``model_sampling``, None otherwise."""
    if getattr(getattr(model_patcher, "model", None), "model_sampling", None) is None:
        return None
    return Seam(NAME, enter_run=_enter_run)
