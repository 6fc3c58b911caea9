"""Cosmos3 prompt tokenization through the checkpoint's own ``transformers`` tokenizer.

Cosmos3 has no separate text encoder: its transformer reads raw token ids. This module turns a prompt into the ids
the reference diffusers pipeline (``Cosmos3OmniPipeline.tokenize_prompt``) produces: metadata sentences are appended
to the prompt, the checkpoint's chat template is applied by the same ``AutoTokenizer`` the pipeline loads, and
``[eos, <|vision_start|>]`` is appended. ``transformers`` is a ComfyUI requirement and already imported by
ComfyUI when this runs, so every family member's tokenizer and template (Qwen2 for Nano/Super, Edge's own) works.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping

from .checkpoint import tokenizer_folder

__all__ = [
    "SYSTEM_PROMPT_VIDEO",
    "SYSTEM_PROMPT_IMAGE",
    "VISION_START_TOKEN",
    "Cosmos3Tokenizer",
    "apply_prompt_templates",
    "default_system_prompt",
]

# Default system prompts of the reference pipeline. The "give" (for "given") is what the model was trained with.
SYSTEM_PROMPT_VIDEO = "You are a helpful assistant who will generate videos from a give prompt."
SYSTEM_PROMPT_IMAGE = "You are a helpful assistant who will generate images from a give prompt."

VISION_START_TOKEN = "<|vision_start|>"

# Metadata sentences appended to the prompt (the "is not" forms to the negative prompt). Duration first.
_DURATION = "The video is {duration:.1f} seconds long and is of {fps:.0f} FPS."
_DURATION_NOT = "The video is not {duration:.1f} seconds long and is not of {fps:.0f} FPS."
_RESOLUTION = {
    (False, False): "This video is of {height}x{width} resolution.",
    (False, True): "This video is not of {height}x{width} resolution.",
    (True, False): "This image is of {height}x{width} resolution.",
    (True, True): "This image is not of {height}x{width} resolution.",
}
_LAYOUT_HINT = (
    "Expected a Cosmos3 checkpoint folder containing text_tokenizer/ (or the tokenizer files at its root) with "
    "tokenizer.json and tokenizer_config.json (optionally chat_template.jinja), or that folder itself."
)


def default_system_prompt(frames: int) -> str:
    """Return the reference pipeline's default system prompt: the image one when ``frames == 1``."""
    return SYSTEM_PROMPT_IMAGE if frames == 1 else SYSTEM_PROMPT_VIDEO


def _append_sentence(text: str, sentence: str) -> str:
    text = text.rstrip(".")
    return f"{text}. {sentence}" if text else sentence


def apply_prompt_templates(
    prompt: str,
    *,
    negative: bool,
    width: int,
    height: int,
    frames: int,
    fps: float,
    resolution_template: bool = True,
    duration_template: bool = True,
) -> str:
    """Append the duration and resolution sentences the model was trained with.

    Matches the reference pipeline: a single frame is an image (no duration sentence, "This image ..."), the
    negative prompt gets the "is not" forms, trailing dots of the text are replaced by one ". " separator, and an
    empty text becomes just the sentence.
    """
    is_image = frames == 1
    text = prompt or ""
    if duration_template and not is_image:
        template = _DURATION_NOT if negative else _DURATION
        text = _append_sentence(text, template.format(duration=frames / fps, fps=fps))
    if resolution_template:
        template = _RESOLUTION[(is_image, bool(negative))]
        text = _append_sentence(text, template.format(height=height, width=width))
    return text


