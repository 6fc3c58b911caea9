"""The Cosmos3 pipeline's sigma schedule (UniPC with flow sigmas), reproduced exactly."""

from __future__ import annotations

import torch


def reference_sigmas(steps: int, shift: float, denoise: float = 1.0) -> torch.Tensor:
    """``steps + 1`` sigmas: ``linspace(1, 1/1000, n + 1)[:-1]`` shifted by ``shift*s / (1 + (shift-1)*s)``, the
    first nudged 1e-6 below 1, then a final 0, all computed in float64 like the reference and returned in
    float32. ``denoise < 1`` keeps the last ``steps`` of a ``steps / denoise`` schedule, as ComfyUI's schedulers do.
    """
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}.")
    total = steps if denoise >= 1.0 else int(round(steps / max(denoise, 1e-4)))
    stride = (1.0 / 1000 - 1.0) / total
    sigmas = [1.0 + i * stride for i in range(total)]
    sigmas = [shift * s / (1 + (shift - 1) * s) for s in sigmas]
    if abs(sigmas[0] - 1) < 1e-6:
        sigmas[0] -= 1e-6
    return torch.tensor(sigmas + [0.0], dtype=torch.float64).float()[-(steps + 1):]
