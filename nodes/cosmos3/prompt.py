"""Cosmos3 prompt nodes. The reference templates state the video's resolution and duration in the prompt, so the
prompt is tokenized when sampling starts, from the size of the latent actually sampled: width, height and length
are set once per workflow, on the latent node."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from comfy_api.latest import io

from ...cosmos3.tokenizer import Cosmos3Tokenizer
from ...cosmos3.config import VAE_SPATIAL
from .conditioning import video_frames
from .io_types import Cosmos3TextIO


def pixel_size(latent_shape) -> tuple[int, int, int]:
    """(width, height, frames) of the video a Cosmos3 latent ``[B, C, T, H, W]`` decodes to."""
    *_, t, h, w = latent_shape
    return w * VAE_SPATIAL, h * VAE_SPATIAL, video_frames(t)


@dataclass(frozen=True)
class Cosmos3Prompt:
    """A prompt and its template options, waiting for the sampled latent's size (see :meth:`token_ids`)."""

    tokenizer: Cosmos3Tokenizer
    text: str
    negative: bool
    fps: float
    resolution_template: bool = True
    duration_template: bool = True
    use_system_prompt: bool = True
    system_prompt: str | None = None

    def token_ids(self, latent_shape) -> torch.Tensor:
        """Token ids ``[1, L]`` as the reference pipeline builds them for a video of the latent's size."""
        width, height, frames = pixel_size(latent_shape)
        ids = self.tokenizer.encode(
            self.text, negative=self.negative, width=width, height=height, frames=frames, fps=self.fps,
            resolution_template=self.resolution_template, duration_template=self.duration_template,
            use_system_prompt=self.use_system_prompt, system_prompt=self.system_prompt,
        )
        return torch.tensor([ids], dtype=torch.long)


def prompt_conditioning(text, prompt, negative, fps, resolution_template, duration_template, use_system_prompt, system_prompt):
    """CONDITIONING carrying a :class:`Cosmos3Prompt` (tokenized by the model when sampling starts) and the fps."""
    if negative:
        prompt = prompt.strip() or text.negative_prompt
    spec = Cosmos3Prompt(text.tokenizer, prompt, negative, float(fps), resolution_template, duration_template,
                         use_system_prompt, system_prompt.strip() or None)
    return [[torch.zeros((1, 1, 1)), {"cosmos3_prompt": spec, "cosmos3_fps": float(fps)}]]


def _text_inputs(prompt_tip: str):
    return [
        Cosmos3TextIO.Input("cosmos3_text", tooltip="Tokenizer output of the Cosmos3 Loader."),
        io.String.Input("prompt", multiline=True, default="", tooltip=prompt_tip),
        io.Float.Input("fps", default=24.0, min=1.0, max=120.0, step=1.0, tooltip="Frame rate: written into the prompt and used for the model's temporal positions."),
        io.Boolean.Input("resolution_template", default=True, tooltip="Append 'This video is of HxW resolution.' (the sampled latent's size) as the reference pipeline does."),
        io.Boolean.Input("duration_template", default=True, tooltip="Append 'The video is N seconds long and is of F FPS.' (video only)."),
        io.Boolean.Input("use_system_prompt", default=True, tooltip="Start the chat with Cosmos3's system prompt (the reference default)."),
        io.String.Input("system_prompt", multiline=True, default="", tooltip="Custom system prompt; empty = the reference video/image system prompt."),
    ]


POSITIVE_TIP = "What to generate."
NEGATIVE_TIP = "What to avoid; empty = the checkpoint's assets/negative_prompt.json (or nothing)."


class Cosmos3PromptEncode(io.ComfyNode):
    """Positive prompt -> CONDITIONING for Cosmos3; size and duration come from the sampled latent."""

    NEGATIVE = False

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3PromptEncode",
            display_name="Cosmos3 Prompt",
            category="SeaCache/Cosmos3",
            description="A prompt for Cosmos3, tokenized as the reference pipeline does when sampling starts (its resolution and duration sentences follow the sampled latent).",
            inputs=_text_inputs(POSITIVE_TIP),
            outputs=[io.Conditioning.Output()],
        )

    @classmethod
    def execute(cls, cosmos3_text, prompt, fps, resolution_template, duration_template, use_system_prompt, system_prompt):
        return io.NodeOutput(prompt_conditioning(cosmos3_text, prompt, cls.NEGATIVE, fps, resolution_template, duration_template, use_system_prompt, system_prompt))


class Cosmos3PromptEncodeNegative(Cosmos3PromptEncode):
    """Negative prompt (default: the checkpoint's assets/negative_prompt.json) with the 'is not' templates."""

    NEGATIVE = True

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3PromptEncodeNegative",
            display_name="Cosmos3 Prompt (Negative)",
            category="SeaCache/Cosmos3",
            description="Negative prompt with the inverse templates; empty prompt = the checkpoint's recommended negative prompt.",
            inputs=_text_inputs(NEGATIVE_TIP),
            outputs=[io.Conditioning.Output()],
        )

