"""Cosmos3 Loader: an official checkpoint folder (or merged file) -> MODEL, VAE and the prompt tokenizer."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import folder_paths
from comfy_api.latest import io

from ..cosmos3.tokenizer import Cosmos3Tokenizer
from .cosmos3_loading import WEIGHT_DTYPES, load_cosmos3_model, read_checkpoint
from .vae import load_cosmos3_vae

Cosmos3TextIO = io.Custom("COSMOS3_TEXT")


@dataclass(frozen=True)
class Cosmos3Text:
    """The prompt side of a checkpoint: its tokenizer and its recommended negative prompt (may be empty)."""

    tokenizer: Cosmos3Tokenizer
    negative_prompt: str


def checkpoint_choices() -> list[str]:
    """Checkpoint folders (holding ``transformer/``) and ``.safetensors`` files under ``models/diffusion_models``."""
    found = []
    for base in folder_paths.get_folder_paths("diffusion_models"):
        if not os.path.isdir(base):
            continue
        for root, dirs, _ in os.walk(base, followlinks=True):
            if os.path.isdir(os.path.join(root, "transformer")):
                found.append(os.path.relpath(root, base).replace(os.sep, "/"))
                dirs[:] = []
            elif os.path.relpath(root, base).count(os.sep) >= 2:
                dirs[:] = []
    files = [f for f in folder_paths.get_filename_list("diffusion_models") if f.endswith(".safetensors")]
    return sorted(set(found)) + files


def resolve_checkpoint(name: str) -> str:
    """Absolute path of a choice from :func:`checkpoint_choices` (folder or file); raises naming the path."""
    if os.path.isabs(name) and os.path.exists(name):
        return name
    for base in folder_paths.get_folder_paths("diffusion_models"):
        candidate = os.path.join(base, name)
        if os.path.exists(candidate):
            return candidate
    raise FileNotFoundError(
        f"Cosmos3 checkpoint {name!r} not found under {folder_paths.get_folder_paths('diffusion_models')}: put the "
        "official folder (with transformer/, vae/, text_tokenizer/) or a merged .safetensors there."
    )


def negative_prompt_of(root: str) -> str:
    """The checkpoint's recommended negative prompt from ``assets/negative_prompt.json`` ("" when absent)."""
    path = os.path.join(root, "assets", "negative_prompt.json")
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, str):
        return data
    if isinstance(data, dict):
        for key in ("negative_prompt", "video", "text2video", "t2v"):
            if isinstance(data.get(key), str):
                return data[key]
        return next((v for v in data.values() if isinstance(v, str)), "")
    return ""


def load_cosmos3(path: str, weight_dtype: str = "default"):
    """The ModelPatcher, the ComfyUI VAE and the :class:`Cosmos3Text` of the checkpoint at ``path``; the
    checkpoint's folders are checked before any weight is read."""
    read_checkpoint(path)
    root = path if os.path.isdir(path) else os.path.dirname(path)
    for sub in ("vae", "text_tokenizer"):
        if not os.path.isdir(os.path.join(root, sub)):
            raise FileNotFoundError(
                f"Cosmos3 checkpoint at {path!r} has no '{sub}/' folder in {root!r}: the loader needs the official "
                "layout (transformer/, vae/, text_tokenizer/); for a merged .safetensors put vae/ and text_tokenizer/ beside it."
            )
    patcher = load_cosmos3_model(path, weight_dtype)
    vae = load_cosmos3_vae(os.path.join(root, "vae"))
    text = Cosmos3Text(Cosmos3Tokenizer.from_folder(root), negative_prompt_of(root))
    return patcher, vae, text


class Cosmos3Loader(io.ComfyNode):
    """Loads an official Cosmos3 checkpoint natively (no diffusers)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3Loader",
            display_name="Cosmos3 Loader",
            category="SeaCache/Cosmos3",
            description="Load an NVIDIA Cosmos3 checkpoint (official folder layout or merged .safetensors) from models/diffusion_models.",
            inputs=[
                io.Combo.Input("checkpoint", options=checkpoint_choices(), tooltip="Checkpoint folder holding transformer/, vae/ and text_tokenizer/ (or a merged .safetensors with vae/ and text_tokenizer/ beside it)."),
                io.Combo.Input("weight_dtype", options=list(WEIGHT_DTYPES), default="default", tooltip="Weight storage: default (bf16/fp32 by device), or fp8 to halve memory (computes in bf16)."),
            ],
            outputs=[
                io.Model.Output(display_name="MODEL"),
                io.Vae.Output(display_name="VAE"),
                Cosmos3TextIO.Output(display_name="COSMOS3_TEXT", tooltip="Tokenizer and default negative prompt for the Cosmos3 text-encode nodes."),
            ],
        )

    @classmethod
    def execute(cls, checkpoint, weight_dtype):
        model, vae, text = load_cosmos3(resolve_checkpoint(checkpoint), weight_dtype)
        return io.NodeOutput(model, vae, text)
