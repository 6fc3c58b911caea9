"""kijai/ComfyUI-KJNodes, the model-patch nodes users chain with a step cache, for integration tests: CPU
stand-ins for the CUDA kernels its attention patches call, counters of the attention they run, and the stack layers
those run in. Where the pack lives and how ComfyUI loads it: :data:`.ecosystem_packs.KJNODES`.

CUDA kernels: the attention patches run the pack's own code (its node, its override or forward functions); only
the kernel they end in is replaced by a counting stand-in computing the same attention with torch SDPA:
``sageattention.sageattn`` (mirrors SageAttention 2.2.0's ``sageattn(q, k, v, tensor_layout, is_causal,
attn_mask)``), ``flash_attn.flash_attn_func`` (mirrors flash-attn 2.x's ``flash_attn_func(q, k, v, dropout_p,
causal)``, NHD layout) and the pack's own ``_sageattn_int8_fp8_nhd`` (its INT8/FP8 quantized kernel call, NHD in and
out) with the ``_cuda_archs`` gate its memory-efficient Sage nodes check.
"""

from __future__ import annotations

import sys
import types
from contextlib import contextmanager

import torch


class KernelCalls:
    """Counts the calls of a stand-in attention kernel and the query tokens it attended, per call."""

    def __init__(self):
        self.calls = 0
        self.shapes: list[tuple] = []

    def attend(self, q, k, v, layout: str, mask=None):
        """SDPA in float32 of ``q, k, v`` in ``layout`` ("NHD": [B, N, H, D]; "HND": [B, H, N, D]), returned in the
        same layout and dtype; K/V with fewer heads than Q are grouped-query heads, as both real kernels take them."""
        self.calls += 1
        self.shapes.append(tuple(q.shape))
        to_hnd = (lambda t: t.transpose(1, 2)) if layout == "NHD" else (lambda t: t)
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.float()
        dtype = q.dtype
        q, k, v = (to_hnd(t).float() for t in (q, k, v))
        grouped = k.shape[1] != q.shape[1]
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=grouped)
        return to_hnd(out).to(dtype)


@contextmanager
def kernel_modules(calls: KernelCalls):
    """``sageattention`` and ``flash_attn`` stand-in modules importable inside the block (the pack imports them when
    its node runs and keeps the function), each routing to ``calls``."""

    def sageattn(q, k, v, tensor_layout="HND", is_causal=False, attn_mask=None, **_):
        assert not is_causal
        return calls.attend(q, k, v, tensor_layout, attn_mask)

    def flash_attn_func(q, k, v, dropout_p=0.0, causal=False, **_):
        assert not causal and dropout_p == 0.0
        return calls.attend(q, k, v, "NHD")

    stand_ins = {"sageattention": types.ModuleType("sageattention"), "flash_attn": types.ModuleType("flash_attn")}
    stand_ins["sageattention"].sageattn = sageattn
    stand_ins["flash_attn"].flash_attn_func = flash_attn_func
    saved = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        yield calls
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@contextmanager
def quantized_sage_kernel(ltxv_nodes, calls: KernelCalls):
    """The pack's memory-efficient Sage kernel call (``_sageattn_int8_fp8_nhd(qkv, dtype)``, NHD, consuming its
    list) routed to ``calls``, and its CUDA architecture gate passed, inside the block."""

    def kernel(qkv, dtype):
        q, k, v = qkv
        qkv.clear()
        return calls.attend(q, k, v, "NHD").to(dtype)

    saved = ltxv_nodes._sageattn_int8_fp8_nhd, ltxv_nodes._cuda_archs
    ltxv_nodes._sageattn_int8_fp8_nhd, ltxv_nodes._cuda_archs = kernel, ["sm89"]
    try:
        yield calls
    finally:
        ltxv_nodes._sageattn_int8_fp8_nhd, ltxv_nodes._cuda_archs = saved


@contextmanager
def sparse_attention_calls(optimization_nodes, calls: KernelCalls):
    """Counts the calls of the pack's NABLA sparse attention (``NABLA_Attention.__call__``, which its override
    runs) inside the block; the attention itself is the pack's, unchanged."""
    original = optimization_nodes.NABLA_Attention.__call__

    def counted(self, q, *args, **kwargs):
        calls.calls += 1
        calls.shapes.append(tuple(q.shape))
        return original(self, q, *args, **kwargs)

    optimization_nodes.NABLA_Attention.__call__ = counted
    try:
        yield calls
    finally:
        optimization_nodes.NABLA_Attention.__call__ = original


@contextmanager
def counting(ns, node: str, kernel: str | None, calls: KernelCalls):
    """The stand-in or counter a case's ``kernel`` names, in place inside the block (nothing for None). The
    quantized kernel and the sparse attention are patched in the pack module defining the case's ``node`` (its
    LTXV module, its optimization module), as ComfyUI imported it."""
    if kernel is None:
        yield calls
        return
    module = sys.modules[ns.nodes.NODE_CLASS_MAPPINGS[node].__module__]
    if kernel == "modules":
        context = kernel_modules(calls)
    elif kernel == "quantized":
        context = quantized_sage_kernel(module, calls)
    else:
        context = sparse_attention_calls(module, calls)
    with context:
        yield calls


class StackLayers:
    """Executions of a model's stack layers (a core model's transformer blocks, the native Cosmos3's generator
    steps) and the kernel calls of ``calls`` made inside them, counted from construction until :meth:`close`."""

    def __init__(self, diffusion_model, calls: KernelCalls):
        from .anymodel_runs import stack_blocks

        self.calls, self.runs, self.inside, self.start = calls, 0, 0, 0
        layers = getattr(diffusion_model, "layers", None)
        if layers is not None and hasattr(layers[0], "gen_step"):  # the native Cosmos3: its stack runs gen_step
            for layer in layers:
                layer.gen_step = self.counted(layer.gen_step)
            self.close = lambda: [delattr(layer, "gen_step") for layer in layers]
            return
        handles = [hook for block in stack_blocks(diffusion_model)
                   for hook in (block.register_forward_pre_hook(lambda *_: self.enter()),
                                block.register_forward_hook(lambda *_: self.leave()))]
        self.close = lambda: [handle.remove() for handle in handles]

    def enter(self) -> None:
        self.start = self.calls.calls

    def leave(self) -> None:
        self.runs += 1
        self.inside += self.calls.calls - self.start

    def counted(self, step):
        def run(*args, **kwargs):
            self.enter()
            out = step(*args, **kwargs)
            self.leave()
            return out

        return run
