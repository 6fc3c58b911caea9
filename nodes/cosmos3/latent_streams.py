"""The latent a ComfyUI sampler hands Cosmos3: the video latent alone, or an audio-video latent, which arrives
packed flat ``[B, 1, N]`` (with ``latent_shapes`` naming its streams) or as ComfyUI's ``NestedTensor``. Video-only
steps (the Wan2.2 normalisation, the prompt's size, the memory estimate) read the video stream through these."""

from __future__ import annotations

import torch

import comfy.utils

from ...cosmos3 import Cosmos3Config


def item_tokens(config: Cosmos3Config, input_shape) -> int:
    """Generator tokens of one item of a sampler latent ``[B, C, T, H, W]``. A packed audio-video latent
    ``[B, 1, N]`` is counted as N / patch size: each sound frame then counts ``sound_dim / patch_latent_dim`` of a
    token instead of one, a slight undercount next to the video's tokens (its size: docs/cosmos3-family.md, memory
    with sound)."""
    if len(input_shape) == 3:
        return -(-input_shape[2] // config.patch_latent_dim)
    return config.token_count(*input_shape[2:5])


def is_packed(shape, latent_shapes) -> bool:
    """Whether a tensor of ``shape`` is the sampler's flat pack [B, 1, N] of several latent streams."""
    return latent_shapes is not None and len(latent_shapes) > 1 and len(shape) == 3


def video_shape(shape, latent_shapes) -> tuple:
    """The video latent's shape [B, C, T, H, W] of a latent (plain or packed audio-video), with its batch."""
    shape = tuple(shape)
    return (shape[0], *tuple(latent_shapes[0])[1:]) if is_packed(shape, latent_shapes) else shape


def on_video_stream(latent, latent_shapes, fn):
    """``fn`` applied to the video stream of a latent, plain, packed or nested; other streams unchanged."""
    if not isinstance(latent, torch.Tensor):  # ComfyUI's NestedTensor
        streams = latent.unbind()
        return type(latent)([fn(streams[0]), *streams[1:]])
    if not is_packed(latent.shape, latent_shapes):
        return fn(latent)
    streams = comfy.utils.unpack_latents(latent, latent_shapes)
    return comfy.utils.pack_latents([fn(streams[0]), *streams[1:]])[0]
