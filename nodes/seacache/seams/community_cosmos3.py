"""Seam for the community Cosmos3 MODEL (RyukoMatoiFan/ComfyUI-Cosmos3, diffusion model
``Cosmos3OmniTransformer``): the generator pathway of its decoder-layer stack.

That model loops over the batch inside its forward. Per item, as of commit b9226bf, it takes the text K/V of every
layer from the conditioning (``cosmos3_und_kv``, split reasoner) or from its own prefill (``_und_prefill``:
``for layer in self.layers: und, k, v = layer.forward_und(und, cos_und, sin_und)``, cached per prompt), then runs
``for layer, (k, v) in zip(self.layers, und_kv): gen = layer.forward_gen(gen, k, v, cos_gen, sin_gen)`` and keeps
the generator output (``norm_moe_gen``, ``proj_out``). Its first commit (1388a60) ran both pathways per layer:
``und, gen = layer(und, gen, cos_und, sin_und, cos_gen, sin_gen)``.

It offers no wrapper or block-replace hook, so SeaCache Apply gives the patched clone an object patch of
``diffusion_model.layers``: the same layer modules (the weights' key names do not change) whose iteration, during
a gated call, yields a :class:`GatedLayer` per layer. Its text-pathway method is the layer's own, so the prefill,
its cache and K/V from the conditioning are untouched. Its generator step enters the stack at the first layer and
leaves it at the last, per item; on a reused call the first returns the item's generator input plus the
extrapolated residual and the others pass it through, so no generator layer runs. The residual is taken before
``norm_moe_gen``, like the native seam's.

Which layout a MODEL has is checked at Apply and at run start from the layer methods' signatures; a
``Cosmos3OmniTransformer`` with any other layout is refused then, before the first step.
"""

from __future__ import annotations

import inspect
import threading
from contextlib import contextmanager

import torch

from .base import Seam, SeamCall, embedded_numel

NAME = "Cosmos3 decoder-layer stack (community ComfyUI-Cosmos3)"
LAYERS = "diffusion_model.layers"
PACK = "RyukoMatoiFan/ComfyUI-Cosmos3"
LAYOUTS = {
    "b9226bf": {"forward_und": ("und_seq", "cos_und", "sin_und"),
                "forward_gen": ("gen_seq", "k_und", "v_und", "cos_gen", "sin_gen")},
    "1388a60": {"forward": ("und_seq", "gen_seq", "cos_und", "sin_und", "cos_gen", "sin_gen")},
}
"""The layer interfaces this seam drives, by the pack commit that introduced them: method -> parameter names."""


class GatedLayer:
    """One decoder layer as the model sees it during a gated call: the text pathway is the layer's own; the
    generator pathway enters the stack at the first layer and leaves it at the last, and passes through on a reused
    call. What SeaCache does here runs through the call's guard: if it raises, the layer runs as it would alone."""

    def __init__(self, layer: torch.nn.Module, call: SeamCall, first: bool, last: bool):
        self.layer, self.call, self.first, self.last = layer, call, first, last

    def forward_und(self, *args, **kwargs):
        """The layer's text pathway, unchanged."""
        return self.layer.forward_und(*args, **kwargs)

    def forward_gen(self, gen_seq, *args, **kwargs):
        """The layer's generator pathway (b9226bf), or the stack's output on a reused call."""
        return self._gated(gen_seq, lambda: self.layer.forward_gen(gen_seq, *args, **kwargs))

    def __call__(self, und_seq, gen_seq, *rope):
        """Both pathways of the layer (1388a60); on a reused call the text pathway is skipped with the stack (only
        the generator output is used after it)."""
        return self._gated(gen_seq, lambda: self.layer(und_seq, gen_seq, *rope), lambda gen: (und_seq, gen), lambda out: out[1])

    def _gated(self, gen_seq, compute, wrap=lambda gen: gen, generator_of=lambda out: out):
        skipped = self.call.guarded(self._skip, gen_seq)
        if skipped is not None:
            return wrap(skipped)
        out = compute()
        if self.last:
            self.call.guarded(lambda: self.call.leave(generator_of(out).unsqueeze(0)))
        return out

    def _skip(self, gen_seq):
        """The output to use instead of running this layer: the stack's predicted output at the first layer of a
        reused call, the input at the others; None when the layer runs."""
        if self.first:
            predicted = self.call.enter(gen_seq.unsqueeze(0))
            return None if predicted is None else predicted[0]
        return gen_seq if self.call.stack_skipped else None


