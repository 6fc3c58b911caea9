"""The decoder of Cosmos3's audio VAE (the checkpoint's ``sound_tokenizer/``): sound latents to a waveform.

An Oobleck-style decoder: a 7-tap convolution up to the widest channels, one upsampling block per stride (Snake,
transposed convolution, three dilated residual units), Snake, a 7-tap convolution to the audio channels, clamped to
[-1, 1]. Convolutions are weight-normalised (``weight_g``/``weight_v`` in the checkpoint); Snake is
``x + sin(e^a x)^2 / (e^b + 1e-9)``. A latent of ``T`` frames decodes to ``T * prod(dec_strides)`` samples. A
clip's sound length follows diffusers' pipeline: ``hop`` waveform samples per latent frame, ``hop_size`` when the
config sets it (the encoder's compression) and the product of the strides otherwise. The encoder is not needed to
generate and is not built.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

AUDIO_VAE_FOLDER = "sound_tokenizer"
_SHIPPED = {"model_type": "autoencoder_v2", "dec_type": "oobleck", "dec_use_snake": True, "snake_logscale": True,
            "dec_final_tanh": False, "dec_use_tanh_at_final": False, "dec_anti_aliasing": False,
            "dec_use_nearest_upsample": False, "latent_mean": None, "latent_std": None}
"""Decoder settings the checkpoints ship with; other values select decoders this module does not implement."""


@dataclass(frozen=True)
class AudioVAEConfig:
    """Decoder hyper-parameters, named as in the ``sound_tokenizer/config.json`` of a Cosmos3 checkpoint."""

    sampling_rate: int = 48000
    vocoder_input_dim: int = 64  # latent channels (the transformer's sound_dim)
    dec_dim: int = 320
    dec_c_mults: tuple[int, ...] = (1, 2, 4, 8, 16)
    dec_strides: tuple[int, ...] = (2, 4, 5, 6, 8)
    dec_out_channels: int = 2
    hop_size: int | None = None  # waveform samples per latent frame when set (else the product of the strides)

    @property
    def hop(self) -> int:
        """Waveform samples per latent frame, as diffusers' pipeline sizes a clip's sound (its ``_hop_size``)."""
        return self.hop_size or math.prod(self.dec_strides)

    @property
    def latent_fps(self) -> float:
        """Sound latent frames per second (``sampling_rate / hop``)."""
        return self.sampling_rate / self.hop

    def sound_frames(self, frames: int, fps: float) -> int:
        """Sound latent frames of a clip of ``frames`` video frames at ``fps``, as diffusers' pipeline sizes it:
        ``int(frames / fps * sampling_rate)`` samples, rounded up to whole ``hop``s."""
        samples = int(frames / fps * self.sampling_rate)
        return max(1, math.ceil(samples / self.hop))

    @classmethod
    def from_dict(cls, raw: dict) -> "AudioVAEConfig":
        """From a ``config.json`` dict; raises naming the setting when it selects an unsupported decoder."""
        odd = {k: raw[k] for k, v in _SHIPPED.items() if k in raw and raw[k] != v}
        if odd:
            raise ValueError(f"Cosmos3 audio VAE: unsupported decoder settings {odd}; supported: the shipped "
                             f"Oobleck decoder ({ {k: _SHIPPED[k] for k in odd} }).")
        return cls(
            sampling_rate=int(raw.get("sampling_rate", cls.sampling_rate)),
            vocoder_input_dim=int(raw.get("vocoder_input_dim", cls.vocoder_input_dim)),
            dec_dim=int(raw.get("dec_dim", cls.dec_dim)),
            dec_c_mults=tuple(int(v) for v in raw.get("dec_c_mults", cls.dec_c_mults)),
            dec_strides=tuple(int(v) for v in raw.get("dec_strides", cls.dec_strides)),
            dec_out_channels=int(raw.get("dec_out_channels", cls.dec_out_channels)),
            hop_size=int(raw["hop_size"]) if raw.get("hop_size") is not None else None,
        )


class Snake(nn.Module):
    """Snake activation with log-scale per-channel ``alpha``/``beta``."""

    def __init__(self, channels: int, device=None, dtype=None):
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(1, channels, 1, device=device, dtype=dtype))
        self.beta = nn.Parameter(torch.zeros(1, channels, 1, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha, beta = self.alpha.to(x).exp(), self.beta.to(x).exp()
        return x + (beta + 1e-9).reciprocal() * torch.sin(alpha * x).pow(2)


class WeightNormConv(nn.Module):
    """A 1-d convolution (or transposed convolution) whose kernel is ``weight_g * weight_v / |weight_v|`` (the norm
    taken per slice of the first dimension), the layout ``torch.nn.utils.weight_norm`` saves."""

    def __init__(self, shape: tuple[int, int, int], bias: bool, transposed: bool = False, stride: int = 1,
                 padding: int = 0, output_padding: int = 0, dilation: int = 1, device=None, dtype=None):
        super().__init__()
        self.weight_g = nn.Parameter(torch.ones(shape[0], 1, 1, device=device, dtype=dtype))
        self.weight_v = nn.Parameter(torch.empty(shape, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(shape[1] if transposed else shape[0], device=device, dtype=dtype)) if bias else None
        self.transposed, self.stride, self.padding = transposed, stride, padding
        self.output_padding, self.dilation = output_padding, dilation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.weight_v.to(x)
        weight = self.weight_g.to(x) * v / v.norm(dim=(1, 2), keepdim=True)
        bias = None if self.bias is None else self.bias.to(x)
        if self.transposed:
            return F.conv_transpose1d(x, weight, bias, self.stride, self.padding, self.output_padding)
        return F.conv1d(x, weight, bias, self.stride, self.padding, self.dilation)


class ResidualUnit(nn.Module):
    """Snake, dilated 7-tap convolution, Snake, 1-tap convolution, plus the input."""

    def __init__(self, channels: int, dilation: int, **kw):
        super().__init__()
        self.snake1 = Snake(channels, **kw)
        self.conv1 = WeightNormConv((channels, channels, 7), True, padding=3 * dilation, dilation=dilation, **kw)
        self.snake2 = Snake(channels, **kw)
        self.conv2 = WeightNormConv((channels, channels, 1), True, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.snake2(self.conv1(self.snake1(x))))


class UpsampleBlock(nn.Module):
    """Snake, transposed convolution by ``stride`` (exactly ``stride`` times longer), three residual units."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, **kw):
        super().__init__()
        self.snake1 = Snake(in_channels, **kw)
        self.conv_t1 = WeightNormConv((in_channels, out_channels, 2 * stride), True, transposed=True, stride=stride,
                                      padding=math.ceil(stride / 2), output_padding=stride % 2, **kw)
        self.res_unit1 = ResidualUnit(out_channels, 1, **kw)
        self.res_unit2 = ResidualUnit(out_channels, 3, **kw)
        self.res_unit3 = ResidualUnit(out_channels, 9, **kw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_t1(self.snake1(x))
        return self.res_unit3(self.res_unit2(self.res_unit1(x)))


class AudioDecoder(nn.Module):
    """The decoder network; parameter names are the checkpoint's keys after ``decoder.``."""

    def __init__(self, config: AudioVAEConfig, device=None, dtype=None):
        super().__init__()
        kw = dict(device=device, dtype=dtype)
        widths = [config.dec_dim * m for m in (1, *config.dec_c_mults)][::-1]  # widest first
        self.conv1 = WeightNormConv((widths[0], config.vocoder_input_dim, 7), True, padding=3, **kw)
        strides = config.dec_strides[::-1]
        self.block = nn.ModuleList(UpsampleBlock(widths[i], widths[i + 1], s, **kw) for i, s in enumerate(strides))
        self.snake1 = Snake(config.dec_dim, **kw)
        self.conv2 = WeightNormConv((config.dec_out_channels, config.dec_dim, 7), False, padding=3, **kw)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        x = self.conv1(latent)
        for block in self.block:
            x = block(x)
        return self.conv2(self.snake1(x))


class Cosmos3AudioVAE(nn.Module):
    """Cosmos3's audio VAE, decoder only: ``decode([B, vocoder_input_dim, T])`` -> waveform ``[B, channels, T*hop]``
    in [-1, 1] at ``config.sampling_rate``."""

    def __init__(self, config: AudioVAEConfig, device=None, dtype=None):
        super().__init__()
        self.config = config
        self.decoder = AudioDecoder(config, device=device, dtype=dtype)

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """Waveform of a sound latent, computed in the decoder's dtype and clamped to [-1, 1]."""
        c = self.config.vocoder_input_dim
        if latent.ndim != 3 or latent.shape[1] != c:
            raise ValueError(f"The Cosmos3 audio VAE decodes sound latents [B, {c}, frames], got {tuple(latent.shape)}.")
        return self.decoder(latent.to(self.decoder.conv1.weight_v.dtype)).clamp(-1.0, 1.0)


def read_audio_vae_config(root: str) -> AudioVAEConfig | None:
    """The config of ``<root>/sound_tokenizer``, or None when the checkpoint ships no audio VAE."""
    path = os.path.join(root, AUDIO_VAE_FOLDER, "config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return AudioVAEConfig.from_dict(json.load(f))


def load_audio_vae(root: str, device=None, dtype=torch.float32) -> Cosmos3AudioVAE:
    """The decoder of ``<root>/sound_tokenizer`` (config.json + safetensors weights; encoder weights are skipped).
    Raises naming the folder or the missing weights."""
    from safetensors import safe_open

    folder = os.path.join(root, AUDIO_VAE_FOLDER)
    config = read_audio_vae_config(root)
    if config is None:
        raise FileNotFoundError(f"No Cosmos3 audio VAE at {folder}: missing config.json. Sound needs a checkpoint "
                                f"that ships {AUDIO_VAE_FOLDER}/ (config.json and its weights).")
    files = sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".safetensors"))
    if not files:
        raise FileNotFoundError(f"No Cosmos3 audio VAE weights (*.safetensors) in {folder}.")
    model = Cosmos3AudioVAE(config, device="meta")
    params = dict(model.state_dict(keep_vars=True))
    state = {}
    for file in files:
        with safe_open(file, framework="pt") as f:
            state.update({k: f.get_tensor(k) for k in f.keys() if k in params})
    missing = sorted(set(params) - set(state))
    if missing:
        raise ValueError(f"Cosmos3 audio VAE weights in {folder} lack {len(missing)} tensor(s), e.g. {missing[:3]}.")
    wrong = [k for k in params if tuple(state[k].shape) != tuple(params[k].shape)]
    if wrong:
        raise ValueError(f"Cosmos3 audio VAE weights in {folder} do not match its config.json, e.g. {wrong[0]}: "
                         f"{tuple(state[wrong[0]].shape)} in the file, {tuple(params[wrong[0]].shape)} expected.")
    model.load_state_dict({k: v.to(dtype) for k, v in state.items()}, assign=True)
    return model.to(device).eval().requires_grad_(False)
