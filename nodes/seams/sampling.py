"""The sampler's latent in the flow convention the SEA filter expects (docs/algorithm.md §2: x = (1 - s) x0 + s eps).

ComfyUI models keep the latent in their sampling type's own form, told by ``model_sampling.noise_scaling``:
flow matching (CONST) carries ``(1 - sigma) x0 + sigma eps`` (already the filter's form); epsilon/v-prediction
(EPS, V_PREDICTION, EDM, ...) carry ``x0 + sigma eps``, i.e. ``scale = 1 / (1 + sigma)`` and
``sigma_flow = sigma / (1 + sigma)``. Both are read off the model's own ``noise_scaling`` rather than its class,
so any sampling type of the form ``b x0 + a eps`` maps to ``scale = 1 / (a + b)``, ``sigma_flow = a / (a + b)``.
"""

from __future__ import annotations

import math

import torch


def flow_scale_and_sigma(model_sampling, sigma: float) -> tuple[float, float]:
    """``(scale, sigma_flow)`` with ``scale * x = (1 - sigma_flow) x0 + sigma_flow eps`` for the sampler's latent x
    at ``sigma``; ValueError for a sampling type that is not a noise schedule of that form."""
    s = torch.tensor([float(sigma)], dtype=torch.float64)
    one, zero = torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64)
    a = float(model_sampling.noise_scaling(s, one.clone(), zero.clone()))
    b = float(model_sampling.noise_scaling(s, zero.clone(), one.clone()))
    if not (math.isfinite(a) and math.isfinite(b)) or a < 0 or b < 0 or a + b <= 0:
        raise ValueError(
            f"SeaCache Apply needs a flow-matching or epsilon/v-prediction model; this model's sampling "
            f"({type(model_sampling).__name__}) does not mix clean latent and noise (weights {b}, {a})."
        )
    return 1.0 / (a + b), a / (a + b)


def video_stream(base_model, x: torch.Tensor) -> torch.Tensor:
    """The first (video) stream of a model call's latent that ComfyUI's sampler packed from an audio-video latent
    (``[B, 1, N]``, the streams' shapes in ``base_model.latent_shapes``), else ``x`` itself. The gate decides on
    the video, as diffusers and vLLM-Omni do for joint audio-video models."""
    shapes = getattr(base_model, "latent_shapes", None)
    if shapes is None or len(shapes) < 2 or x.ndim != 3:
        return x
    video = tuple(shapes[0])
    return x[:, :, : math.prod(video[1:])].reshape(x.shape[0], *video[1:])