class GatedLayerStack(torch.nn.ModuleList):
    """The model's layer list; iterated during a gated call it yields one :class:`GatedLayer` per layer."""

    def __init__(self, layers):
        super().__init__(layers)
        self.calls: dict[int, SeamCall] = {}  # the call each thread has bound (threads may share one model)

    @property
    def call(self) -> SeamCall | None:
        """The call bound by the current thread, None outside a gated call of this thread."""
        return self.calls.get(threading.get_ident())

    def __iter__(self):
        layers, call = list(self._modules.values()), self.call
        if call is None:
            return iter(layers)
        return iter(GatedLayer(layer, call, i == 0, i == len(layers) - 1) for i, layer in enumerate(layers))


def _parameters(cls, method: str) -> tuple | None:
    """Parameter names of ``cls.method`` after ``self`` (None when it has no such method)."""
    function = getattr(cls, method, None)
    if not callable(function):
        return None
    return tuple(inspect.signature(function).parameters)[1:]


def layout(diffusion_model) -> str:
    """The commit whose layer interface every layer of this community model has (a key of :data:`LAYOUTS`);
    ValueError naming the pack and the supported versions otherwise."""
    layers = getattr(diffusion_model, "layers", None)
    found = {}
    if isinstance(layers, torch.nn.ModuleList) and len(layers) and all(hasattr(diffusion_model, m) for m in ("norm_moe_gen", "proj_in")):
        classes = {type(layer) for layer in layers}
        found = {m: _parameters(cls, m) for cls in classes for methods in LAYOUTS.values() for m in methods}
        for commit, methods in LAYOUTS.items():
            if all(_parameters(cls, m) == params for cls in classes for m, params in methods.items()):
                return commit
    supported = "; ".join(f"{commit}: " + ", ".join(f"{m}({', '.join(p)})" for m, p in methods.items())
                          for commit, methods in LAYOUTS.items())
    raise ValueError(
        f"SeaCache Apply does not know this version of the community Cosmos3 model ({PACK}): its decoder layers do "
        f"not offer the interface SeaCache drives (found {found or 'no generator layer stack'}). Supported "
        f"versions: {supported}. Use {PACK} at one of these commits, or sample this MODEL without SeaCache."
    )


@contextmanager
def _bind(base_model, call):
    """Hand the call to the layer stack for its duration (the stack never sees transformer_options). A layer list
    that is not SeaCache's (the object patch was dropped) gets nothing: the call then runs whole, uncached."""
    stack = base_model.diffusion_model.layers
    if not isinstance(stack, GatedLayerStack):
        yield
        return
    stack.calls[threading.get_ident()] = call
    try:
        yield
    finally:
        del stack.calls[threading.get_ident()]


def _residual_numel(diffusion_model, input_shape) -> int:
    """Generator tokens (the latent's elements over the patch embedding's input width) x hidden width."""
    return embedded_numel(diffusion_model.proj_in, input_shape)


def seam_for(model_patcher) -> Seam | None:
    """The layer-stack seam for a community Cosmos3 MODEL whose layer list is SeaCache's (or not yet patched by
    anyone), None for any other model; ValueError for a community model whose layer interface it does not know."""
    diffusion_model = getattr(getattr(model_patcher, "model", None), "diffusion_model", None)
    if type(diffusion_model).__name__ != "Cosmos3OmniTransformer":
        return None
    patch = model_patcher.object_patches.get(LAYERS) if hasattr(model_patcher, "object_patches") else None
    if not (patch is None or isinstance(patch, GatedLayerStack)):
        return None
    layout(diffusion_model)

    def attach(patched) -> None:
        patched.add_object_patch(LAYERS, GatedLayerStack(list(diffusion_model.layers)))

    return Seam(NAME, _residual_numel, bind=_bind, attach=attach, detach=detach, auto_order=2)


def detach(patched) -> None:
    """Drop the layer-stack patch an earlier SeaCache Apply left on this (cloned) MODEL."""
    if isinstance(patched.object_patches.get(LAYERS), GatedLayerStack):
        del patched.object_patches[LAYERS]
