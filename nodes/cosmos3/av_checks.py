"""Run-start checks of an audio-video latent against the model about to sample it, so a latent this checkpoint
cannot sample is refused with a clear message before the first step instead of failing (or sounding wrong) inside
the sampler."""

from __future__ import annotations

from ...cosmos3 import Cosmos3Config
from ...cosmos3.audio_vae import AUDIO_VAE_FOLDER, AudioVAEConfig
from ...cosmos3.sound import check_sound_rate, check_sound_shape
from .conditioning import video_frames


def check_av_shapes(config: Cosmos3Config, audio: AudioVAEConfig | None, latent_shapes, fps) -> None:
    """Refuse, at run start, an audio-video latent this model cannot sample: no sound pathway, a sound latent of
    other channels, a checkpoint without an audio VAE or whose transformer and audio VAE disagree on the sound
    rate, or a sound length other than the audio VAE's for the clip's duration at the prompt's fps."""
    if len(latent_shapes) != 2 or len(latent_shapes[0]) != 5 or len(latent_shapes[1]) != 3:
        raise ValueError(f"Cosmos3 samples a video latent plus one sound latent [B, C, T]; got streams {latent_shapes}.")
    sound = tuple(latent_shapes[1])
    check_sound_shape(config, sound)
    if audio is None:
        raise ValueError(f"This Cosmos3 checkpoint ships no {AUDIO_VAE_FOLDER}/ (audio VAE), which sizes and decodes "
                         "its sound: load a Cosmos3 checkpoint trained with sound that ships it.")
    check_sound_rate(config, audio)
    if fps:
        frames = video_frames(latent_shapes[0][2], config.temporal_compression)
        expected = audio.sound_frames(frames, float(fps))
        if sound[2] != expected:
            raise ValueError(
                f"The sound latent has {sound[2]} frames, but {frames} video frames at {float(fps):g} fps take "
                f"{expected}: give Cosmos3 Empty AV Latent (or Add Sound) the fps of Cosmos3 Prompt."
            )
