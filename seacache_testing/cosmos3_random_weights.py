"""Random-weight Cosmos3 models built directly on a device, for benchmarks and tests (no checkpoint, no host copy)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from cosmos3.config import Cosmos3Config
from cosmos3.model import Cosmos3Transformer
from cosmos3.ops import FP8_DTYPES, TorchOps


class CastLinear(nn.Linear):
    """``nn.Linear`` that casts its stored weight and bias to the input's dtype on every call, so weights can
    be stored in fp8 and computed in bf16 (what ComfyUI's cast-on-the-fly operations do inside ComfyUI)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = None if self.bias is None else self.bias.to(x.dtype)
        return F.linear(x, self.weight.to(x.dtype), bias)


class CastOps(TorchOps):
    """Plain torch layers with cast-on-the-fly linears: fp8 weight storage outside ComfyUI (benchmarks, tests)."""

    Linear = CastLinear


@torch.no_grad()
def randomize_(model: torch.nn.Module, seed: int) -> None:
    """Random weights in place on the model's device: norm scales near 1, small biases, matrices with variance
    1/fan_in. Values are drawn in float32 in parameter order and cast on copy, so models of one config and seed
    in fp32, bf16 or fp8 hold the same weights rounded to their storage dtype."""
    gen = None
    for name, p in model.named_parameters():
        if gen is None:
            gen = torch.Generator(device=p.device).manual_seed(seed)
        value = torch.randn(p.shape, generator=gen, device=p.device, dtype=torch.float32)
        if "norm" in name:
            value = 1.0 + 0.1 * value
        elif name.endswith("bias"):
            value = 0.02 * value
        else:
            value = value / math.sqrt(p.shape[-1] if p.ndim > 1 else 1)
        p.copy_(value)
        del value


def random_model(config: Cosmos3Config, weight_dtype: torch.dtype, device, seed: int = 0,
                 operations=None) -> Cosmos3Transformer:
    """An eval-mode model with random weights allocated directly on ``device`` (built on the meta device first).
    fp8 storage uses cast-on-the-fly linears (bf16 compute) unless ``operations`` says otherwise."""
    ops = operations or (CastOps if weight_dtype in FP8_DTYPES else TorchOps)
    model = Cosmos3Transformer(config, operations=ops, device="meta", dtype=weight_dtype).to_empty(device=device)
    randomize_(model, seed)
    return model.eval().requires_grad_(False)
