"""Cosmos3's generator attention through ComfyUI's optimized attention, so ComfyUI's attention backends and
attention-override nodes apply to this pack's Cosmos3 as to ComfyUI's own models."""

from __future__ import annotations

import comfy.ops
from comfy.ldm.modules.attention import optimized_attention

from ...cosmos3.ops import expand_kv_heads, sdpa_attention

COMFY_ATTENTION_HAS_GQA = hasattr(comfy.ops, "repeat_kv_for_gqa")
"""Whether this ComfyUI's attention functions take ``enable_gqa`` (grouped K/V heads without repeating them)."""


def comfy_attention(q, k, v, causal=False, transformer_options=None):
    """Generator attention through ComfyUI's optimized attention, with the call's ``transformer_options`` so
    attention-override nodes apply, and grouped-query K/V passed as they are where ComfyUI supports it (else the
    K/V heads are repeated). The causal text pathway (once per prompt and run) uses torch SDPA's ``is_causal``."""
    if causal:
        return sdpa_attention(q, k, v, causal=True)
    extra = {}
    if k.shape[1] != q.shape[1]:
        if COMFY_ATTENTION_HAS_GQA:
            extra["enable_gqa"] = True
        else:
            k, v = expand_kv_heads(k, q.shape[1]), expand_kv_heads(v, q.shape[1])
    return optimized_attention(q, k, v, heads=q.shape[1], skip_reshape=True,
                               transformer_options=transformer_options or {}, **extra)
