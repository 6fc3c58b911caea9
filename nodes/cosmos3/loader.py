"""Cosmos3 Loader: an official checkpoint folder (or merged file) -> MODEL, VAE and the prompt tokenizer."""

from __future__ import annotations

import os

import folder_paths
from comfy_api.latest import io

from ...cosmos3.checkpoint import WEIGHT_NAMES, read_distilled_schedule, read_negative_prompt, tokenizer_folder
from ...cosmos3.tokenizer import Cosmos3Tokenizer
from ..comfy_internals import COSMOS3, require
from .io_types import Cosmos3AudioVAEIO, Cosmos3Text, Cosmos3TextIO
from .patcher import WEIGHT_DTYPES, load_cosmos3_model, read_checkpoint
from .sound import audio_vae_handle
from .vae import load_cosmos3_vae

MODEL_FOLDER = "cosmos3"  # models/cosmos3/<name>/, where the community Cosmos3 pack keeps checkpoints
SEARCHED_FOLDERS = ("diffusion_models", MODEL_FOLDER)


def register_model_folder() -> None:
    """Make ``models/cosmos3/`` a ComfyUI model folder with the extensions of ``diffusion_models`` (idempotent;
    paths that extra_model_paths.yaml registered for ``cosmos3`` are kept, after the default one)."""
    default = os.path.join(folder_paths.models_dir, MODEL_FOLDER)
    extensions = set(folder_paths.folder_names_and_paths["diffusion_models"][1])
    paths, known = folder_paths.folder_names_and_paths.get(MODEL_FOLDER, ([], set()))
    folder_paths.folder_names_and_paths[MODEL_FOLDER] = (paths, known | extensions)
    if default not in paths:
        paths.insert(0, default)


def is_checkpoint_folder(folder: str) -> bool:
    """Whether ``folder`` is a checkpoint root: it holds ``transformer/`` or the transformer weights themselves
    (``diffusion_pytorch_model*`` or ``model*`` safetensors, single or sharded with an index)."""
    if os.path.isdir(os.path.join(folder, "transformer")):
        return True
    return any(os.path.isfile(os.path.join(folder, f"{stem}{suffix}"))
               for stem in WEIGHT_NAMES for suffix in (".safetensors", ".safetensors.index.json"))


def search_bases() -> list[str]:
    """Existing folders searched for checkpoints: every ``diffusion_models`` path, then every ``cosmos3`` path."""
    register_model_folder()
    bases = [base for name in SEARCHED_FOLDERS for base in folder_paths.get_folder_paths(name)]
    return list(dict.fromkeys(base for base in bases if os.path.isdir(base)))


def checkpoint_choices() -> list[str]:
    """Checkpoint folders (see :func:`is_checkpoint_folder`, up to three levels deep) and merged ``.safetensors``
    files under ``models/diffusion_models`` and ``models/cosmos3``; files inside a checkpoint folder (its shards)
    are not listed."""
    folders, files = set(), set()
    for base in search_bases():
        found = []
        for root, dirs, _ in os.walk(base, followlinks=True):
            rel = os.path.relpath(root, base)
            if rel != "." and is_checkpoint_folder(root):
                found.append(rel.replace(os.sep, "/"))
                dirs[:] = []
            elif rel.count(os.sep) >= 2:
                dirs[:] = []
        folders.update(found)
        for name in folder_paths.recursive_search(base, excluded_dir_names=[".git"])[0]:
            name = name.replace(os.sep, "/")
            inside = any(name.startswith(folder + "/") for folder in found)
            if name.endswith(".safetensors") and not inside:
                files.add(name)
    return sorted(folders) + sorted(files - folders)


def resolve_checkpoint(name: str) -> str:
    """Absolute path of a choice from :func:`checkpoint_choices` (folder or file), looked up in
    ``diffusion_models`` first, then ``cosmos3``; raises naming the folders searched."""
    if os.path.isabs(name) and os.path.exists(name):
        return name
    bases = search_bases()
    for base in bases:
        candidate = os.path.join(base, name)
        if os.path.exists(candidate):
            return candidate
    raise FileNotFoundError(
        f"Cosmos3 checkpoint {name!r} not found under {bases}: put the official folder (with transformer/, vae/, "
        "text_tokenizer/) or a merged .safetensors in models/diffusion_models or models/cosmos3."
    )


def load_cosmos3(path: str, weight_dtype: str = "default"):
    """The ModelPatcher, the ComfyUI VAE, the :class:`Cosmos3Text` and the audio VAE handle (decoder loaded on first
    use) of the checkpoint at ``path``; the weights, ``vae/`` and the tokenizer are checked before any weight is
    read. A 4-step checkpoint's sigma schedule rides on the model (see Cosmos3 Distilled Scheduler)."""
    read_checkpoint(path)
    root = path if os.path.isdir(path) else os.path.dirname(path)
    vae_folder = os.path.join(root, "vae")
    if not os.path.isdir(vae_folder):
        raise FileNotFoundError(
            f"Cosmos3 checkpoint at {path!r}: missing {vae_folder}/ (the Wan2.2 VAE of the official layout); for a "
            "merged .safetensors put vae/ and text_tokenizer/ beside it."
        )
    tokenizer_folder(root)  # raises naming both places it looked
    audio_vae = audio_vae_handle(root)
    patcher = load_cosmos3_model(path, weight_dtype, audio_vae.config)
    patcher.model.distilled_schedule = read_distilled_schedule(root)
    vae = load_cosmos3_vae(vae_folder)
    text = Cosmos3Text(Cosmos3Tokenizer.from_folder(root), read_negative_prompt(root))
    return patcher, vae, text, audio_vae


class Cosmos3Loader(io.ComfyNode):
    """Loads an official Cosmos3 checkpoint natively (no diffusers)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3Loader",
            display_name="Cosmos3 Loader",
            category="SeaCache/Cosmos3",
            description="Load an NVIDIA Cosmos3 checkpoint (official folder layout or merged .safetensors) from "
            "models/diffusion_models or models/cosmos3.",
            inputs=[
                io.Combo.Input("checkpoint", options=checkpoint_choices(), tooltip="Checkpoint folder under models/diffusion_models or models/cosmos3 holding transformer/ (or the model*/diffusion_pytorch_model* weights), vae/ and the tokenizer (text_tokenizer/ or at the root); or a merged .safetensors with vae/ and text_tokenizer/ beside it."),
                io.Combo.Input("weight_dtype", options=list(WEIGHT_DTYPES), default="default", tooltip="Weight storage: default (bf16/fp32 by device), or fp8 to halve memory (computes in bf16). fp8_e4m3fn_fast also multiplies in fp8 on GPUs that support it (RTX 40xx/50xx, H100/H200; like ComfyUI's own loader and --fast): faster, slightly less precise."),
            ],
            outputs=[
                io.Model.Output(display_name="MODEL"),
                io.Vae.Output(display_name="VAE"),
                Cosmos3TextIO.Output(display_name="COSMOS3_TEXT", tooltip="Tokenizer and default negative prompt for the Cosmos3 prompt nodes."),
                Cosmos3AudioVAEIO.Output(display_name="AUDIO_VAE", tooltip="The checkpoint's audio VAE (sound_tokenizer/), for the Cosmos3 sound nodes; checkpoints without sound have none and the sound nodes say so."),
            ],
        )

    @classmethod
    def execute(cls, checkpoint, weight_dtype):
        require(COSMOS3, "Cosmos3 Loader")
        return io.NodeOutput(*load_cosmos3(resolve_checkpoint(checkpoint), weight_dtype))
