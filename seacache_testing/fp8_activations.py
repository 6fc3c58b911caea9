"""W8A8 as ComfyUI computes it, run on the CPU: the proxies loaded with weight dtype ``fp8_e4m3fn_fast``.

ComfyUI's ``fp8_e4m3fn_fast`` (its UNETLoader's and this pack's Cosmos3 Loader's) stores every ``Linear`` weight in
e4m3 and, on a device it grants fp8 compute (``comfy.model_management.supports_fp8_compute``), builds the model with
``comfy.ops.fp8_ops``: each linear layer's input is clamped to +-448 and cast to e4m3 with scale 1, its weight taken
as stored (scale 1), and ``torch._scaled_mm`` multiplies them with float32 accumulation into the input's dtype
(``comfy.ops.fp8_linear``). torch runs ``_scaled_mm`` on the CPU too, and a product of two e4m3 numbers is exact in
float32, so a CPU declared capable runs ComfyUI's own W8A8 code, not a stand-in. :func:`fp8_compute_device` grants
it while a model loads; :func:`weight_only` switches ComfyUI's fp8 matrix multiplication off for a while, so the same
layers compute with their e4m3 weights upcast (W8A16) and the difference between the two is the activations'
quantization alone (NVIDIA's cosmos-framework #247: input-dependent noise per forward, unlike the weights' error,
which is smooth in the input). :class:`CallNoise` measures it on every model call of a run.

ComfyUI is imported only inside these functions (``COMFYUI_PATH``, ``seacache_testing.comfyui_harness``).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

FAST = "fp8_e4m3fn_fast"  # the loaders' weight dtype whose linear layers multiply in fp8
NOISE_KEY = "seacache_bench_fp8_noise"
REROUND_KEY = "seacache_bench_fp8_reround"


@contextmanager
def fp8_compute_device():
    """ComfyUI told that the load device computes in fp8 and ``--fast`` cleared, while a model loads: a weight dtype of
    :data:`FAST` then builds it with ``comfy.ops.fp8_ops`` (``pick_operations`` reads both at build time)."""
    import comfy.cli_args
    import comfy.model_management as mm

    supports, fast = mm.supports_fp8_compute, comfy.cli_args.args.fast
    mm.supports_fp8_compute = lambda *args, **kwargs: True
    comfy.cli_args.args.fast = set()
    try:
        yield
    finally:
        mm.supports_fp8_compute, comfy.cli_args.args.fast = supports, fast


def fp8_layers(model) -> list:
    """The linear layers of a MODEL's diffusion model that multiply in fp8 (``comfy.ops.fp8_ops.Linear`` holding an
    e4m3 weight)."""
    import comfy.ops

    return [m for m in model.model.diffusion_model.modules()
            if isinstance(m, comfy.ops.fp8_ops.Linear) and m.weight.dtype == torch.float8_e4m3fn]


@contextmanager
def weight_only():
    """ComfyUI's fp8 matrix multiplication off (``comfy.ops.fp8_linear`` answers None, which its ``fp8_ops.Linear``
    takes as "not applicable" and casts the e4m3 weight to the input's dtype instead): W8A16 with the same weights."""
    import comfy.ops

    original = comfy.ops.fp8_linear
    comfy.ops.fp8_linear = lambda *args, **kwargs: None
    try:
        yield
    finally:
        comfy.ops.fp8_linear = original


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b||, in float32."""
    return float((a.float() - b.float()).norm() / b.float().norm())


class CallNoise:
    """A ``DIFFUSION_MODEL`` wrapper that computes every call twice on the same input, with the activations in fp8
    (the model's own W8A8; first, so that what a run computes once and keeps is W8A8's) and without
    (:func:`weight_only`), returns the W8A8 output (the run stays W8A8) and keeps per
    call the activations' noise ``||W8A8 - W8A16|| / ||W8A16||`` and the W8A16 output's change since the previous
    call ``||v_t - v_(t-1)|| / ||v_t||`` (the step-to-step change it competes with; None on the first call)."""

    def __init__(self):
        self.noise: list[float] = []
        self.change: list[float | None] = []
        self._previous: torch.Tensor | None = None

    def __call__(self, executor, x, *args, **kwargs):
        out = executor(x.clone(), *args, **kwargs)  # first: what a run computes once and keeps (Cosmos3's text K/V)
        with weight_only():
            smooth = executor(x, *args, **kwargs)
        self.noise.append(relative(out, smooth))
        self.change.append(None if self._previous is None else relative(self._previous, smooth))
        self._previous = smooth.detach().clone()
        return out

    def attach(self, model):
        """A clone of MODEL ``model`` with this wrapper."""
        import comfy.patcher_extension

        patched = model.clone()
        patched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, NOISE_KEY, self)
        return patched


def rerounded(model):
    """A clone of MODEL ``model`` whose diffusion model sees its input latent rounded to bfloat16 on every call: the
    same computation with each step's input re-rounded (far below anything visible), so the distance of its result to
    ``model``'s is the floor any re-rounding of the trajectory gives (for W8A8: other activation roundings)."""
    import comfy.patcher_extension

    patched = model.clone()
    patched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, REROUND_KEY,
                                 lambda executor, x, *args, **kwargs: executor(x.to(torch.bfloat16).to(x.dtype), *args, **kwargs))
    return patched
