"""Default layer operations and attention, replaceable by the host (ComfyUI passes ``comfy.ops`` and its attention).

An ``operations`` object provides ``Linear``, ``RMSNorm`` and ``Embedding`` classes with the
``torch.nn`` constructor signatures plus ``device``/``dtype`` keywords. An attention function takes
``q [B, Hq, Lq, D]``, ``k``/``v [B, Hkv, Lk, D]`` and ``causal``, and returns ``[B, Lq, Hq * D]``. The model
never passes masks (prompts of different lengths attend item by item), so every fast kernel stays usable.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """RMS normalisation with the statistic in float32 and a learned scale, as Cosmos3 (Qwen3) uses it."""

    def __init__(self, normalized_shape, eps=1e-6, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        size = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size, device=device, dtype=dtype)) if elementwise_affine else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        variance = x.float().pow(2).mean(-1, keepdim=True)
        out = x * torch.rsqrt(variance + self.eps)
        if self.weight is None:
            return out.to(x.dtype)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            out = out.to(self.weight.dtype)
        return (out * self.weight).to(x.dtype)


FP8_DTYPES = tuple(getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n))


def precise_dtype(dtype):
    """Storage dtype for norm scales, embeddings and the patch projections: bf16 where the big matrices are
    stored in fp8 (3 mantissa bits would put ~6 % error on every norm scale), the same dtype otherwise."""
    return torch.bfloat16 if dtype in FP8_DTYPES else dtype


class TorchOps:
    """Plain torch layers: the operations used outside ComfyUI (tests, scripts)."""

    Linear = nn.Linear
    Embedding = nn.Embedding
    RMSNorm = RMSNorm


class CastLinear(nn.Linear):
    """``nn.Linear`` that casts its stored weight and bias to the input's dtype on every call, so weights can
    be stored in fp8 and computed in bf16 (what ComfyUI's cast-on-the-fly operations do inside ComfyUI)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), bias)


class CastOps(TorchOps):
    """Plain torch layers with cast-on-the-fly linears: fp8 weight storage outside ComfyUI (benchmarks, tests)."""

    Linear = CastLinear


_SDPA_HAS_GQA = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)


def expand_kv_heads(k: torch.Tensor, q_heads: int) -> torch.Tensor:
    """Repeat each key/value head for its group of query heads (query head h reads kv head h // group)."""
    return k if k.shape[1] == q_heads else k.repeat_interleave(q_heads // k.shape[1], dim=1)


def sdpa_attention(q, k, v, causal=False):
    """Grouped-query attention through ``torch.nn.functional.scaled_dot_product_attention``."""
    if k.shape[1] != q.shape[1] and _SDPA_HAS_GQA:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    else:
        k, v = expand_kv_heads(k, q.shape[1]), expand_kv_heads(v, q.shape[1])
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return out.transpose(1, 2).flatten(2)
