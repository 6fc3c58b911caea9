"""The community Cosmos3 MODEL's seam (RyukoMatoiFan/ComfyUI-Cosmos3): its decoder layers' generator pathway, through an
object patch of the layer list that yields gated layers during the current thread's gated call (the model has no hook).
Its layouts: docs/any-model.md."""

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
# the layer interfaces this seam drives, by the pack commit that introduced them


class GatedLayer:
    """One decoder layer in a gated call: the generator pathway enters the stack at the first layer, leaves at the last
    and passes through on a reused call, under the call's guard."""

    def __init__(self, layer: torch.nn.Module, call: SeamCall, first: bool, last: bool):
        self.layer, self.call, self.first, self.last = layer, call, first, last

    def forward_und(self, *args, **kwargs):
        """The layer's text pathway, unchanged."""
        return self.layer.forward_und(*args, **kwargs)

    def forward_gen(self, gen_seq, *args, **kwargs):
        """The generator pathway (split layout), or the stack's output on a reused call."""
        return self._gated(gen_seq, lambda: self.layer.forward_gen(gen_seq, *args, **kwargs))

    def __call__(self, und_seq, gen_seq, *rope):
        """Both pathways (joint layout); on a reused call the text pathway is skipped with the stack."""
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
        """The output instead of running this layer on a reused call, else None."""
        if self.first:
            predicted = self.call.enter(gen_seq.unsqueeze(0))
            return None if predicted is None else predicted[0]
        return gen_seq if self.call.stack_skipped else None


class GatedLayerStack(torch.nn.ModuleList):
    """The layer list; iterated during a thread's gated call it yields :class:`GatedLayer`s."""

    def __init__(self, layers):
        super().__init__(layers)
        self.calls: dict[int, SeamCall] = {}  # by thread: threads may share one model

    @property
    def call(self) -> SeamCall | None:
        """The call the current thread bound, None outside one."""
        return self.calls.get(threading.get_ident())

    def __iter__(self):
        layers, call = list(self._modules.values()), self.call
        if call is None:
            return iter(layers)
        return iter(GatedLayer(layer, call, i == 0, i == len(layers) - 1) for i, layer in enumerate(layers))


def _parameters(cls, method: str) -> tuple | None:
    """Parameter names of ``cls.method`` after ``self``, None without it."""
    function = getattr(cls, method, None)
    if not callable(function):
        return None
    return tuple(inspect.signature(function).parameters)[1:]


def layout(diffusion_model) -> str:
    """The :data:`LAYOUTS` key every layer matches; ValueError naming the supported versions otherwise."""
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
    """Hand the call to this model's layer stack for the call's duration (none when the patch was dropped)."""
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
    """Generator tokens times hidden width."""
    return embedded_numel(diffusion_model.proj_in, input_shape)


def seam_for(model_patcher) -> Seam | None:
    """The layer-stack seam for a community Cosmos3 MODEL no one else patched, else None (ValueError: layout)."""
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
    """Drop the layer-stack patch an earlier SeaCache Apply left on this clone."""
    if isinstance(patched.object_patches.get(LAYERS), GatedLayerStack):
        del patched.object_patches[LAYERS]
