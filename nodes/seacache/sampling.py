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


def _weights(model_sampling, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The noise and clean-latent weights ``(a, b)`` of the model's latent at ``sigma`` (float64, where it lives)."""
    one, zero = torch.ones_like(sigma), torch.zeros_like(sigma)
    a = model_sampling.noise_scaling(sigma, one.clone(), zero.clone())
    b = model_sampling.noise_scaling(sigma, zero.clone(), one.clone())
    return a, b


def flow_scale_and_sigma(model_sampling, sigma: float) -> tuple[float, float]:
    """``(scale, sigma_flow)`` with ``scale * x = (1 - sigma_flow) x0 + sigma_flow eps`` for the sampler's latent x
    at ``sigma``; ValueError for a sampling type that is not a noise schedule of that form."""
    a, b = (float(w) for w in _weights(model_sampling, torch.tensor([float(sigma)], dtype=torch.float64)))
    if not (math.isfinite(a) and math.isfinite(b)) or a < 0 or b < 0 or a + b <= 0:
        raise ValueError(
            f"SeaCache Apply needs a flow-matching or epsilon/v-prediction model; this model's sampling "
            f"({type(model_sampling).__name__}) does not mix clean latent and noise (weights {b}, {a})."
        )
    return 1.0 / (a + b), a / (a + b)


def flow_scale_and_sigma_on_device(model_sampling, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`flow_scale_and_sigma` of a one-value sigma tensor, computed where it lives (float64, the same operations,
    so the same values) without a host read and without the check: the run checks its schedule at run start."""
    a, b = _weights(model_sampling, sigma.reshape(1).to(torch.float64))
    return 1.0 / (a + b), a / (a + b)


def scaled(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``x * scale`` for a one-value tensor ``scale``, rounded as ``x * float(scale)`` is (the product in float32 for
    half types, ``x``'s dtype out)."""
    compute = torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
    return (x.to(compute) * scale.to(compute)).to(x.dtype)


def packed_shapes(base_model, x: torch.Tensor) -> list | None:
    """The streams' shapes when ``x`` is a latent ComfyUI's sampler packed from several (``[B, 1, N]``, the shapes in
    ``base_model.latent_shapes``), else None."""
    shapes = getattr(base_model, "latent_shapes", None)
    return shapes if shapes is not None and len(shapes) >= 2 and x.ndim == 3 else None


def av_streams(base_model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(video, sound)`` of a model call's latent that ComfyUI's sampler packed from a video and a sound latent
    (``[B, 1, N]``, the two streams' shapes in ``base_model.latent_shapes``), else ``(x, None)``. The gate reads the
    video, and Cosmos3's sound ``[B, C, T]`` too (``SeaCacheConfig.sound_weight``, chosen on the trained
    audio-video proxy: docs/quality.md, Sound). LTX-2's audio ``[B, C, T, F]`` is not handed to the gate: the joint
    gate was not measured on it, so LTX-2 keeps the video-only gate."""
    shapes = packed_shapes(base_model, x)
    if shapes is None:
        return x, None
    cuts = [math.prod(tuple(shape)[1:]) for shape in shapes]
    video = x[:, :, : cuts[0]].reshape(x.shape[0], *tuple(shapes[0])[1:])
    if len(shapes) != 2 or len(shapes[1]) != 3:  # [B, C, T]: Cosmos3's sound latent
        return video, None
    return video, x[:, :, cuts[0] : cuts[0] + cuts[1]].reshape(x.shape[0], *tuple(shapes[1])[1:])


def latent_channels(base_model, x: torch.Tensor) -> int:
    """Channels of the sampler's (video) latent in a model call's ``x``, read off the shapes without slicing it: the
    first stream's of a packed latent (see :func:`av_streams`)."""
    shapes = packed_shapes(base_model, x)
    return int(x.shape[1] if shapes is None else tuple(shapes[0])[1])