class Cosmos3Tokenizer:
    """Cosmos3 prompt tokenizer: a checkpoint's ``transformers`` tokenizer plus the pipeline's prompt rules."""

    def __init__(self, tokenizer):
        """Wrap a loaded ``transformers`` tokenizer that has a chat template, an eos token and ``<|vision_start|>``."""
        self.tokenizer = tokenizer
        if tokenizer.eos_token is None:
            raise ValueError("Cosmos3 tokenizer: the tokenizer defines no eos token (tokenizer_config.json 'eos_token').")
        self.eos_token = tokenizer.eos_token
        self.eos_token_id = self._require_id(tokenizer.eos_token, "eos token")
        self.vision_start_id = self._require_id(VISION_START_TOKEN, "start-of-generation token")

    def _require_id(self, token: str, what: str) -> int:
        token_id = self.tokenizer.get_vocab().get(token)
        if token_id is None:
            raise ValueError(f"Cosmos3 tokenizer: the {what} {token!r} is not in the vocabulary")
        return token_id

    @classmethod
    def from_folder(cls, path: str | os.PathLike) -> Cosmos3Tokenizer:
        """Load from a checkpoint folder (its ``text_tokenizer/``, or tokenizer files at its root) or from the
        tokenizer folder itself, with ``transformers.AutoTokenizer`` offline, as the reference pipeline does.
        Missing files raise errors that name the path."""
        path = os.fspath(path)
        if not os.path.isdir(path):
            raise FileNotFoundError(f"Cosmos3 tokenizer: folder not found: {path}. {_LAYOUT_HINT}")
        try:
            folder = tokenizer_folder(path)
        except FileNotFoundError as err:
            raise FileNotFoundError(f"{err} {_LAYOUT_HINT}") from None
        config_file = os.path.join(folder, "tokenizer_config.json")
        if not os.path.isfile(config_file):
            raise FileNotFoundError(f"Cosmos3 tokenizer: missing {config_file}. {_LAYOUT_HINT}")
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        except Exception as err:  # transformers raises many types for malformed or unsupported files
            raise ValueError(f"Cosmos3 tokenizer: cannot load the tokenizer in {folder}: {err}") from err
        processor_template = os.path.join(folder, "chat_template.json")
        if not tokenizer.chat_template and os.path.isfile(processor_template):
            # A processor-level file AutoTokenizer does not read (where diffusers' pipeline would have no template).
            with open(processor_template, encoding="utf-8") as f:
                tokenizer.chat_template = json.load(f).get("chat_template")
        if not tokenizer.chat_template:
            raise FileNotFoundError(
                f"Cosmos3 tokenizer: no chat template in {folder} (looked for chat_template.jinja, "
                f"'chat_template' in tokenizer_config.json, chat_template.json). {_LAYOUT_HINT}"
            )
        return cls(tokenizer)

    @property
    def chat_template(self) -> str:
        """The chat template the tokenizer applies (the ``default`` one of a named set, as transformers picks)."""
        template = self.tokenizer.chat_template
        return template.get("default") if isinstance(template, dict) else template

    @property
    def vocab_size(self) -> int:
        """Number of ids the tokenizer can produce, added tokens included."""
        return len(self.tokenizer)

    @staticmethod
    def chat_messages(text: str, system_prompt: str | None) -> list[dict]:
        """The chat of one user turn, after a system turn when ``system_prompt`` is given."""
        system = [] if system_prompt is None else [{"role": "system", "content": system_prompt}]
        return system + [{"role": "user", "content": text}]

    def encode_prompt(self, text: str, system_prompt: str | None) -> list[int]:
        """Token ids of the chat for ``text`` followed by ``[eos, <|vision_start|>]``, exactly as the pipeline
        builds them. ``system_prompt=None`` sends no system message (the template may still write its own)."""
        out = self.tokenizer.apply_chat_template(
            self.chat_messages(text, system_prompt), tokenize=True, add_generation_prompt=True, add_vision_id=False
        )
        ids = out["input_ids"] if isinstance(out, Mapping) else out
        return [int(i) for i in ids] + [self.eos_token_id, self.vision_start_id]

    def encode(
        self,
        prompt: str,
        *,
        negative: bool,
        width: int,
        height: int,
        frames: int,
        fps: float,
        resolution_template: bool = True,
        duration_template: bool = True,
        use_system_prompt: bool = True,
        system_prompt: str | None = None,
    ) -> list[int]:
        """Token ids for a positive or negative prompt, as the reference pipeline builds them.

        Appends the metadata sentences, then encodes with the default system prompt for video or image
        (``frames == 1``) when ``use_system_prompt``; a ``system_prompt`` string replaces that default (used
        verbatim, even when empty).
        """
        text = apply_prompt_templates(
            prompt,
            negative=negative,
            width=width,
            height=height,
            frames=frames,
            fps=fps,
            resolution_template=resolution_template,
            duration_template=duration_template,
        )
        system = None
        if use_system_prompt:
            system = default_system_prompt(frames) if system_prompt is None else system_prompt
        return self.encode_prompt(text, system)
