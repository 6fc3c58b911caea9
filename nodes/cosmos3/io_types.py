"""The Cosmos3 nodes' own ComfyUI IO types and the values they carry, in one module so no node module imports
another only for a type."""

from __future__ import annotations

from dataclasses import dataclass

from comfy_api.latest import io

from ...cosmos3.tokenizer import Cosmos3Tokenizer

Cosmos3TextIO = io.Custom("COSMOS3_TEXT")
"""The Loader's prompt side (a :class:`Cosmos3Text`), input of the prompt nodes."""

Cosmos3AudioVAEIO = io.Custom("COSMOS3_AUDIO_VAE")
"""The Loader's audio VAE handle (``sound.Cosmos3AudioVAEHandle``), input of the sound nodes."""


@dataclass(frozen=True)
class Cosmos3Text:
    """The prompt side of a checkpoint: its tokenizer and its recommended negative prompt (may be empty)."""

    tokenizer: Cosmos3Tokenizer
    negative_prompt: str
