"""Default layer operations and attention, replaceable by the host (ComfyUI passes ``comfy.ops`` and its attention).

An ``operations`` object provides ``Linear``, ``RMSNorm`` and ``Embedding`` classes with the
``torch.nn`` constructor signatures plus ``device``/``dtype`` keywords; it may also provide ``NemotronRMSNorm``
(see :func:`nemotron_norm_class`, otherwise derived from its ``RMSNorm``). An attention function takes
``q [B, Hq, Lq, D]``, ``k``/``v [B, Hkv, Lk, D]`` and ``causal``, and returns ``[B, Lq, Hq * D]``. The model
never passes masks (prompts of different lengths attend item by item), so every fast kernel stays usable.
"""

from __future__ import annotations

import functools

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


class NemotronRMSNorm(RMSNorm):
    """RMS normalisation of Nemotron-style (``hidden_act="relu2"``, Cosmos3-Edge) checkpoints: normalise in float32,
    multiply by the weight in float32, then cast back to the input dtype (a bf16 weight is never rounded to)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        out = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return (out if self.weight is None else out * self.weight.float()).to(x.dtype)


@functools.lru_cache(maxsize=None)
def _float32_norm_of(base: type) -> type:
    """Subclass of a host RMSNorm that runs it on a float32 copy of the input and casts the result back."""

    def forward(self, x):
        return base.forward(self, x.float()).to(x.dtype)

    return type(f"Nemotron{base.__name__}", (base,), {"forward": forward, "__doc__": f"{base.__name__} computed in float32 (Nemotron RMSNorm)."})


def nemotron_norm_class(operations) -> type:
    """The Nemotron RMSNorm class for ``operations``: its own ``NemotronRMSNorm`` when it has one, else a subclass
    of its ``RMSNorm`` fed float32 input. That is exact for any RMSNorm that computes in its input's dtype with the
    weight cast to it (torch.nn.RMSNorm, ComfyUI's ``comfy.ops`` RMSNorm with or without cast weights), and keeps
    the host's weight handling (casting, offloading, patches) because the module stays a host RMSNorm."""
    own = getattr(operations, "NemotronRMSNorm", None)
    return own if own is not None else _float32_norm_of(operations.RMSNorm)


def norm_class(operations, hidden_act: str) -> type:
    """RMSNorm class of a backbone: Nemotron-style for ``relu2`` (Cosmos3-Edge), the host's RMSNorm otherwise."""
    return nemotron_norm_class(operations) if hidden_act == "relu2" else operations.RMSNorm


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
    NemotronRMSNorm = NemotronRMSNorm


class CastLinear(nn.Linear):
    """``nn.Linear`` that casts its stored weight and bias to the input's dtype on every call, so weights can
    be stored in fp8 and computed in bf16 (what ComfyUI's cast-on-the-fly operations do inside ComfyUI)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), bias)


class CastOps(TorchOps):
    """Plain torch layers with cast-on-the-fly linears: fp8 weight storage outside ComfyUI (benchmarks, tests)."""

    Linear = CastLinear


def _sdpa_takes_enable_gqa() -> bool:
    """Whether this torch's ``scaled_dot_product_attention`` takes ``enable_gqa`` (a feature, not a version, is
    checked: builds and version strings vary)."""
    q = torch.zeros(1, 2, 1, 4)
    try:
        F.scaled_dot_product_attention(q, q[:, :1], q[:, :1], enable_gqa=True)
    except TypeError:
        return False
    return True


_SDPA_HAS_GQA = _sdpa_takes_enable_gqa()


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
