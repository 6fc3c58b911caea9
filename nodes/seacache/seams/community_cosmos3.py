"""Seam for the community Cosmos3 MODEL (RyukoMatoiFan/ComfyUI-Cosmos3, diffusion model
``Cosmos3OmniTransformer``): its decoder-layer stack.

That model loops over the batch inside its forward and runs ``for layer in self.layers: und, gen = layer(und,
gen, cos_und, sin_und, cos_gen, sin_gen)`` on one item's text (und) and generator (gen) sequences, then keeps
only the generator output (final ``norm_moe_gen``, ``proj_out``). It offers no wrapper or block-replace hook,
so SeaCache Apply gives the patched clone an object patch of ``diffusion_model.layers``: the same layer modules (the weights'
key names do not change) whose iteration, during a gated call, yields one step that runs every layer or, on a
reused call, returns the item's generator input plus the extrapolated residual; the text pathway is skipped
too, as with this pack's Cosmos3. The residual is taken per item, before ``norm_moe_gen``, like the native
seam's.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from .base import Seam, SeamCall
from .block_stack import embedded_numel

NAME = "Cosmos3 decoder-layer stack (community ComfyUI-Cosmos3)"
LAYERS = "diffusion_model.layers"


class GatedLayerStack(torch.nn.ModuleList):
    """The model's layer list; iterated during a gated call it yields a single step over the whole stack."""

    def __init__(self, layers):
        super().__init__(layers)
        self.call: SeamCall | None = None

    def __iter__(self):
        if self.call is None:
            return super().__iter__()
        return iter((self._stack,))

    def _stack(self, und_seq, gen_seq, *rope):
        """All layers on one item ([L, D] sequences), or none of them on a reused call."""
        predicted = self.call.enter(gen_seq.unsqueeze(0))
        if predicted is not None:
            return und_seq, predicted[0]
        out = gen_seq
        for layer in self._modules.values():
            und_seq, out = layer(und_seq, out, *rope)
        self.call.leave(out.unsqueeze(0))
        return und_seq, out


def _matches(diffusion_model) -> bool:
    """The community model, recognised by its structure (class name, layer list, generator-pathway norm)."""
    return (
        type(diffusion_model).__name__ == "Cosmos3OmniTransformer"
        and isinstance(getattr(diffusion_model, "layers", None), torch.nn.ModuleList)
        and hasattr(diffusion_model, "norm_moe_gen")
    )


@contextmanager
def _bind(base_model, call):
    """Hand the call to the layer stack for its duration (the stack never sees transformer_options). A layer list
    that is not SeaCache's (the object patch was dropped) gets nothing: the call then runs whole, uncached."""
    stack = base_model.diffusion_model.layers
    if not isinstance(stack, GatedLayerStack):
        yield
        return
    stack.call = call
    try:
        yield
    finally:
        stack.call = None


def _residual_numel(diffusion_model, input_shape) -> int:
    """Generator tokens (the latent's elements over the patch embedding's input width) x hidden width."""
    return embedded_numel(diffusion_model.proj_in, input_shape)


def seam_for(model_patcher, model_options: dict) -> Seam | None:
    """The layer-stack seam for a community Cosmos3 MODEL whose layer list is SeaCache's (or not yet patched by
    anyone), None for any other model."""
    diffusion_model = getattr(getattr(model_patcher, "model", None), "diffusion_model", None)
    patch = model_patcher.object_patches.get(LAYERS) if hasattr(model_patcher, "object_patches") else None
    if not _matches(diffusion_model) or not (patch is None or isinstance(patch, GatedLayerStack)):
        return None

    def attach(patched) -> None:
        patched.add_object_patch(LAYERS, GatedLayerStack(list(diffusion_model.layers)))

    return Seam(NAME, _residual_numel, bind=_bind, attach=attach, detach=detach, auto_order=2)


def detach(patched) -> None:
    """Drop the layer-stack patch an earlier SeaCache Apply left on this (cloned) MODEL."""
    if isinstance(patched.object_patches.get(LAYERS), GatedLayerStack):
        del patched.object_patches[LAYERS]
