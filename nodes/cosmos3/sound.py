"""Cosmos3 video with sound in ComfyUI: audio-video latents in ComfyUI's own convention (a ``NestedTensor`` of the
video latent and the sound latent, as LTX-2 uses) and the sound track decoded to ComfyUI's AUDIO.

The sound latent is ``[B, sound_dim, T_s]``; its length follows from the clip's duration as in diffusers'
pipeline (:meth:`AudioVAEConfig.sound_frames`: 25 frames a second for the shipped audio VAE).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

import torch

import comfy.model_management
import comfy.model_patcher
from comfy_api.latest import io

from ...cosmos3.audio_vae import AUDIO_VAE_FOLDER, AudioVAEConfig, Cosmos3AudioVAE, load_audio_vae, read_audio_vae_config
from .conditioning import check_size, latent_shape, video_frames
from .io_types import Cosmos3AudioVAEIO

AV_LATENTS_VERSION = "0.33.0"
"""The ComfyUI version this pack's sound was tested on; any ComfyUI with ``comfy/nested_tensor.py`` (LTX-2's
audio-video latents, January 2026 on) has what it needs."""


def require_av_latents():
    """ComfyUI's ``NestedTensor`` class; raises naming the ComfyUI needed when this one has no audio-video latents."""
    if importlib.util.find_spec("comfy.nested_tensor") is None:
        raise RuntimeError(
            "Cosmos3 sound needs ComfyUI's audio-video latents (comfy/nested_tensor.py, added with LTX-2 support in "
            f"January 2026), which this ComfyUI lacks: update ComfyUI (tested with {AV_LATENTS_VERSION})."
        )
    from comfy.nested_tensor import NestedTensor

    return NestedTensor


@dataclass
class Cosmos3AudioVAEHandle:
    """The checkpoint's audio VAE: its config is read when the checkpoint loads, its decoder on first decode."""

    folder: str  # the checkpoint root holding sound_tokenizer/
    config: AudioVAEConfig | None  # None: the checkpoint has no audio VAE
    patcher: comfy.model_patcher.ModelPatcher | None = field(default=None, repr=False)

    def require(self) -> AudioVAEConfig:
        """The decoder config; raises naming the folder when the checkpoint ships no audio VAE."""
        if self.config is None:
            raise ValueError(
                f"The Cosmos3 checkpoint at {self.folder} has no {AUDIO_VAE_FOLDER}/ (audio VAE): sound needs a "
                "Cosmos3 checkpoint trained with sound that ships it."
            )
        return self.config

    def decode(self, latent: torch.Tensor) -> torch.Tensor:
        """Waveform ``[B, channels, samples]`` (float32, on ComfyUI's intermediate device) of a sound latent; the
        decoder is loaded once and managed by ComfyUI like its own VAEs."""
        self.require()
        if self.patcher is None:
            model = load_audio_vae(self.folder)
            self.patcher = comfy.model_patcher.ModelPatcher(
                model, load_device=comfy.model_management.get_torch_device(),
                offload_device=comfy.model_management.vae_offload_device())
        comfy.model_management.load_models_gpu([self.patcher])
        model: Cosmos3AudioVAE = self.patcher.model
        with torch.inference_mode():
            wave = model.decode(latent.to(self.patcher.load_device, torch.float32))
        return wave.float().to(comfy.model_management.intermediate_device())


def audio_vae_handle(root: str) -> Cosmos3AudioVAEHandle:
    """The handle of ``<root>/sound_tokenizer`` (config read now; a checkpoint without one gives an empty handle
    that raises when sound is asked of it)."""
    return Cosmos3AudioVAEHandle(root, read_audio_vae_config(root))


def with_sound(video: dict, fps: float, audio_vae: Cosmos3AudioVAEHandle) -> dict:
    """An AV LATENT from a Cosmos3 video LATENT: a zero sound latent of the clip's duration joins the video; a video
    noise mask (image-to-video) stays as it is and covers the video only, the sound is all noise."""
    nested = require_av_latents()
    config = audio_vae.require()
    samples = video["samples"]
    if getattr(samples, "is_nested", False) or samples.ndim != 5:
        raise ValueError("Cosmos3 sound: the latent must be a Cosmos3 video latent [B, 48, T, H, W] (from Cosmos3 "
                         f"Empty Latent Video or Image To Video), got {tuple(samples.shape)}.")
    frames = video_frames(samples.shape[2])
    sound = torch.zeros((samples.shape[0], config.vocoder_input_dim, config.sound_frames(frames, fps)),
                        device=samples.device)
    return {**video, "samples": nested([samples, sound])}  # ComfyUI's sampler gives the sound a mask of ones


