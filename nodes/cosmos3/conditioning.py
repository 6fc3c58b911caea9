"""Cosmos3 latents (the one place a workflow sets width, height and length), image-to-video conditioning and the
reference sigma schedule."""

from __future__ import annotations

import logging

import torch

import comfy.model_management
import comfy.utils
import node_helpers
from comfy_api.latest import io

from ...cosmos3.config import LATENT_CHANNELS, VAE_SPATIAL, VAE_TEMPORAL
from ...cosmos3.schedule import reference_sigmas


def check_size(width: int, height: int, frames: int) -> None:
    """Raise naming the nearest valid values unless width/height are multiples of the VAE's 16 pixels (as the
    reference pipeline requires; 720 gives an odd latent of 45, which the model pads) and frames is 4k+1."""
    problems = []
    for name, value in (("width", width), ("height", height)):
        if value % VAE_SPATIAL:
            lo = max(VAE_SPATIAL, value // VAE_SPATIAL * VAE_SPATIAL)
            problems.append(f"{name} {value} is not a multiple of {VAE_SPATIAL} (nearest: {lo} or {lo + VAE_SPATIAL})")
    if frames < 1 or (frames - 1) % VAE_TEMPORAL:
        lo = max(1, (frames - 1) // VAE_TEMPORAL * VAE_TEMPORAL + 1)
        problems.append(f"length {frames} is not {VAE_TEMPORAL}k+1 (nearest: {lo} or {lo + VAE_TEMPORAL})")
    if problems:
        raise ValueError("Cosmos3 size: " + "; ".join(problems) + ".")


def latent_shape(batch: int, width: int, height: int, frames: int) -> list[int]:
    """ComfyUI latent shape of a Cosmos3 clip (Wan2.2 VAE: 4x temporal, 16x spatial, 48 channels)."""
    return [batch, LATENT_CHANNELS, (frames - 1) // VAE_TEMPORAL + 1, height // VAE_SPATIAL, width // VAE_SPATIAL]


def video_frames(latent_frames: int, temporal: int = VAE_TEMPORAL) -> int:
    """Video frames a latent of ``latent_frames`` decodes to (the inverse of :func:`latent_shape`'s frame count)."""
    return (latent_frames - 1) * temporal + 1


class Cosmos3EmptyLatentVideo(io.ComfyNode):
    """Zero latent of a Cosmos3 clip."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3EmptyLatentVideo",
            display_name="Cosmos3 Empty Latent Video",
            category="SeaCache/Cosmos3",
            inputs=[
                io.Int.Input("width", default=1280, min=VAE_SPATIAL, max=8192, step=VAE_SPATIAL, tooltip="Width in pixels (multiple of 16)."),
                io.Int.Input("height", default=720, min=VAE_SPATIAL, max=8192, step=VAE_SPATIAL, tooltip="Height in pixels (multiple of 16)."),
                io.Int.Input("length", default=189, min=1, max=1025, step=VAE_TEMPORAL, tooltip="Frames, 4k+1 (1 = a single image)."),
                io.Int.Input("batch_size", default=1, min=1, max=64, tooltip="Clips generated at once."),
            ],
            outputs=[io.Latent.Output()],
        )

    @classmethod
    def execute(cls, width, height, length, batch_size):
        check_size(width, height, length)
        latent = torch.zeros(latent_shape(batch_size, width, height, length), device=comfy.model_management.intermediate_device())
        return io.NodeOutput({"samples": latent})


def single_rgb_image(image: torch.Tensor) -> torch.Tensor:
    """The start image as [1, H, W, 3]: a batch takes its first image (with a warning), alpha is dropped."""
    if image.ndim != 4:
        raise ValueError(f"start_image must be an IMAGE [batch, height, width, channels], got shape {tuple(image.shape)}.")
    if image.shape[0] > 1:
        logging.getLogger(__name__).warning("Cosmos3 Image To Video: got %d images, using the first as the start frame.", image.shape[0])
    if image.shape[-1] not in (3, 4):
        raise ValueError(f"start_image must have 3 (RGB) or 4 (RGBA) channels, got {image.shape[-1]}.")
    return image[:1, :, :, :3]


class Cosmos3ImageToVideo(io.ComfyNode):
    """Encode the start image as clean latent frame 0 and mark it conditioned (no noise, zero velocity)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3ImageToVideo",
            display_name="Cosmos3 Image To Video",
            category="SeaCache/Cosmos3",
            description="Image-to-video conditioning: the start image becomes latent frame 0 and stays clean through sampling. RGBA images lose alpha; of a batch only the first image is used.",
            inputs=[
                io.Conditioning.Input("positive", tooltip="Positive conditioning from Cosmos3 Prompt."),
                io.Conditioning.Input("negative", tooltip="Negative conditioning from Cosmos3 Prompt (Negative)."),
                io.Vae.Input("vae", tooltip="The VAE from the Cosmos3 Loader."),
                io.Image.Input("start_image", tooltip="First frame; resized (center crop) to width x height."),
                io.Int.Input("width", default=1280, min=VAE_SPATIAL, max=8192, step=VAE_SPATIAL, tooltip="Width in pixels (multiple of 16)."),
                io.Int.Input("height", default=720, min=VAE_SPATIAL, max=8192, step=VAE_SPATIAL, tooltip="Height in pixels (multiple of 16)."),
                io.Int.Input("length", default=189, min=1, max=1025, step=VAE_TEMPORAL, tooltip="Frames, 4k+1."),
                io.Int.Input("batch_size", default=1, min=1, max=64, tooltip="Clips generated at once from the same image."),
            ],
            outputs=[io.Conditioning.Output(display_name="positive"), io.Conditioning.Output(display_name="negative"), io.Latent.Output(display_name="latent")],
        )

    @classmethod
    def execute(cls, positive, negative, vae, start_image, width, height, length, batch_size):
        check_size(width, height, length)
        image = single_rgb_image(start_image)
        pixels = comfy.utils.common_upscale(image.movedim(-1, 1), width, height, "bilinear", "center").movedim(1, -1)
        encoded = vae.encode(pixels)[:, :, :1]
        shape = latent_shape(batch_size, width, height, length)
        latent = torch.zeros(shape, device=comfy.model_management.intermediate_device())
        latent[:, :, :1] = encoded.to(latent)
        frame_mask = torch.zeros((1, shape[2]))
        frame_mask[:, 0] = 1.0
        values = {"cosmos3_cond_latent": latent[:1].clone(), "cosmos3_cond_mask": frame_mask}
        positive = node_helpers.conditioning_set_values(positive, values)
        negative = node_helpers.conditioning_set_values(negative, values)
        noise_mask = (1.0 - frame_mask).reshape(1, 1, shape[2], 1, 1).repeat(batch_size, 1, 1, 1, 1)
        return io.NodeOutput(positive, negative, {"samples": latent, "noise_mask": noise_mask})


class Cosmos3Scheduler(io.ComfyNode):
    """SIGMAS of the reference pipeline for ComfyUI's SamplerCustomAdvanced."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3Scheduler",
            display_name="Cosmos3 Scheduler",
            category="SeaCache/Cosmos3",
            description="Shifted flow-matching schedule of the Cosmos3 pipeline (shift 10 at 720p, 5 at 480p, 3 at 256p).",
            inputs=[
                io.Int.Input("steps", default=35, min=1, max=1000, tooltip="Denoising steps (the reference uses 35)."),
                io.Float.Input("shift", default=10.0, min=0.1, max=100.0, step=0.1, tooltip="Flow shift: 10 for 720p, 5 for 480p, 3 for 256p."),
                io.Float.Input("denoise", default=1.0, min=0.0, max=1.0, step=0.01, tooltip="Below 1: only the last part of a longer schedule (video-to-video)."),
            ],
            outputs=[io.Sigmas.Output()],
        )

    @classmethod
    def execute(cls, steps, shift, denoise):
        if denoise <= 0:
            return io.NodeOutput(torch.FloatTensor([]))
        return io.NodeOutput(reference_sigmas(steps, shift, denoise))


class Cosmos3DistilledScheduler(io.ComfyNode):
    """SIGMAS of a 4-step distilled checkpoint, as it ships them."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3DistilledScheduler",
            display_name="Cosmos3 Distilled Scheduler",
            category="SeaCache/Cosmos3",
            description="The fixed sigma schedule of a 4-step Cosmos3 checkpoint (Super-Text2Image-4Step, "
            "Super-Image2Video-4Step): its distilled_sigmas shifted by its scheduler, then 0. Sample with CFG 1.",
            inputs=[io.Model.Input("model", tooltip="A 4-step Cosmos3 checkpoint's MODEL from Cosmos3 Loader (or SeaCache Apply).")],
            outputs=[io.Sigmas.Output()],
        )

    @classmethod
    def execute(cls, model):
        schedule = getattr(getattr(model, "model", None), "distilled_schedule", None)
        if schedule is None:
            raise ValueError(
                "Cosmos3 Distilled Scheduler: this model has no distilled schedule (its checkpoint has no "
                "distilled_sigmas in modular_model_index.json), so it is not a 4-step checkpoint; use Cosmos3 Scheduler."
            )
        if schedule.stochastic:
            logging.info("Cosmos3: this checkpoint's scheduler re-noises every step; the 'lcm' sampler does the same.")
        return io.NodeOutput(torch.tensor(schedule.sigmas, dtype=torch.float32))
