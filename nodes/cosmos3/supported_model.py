"""The ComfyUI model config of a Cosmos3 checkpoint: its latent format, sampling defaults and inference dtypes,
and the :class:`~.base_model.Cosmos3` it builds; the loader fills it from the checkpoint's config."""

from __future__ import annotations

import torch

import comfy.latent_formats
import comfy.supported_models_base

from ...cosmos3 import Cosmos3Config
from .base_model import Cosmos3


class UnnormalisedVideoLatent(comfy.latent_formats.LatentFormat):
    """The latent format of a checkpoint whose latent is not Wan2.2's 48 channels (a proxy trained on its own
    latent space, such as the benchmarks' quality proxies): video-shaped and passed through unscaled, since
    Wan2.2's per-channel statistics do not apply to it."""

    latent_dimensions = 3

    def __init__(self, channels: int):
        self.latent_channels = channels


class Cosmos3ModelConfig(comfy.supported_models_base.BASE):
    """ComfyUI model config: Wan2.2 latent space, flow sampling with Nano's 720p shift and identity timesteps."""

    unet_config = {"image_model": "cosmos3"}
    unet_extra_config = {}
    sampling_settings = {"shift": 10.0, "multiplier": 1.0}
    latent_format = comfy.latent_formats.Wan22
    supported_inference_dtypes = [torch.bfloat16, torch.float32]

    def __init__(self, config: Cosmos3Config):
        super().__init__({"image_model": "cosmos3", **config.to_dict()})
        if config.latent_channel != self.latent_format.latent_channels:
            self.latent_format = UnnormalisedVideoLatent(config.latent_channel)

    def get_model(self, state_dict, prefix="", device=None):
        return Cosmos3(self, device=device)