def _audio_vae_input():
    return Cosmos3AudioVAEIO.Input("audio_vae", tooltip="AUDIO_VAE of the Cosmos3 Loader (a checkpoint with sound).")


class Cosmos3EmptyAVLatent(io.ComfyNode):
    """Zero video latent and zero sound latent of a Cosmos3 clip, joined as ComfyUI's audio-video latent."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3EmptyAVLatent",
            display_name="Cosmos3 Empty AV Latent",
            category="SeaCache/Cosmos3",
            description="Video with sound (Cosmos3 checkpoints trained with sound): the video latent and the sound "
            "latent of the clip's duration, sampled together.",
            inputs=[
                io.Int.Input("width", default=832, min=16, max=8192, step=16, tooltip="Width in pixels (multiple of 16)."),
                io.Int.Input("height", default=480, min=16, max=8192, step=16, tooltip="Height in pixels (multiple of 16)."),
                io.Int.Input("length", default=93, min=1, max=1025, step=4, tooltip="Frames, 4k+1."),
                io.Float.Input("fps", default=24.0, min=1.0, max=120.0, step=1.0, tooltip="Frames per second of the clip: sets the sound length. Use the fps of Cosmos3 Prompt."),
                io.Int.Input("batch_size", default=1, min=1, max=64, tooltip="Clips generated at once."),
                _audio_vae_input(),
            ],
            outputs=[io.Latent.Output()],
        )

    @classmethod
    def execute(cls, width, height, length, fps, batch_size, audio_vae):
        require_av_latents()
        check_size(width, height, length)
        video = torch.zeros(latent_shape(batch_size, width, height, length),
                            device=comfy.model_management.intermediate_device())
        return io.NodeOutput(with_sound({"samples": video}, fps, audio_vae))


class Cosmos3AddSound(io.ComfyNode):
    """A Cosmos3 video latent (e.g. from Image To Video, frame 0 kept clean) plus a zero sound latent."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3AddSound",
            display_name="Cosmos3 Add Sound",
            category="SeaCache/Cosmos3",
            description="Adds the sound latent of the clip's duration to a Cosmos3 video latent (image-to-video "
            "keeps its clean start frame); the sizes stay those of the video latent.",
            inputs=[
                io.Latent.Input("latent", tooltip="Video latent from Cosmos3 Empty Latent Video or Cosmos3 Image To Video."),
                io.Float.Input("fps", default=24.0, min=1.0, max=120.0, step=1.0, tooltip="Frames per second of the clip: sets the sound length. Use the fps of Cosmos3 Prompt."),
                _audio_vae_input(),
            ],
            outputs=[io.Latent.Output()],
        )

    @classmethod
    def execute(cls, latent, fps, audio_vae):
        return io.NodeOutput(with_sound(latent, fps, audio_vae))


class Cosmos3SoundDecode(io.ComfyNode):
    """The sound track of a sampled audio-video latent as ComfyUI AUDIO."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3SoundDecode",
            display_name="Cosmos3 Sound Decode",
            category="SeaCache/Cosmos3",
            description="Decodes the sound of a Cosmos3 audio-video latent with the checkpoint's audio VAE (VAE "
            "Decode takes the video from the same latent).",
            inputs=[
                io.Latent.Input("samples", tooltip="The sampled audio-video latent."),
                _audio_vae_input(),
            ],
            outputs=[io.Audio.Output(display_name="AUDIO")],
        )

    @classmethod
    def execute(cls, samples, audio_vae):
        require_av_latents()
        latent = samples["samples"]
        if not getattr(latent, "is_nested", False):
            raise ValueError("Cosmos3 Sound Decode needs an audio-video latent (from Cosmos3 Empty AV Latent or "
                             f"Cosmos3 Add Sound, after sampling); got a plain latent {tuple(latent.shape)}.")
        config = audio_vae.require()
        return io.NodeOutput({"waveform": audio_vae.decode(latent.unbind()[1]), "sample_rate": config.sampling_rate})
