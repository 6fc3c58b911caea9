"""The sound pathway of Cosmos3 checkpoints built with ``sound_gen``: sound latents become generator tokens.

A sound latent ``[B, sound_dim, T_s]`` (``sound_latent_fps`` frames a second) enters the generator sequence after
the video tokens: each frame is one token, ``audio_proj_in`` plus ``audio_modality_embed`` plus the same time
embedding as the video (every sound frame is noisy). Its rotary positions share the video's temporal start (the two
streams are simultaneous, not consecutive) with heights and widths at 0. The stack output of those tokens, after
``norm_moe_gen``, goes through ``audio_proj_out`` to the sound velocity.

The length of a clip's sound follows the audio VAE (:meth:`AudioVAEConfig.sound_frames`), its positions the
transformer's ``sound_latent_fps``, as in diffusers' pipeline; a checkpoint whose two rates differ is refused
(:func:`check_sound_rate`).
"""

from __future__ import annotations

import torch
from torch import nn

from .audio_vae import AUDIO_VAE_FOLDER, AudioVAEConfig
from .config import Cosmos3Config


def add_sound_modules(model: nn.Module, config: Cosmos3Config, ops, device=None, dtype=None) -> None:
    """Give ``model`` the checkpoint's sound parameters (``audio_proj_in``, ``audio_proj_out``,
    ``audio_modality_embed``) under their checkpoint names."""
    h, c = config.hidden_size, config.sound_dim
    model.audio_proj_in = ops.Linear(c, h, bias=True, device=device, dtype=dtype)
    model.audio_proj_out = ops.Linear(h, c, bias=True, device=device, dtype=dtype)
    model.audio_modality_embed = nn.Parameter(torch.zeros(h, device=device, dtype=dtype))


def sound_positions(config: Cosmos3Config, text_length: int, frames: int, device=None) -> torch.Tensor:
    """Rotary positions ``[3, frames]`` of the sound tokens after a prompt of ``text_length`` tokens.

    The temporal axis starts where the video's does; with fps modulation frame ``i`` sits at
    ``i / sound_latent_fps * base_fps`` (no temporal compression), as diffusers' pipeline places it. Heights and
    widths are 0, or the temporal start when spatial positions are not reset."""
    offset = text_length + config.unified_3d_mrope_temporal_modality_margin
    t_ids = torch.arange(frames, dtype=torch.float32, device=device)
    if config.enable_fps_modulation and frames > 1:
        t_ids = t_ids / float(config.sound_latent_fps) * float(config.base_fps)
    spatial = 0.0 if config.unified_3d_mrope_reset_spatial_ids else float(offset)
    return torch.stack([t_ids + offset, torch.full_like(t_ids, spatial), torch.full_like(t_ids, spatial)])


def check_sound_shape(config: Cosmos3Config, shape) -> None:
    """Refuse a sound latent of ``shape`` this model cannot take: no sound pathway, or not ``[B, sound_dim, T]``."""
    if not config.sound_gen:
        raise ValueError("This Cosmos3 checkpoint has no sound pathway (its config has no sound_gen): sample a video "
                         "latent without sound, or load a Cosmos3 checkpoint trained with sound.")
    if len(shape) != 3 or shape[1] != config.sound_dim or shape[2] < 1:
        raise ValueError(f"The sound latent must be [B, {config.sound_dim}, frames] (this checkpoint's sound_dim: "
                         f"its audio VAE's latent channels), got {tuple(shape)}.")


def check_sound_latent(config: Cosmos3Config, sound: torch.Tensor, batch: int) -> None:
    """Refuse a sound latent this model cannot take, naming the expected shape (before any layer runs)."""
    check_sound_shape(config, sound.shape)
    if batch % sound.shape[0]:
        raise ValueError(f"Cannot match a sound batch of {sound.shape[0]} to {batch} video items.")


def check_sound_rate(config: Cosmos3Config, audio: AudioVAEConfig) -> None:
    """Refuse a checkpoint whose transformer places sound frames at another rate than its audio VAE makes them
    (diffusers would size the sound by the one and position it by the other: sound and video drift apart)."""
    if abs(config.sound_latent_fps - audio.latent_fps) > 1e-6 * audio.latent_fps:
        hop = f"hop_size {audio.hop}" if audio.hop_size else f"hop {audio.hop} (product of dec_strides)"
        raise ValueError(
            f"This Cosmos3 checkpoint disagrees with itself on the sound rate: transformer/config.json has "
            f"sound_latent_fps {config.sound_latent_fps:g}, {AUDIO_VAE_FOLDER}/config.json gives "
            f"{audio.latent_fps:g} frames a second (sampling_rate {audio.sampling_rate} / {hop}). Fix the checkpoint: "
            "set sound_latent_fps, or hop_size, to the values it was trained with so the two rates agree."
        )


def embed_sound(model: nn.Module, sound: torch.Tensor, temb: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Generator tokens ``[B, T_s, hidden]`` of a sound latent ``[B, sound_dim, T_s]`` with time embedding
    ``temb [B, hidden]``."""
    tokens = model.audio_proj_in(sound.transpose(1, 2).to(dtype))
    return tokens + model.audio_modality_embed.to(tokens) + temb[:, None, :].to(tokens)


def sound_velocity(model: nn.Module, normed: torch.Tensor) -> torch.Tensor:
    """Sound velocity ``[B, sound_dim, T_s]`` from the normalised stack output of the sound tokens."""
    return model.audio_proj_out(normed).transpose(1, 2)


def split_sound(hidden: torch.Tensor, sound_frames: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The video tokens and the trailing ``sound_frames`` sound tokens (None without sound) of a generator
    sequence."""
    if not sound_frames:
        return hidden, None
    return hidden[:, :-sound_frames], hidden[:, -sound_frames:]
