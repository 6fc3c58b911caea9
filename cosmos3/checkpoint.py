"""Reading official Cosmos3 ``transformer/`` checkpoints (sharded or merged safetensors) into the model."""

from __future__ import annotations

import json
import logging
import os

import torch

from .config import Cosmos3Config

log = logging.getLogger(__name__)

INDEX_NAME = "diffusion_pytorch_model.safetensors.index.json"
SINGLE_NAME = "diffusion_pytorch_model.safetensors"
SIGNATURE_KEYS = (
    "proj_in.weight",
    "proj_out.weight",
    "norm_moe_gen.weight",
    "time_embedder.linear_1.weight",
    "layers.0.self_attn.add_q_proj.weight",
    "layers.0.mlp_moe_gen.up_proj.weight",
)
_UNUSED_PREFIXES = ("lm_head.", "action_", "audio_", "norm.")


def is_unused_key(key: str) -> bool:
    """Keys video generation never reads: the LM head, action and sound modules, the text pathway's final norm."""
    return key.startswith(_UNUSED_PREFIXES)


def require_cosmos3_keys(keys, source: str) -> None:
    """Raise if ``keys`` lack the Cosmos3 generator signature, naming the expected keys and the source."""
    missing = [k for k in SIGNATURE_KEYS if k not in keys]
    if missing:
        raise ValueError(
            f"{source} is not a Cosmos3 transformer checkpoint: missing {missing}. A Cosmos3 checkpoint has flat "
            f"diffusers keys such as {list(SIGNATURE_KEYS)} (the 'transformer/' folder of nvidia/Cosmos3-Nano)."
        )


def shard_files(path: str) -> list[str]:
    """Safetensors files of a checkpoint: a ``transformer/`` folder (sharded via its index, or single), a
    checkpoint root holding ``transformer/``, or one merged ``.safetensors`` file. Raises naming what is missing."""
    if os.path.isfile(path):
        return [path]
    folder = os.path.join(path, "transformer") if os.path.isdir(os.path.join(path, "transformer")) else path
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"Cosmos3 checkpoint not found: {path!r} is neither a folder nor a .safetensors file.")
    index = os.path.join(folder, INDEX_NAME)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as f:
            names = sorted(set(json.load(f)["weight_map"].values()))
        files = [os.path.join(folder, n) for n in names]
        absent = [f for f in files if not os.path.isfile(f)]
        if absent:
            raise FileNotFoundError(f"Cosmos3 checkpoint is incomplete: shard(s) {absent} listed in {index} are missing.")
        return files
    single = os.path.join(folder, SINGLE_NAME)
    if os.path.isfile(single):
        return [single]
    raise FileNotFoundError(
        f"No Cosmos3 weights in {folder!r}: expected {INDEX_NAME} with its shards, or {SINGLE_NAME}."
    )


def read_config(path: str, keys_and_shapes: dict[str, tuple] | None = None) -> Cosmos3Config:
    """The model config from ``config.json`` beside the weights, else inferred from weight shapes."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    for candidate in (os.path.join(folder, "transformer", "config.json"), os.path.join(folder, "config.json")):
        if os.path.isdir(path) and os.path.isfile(candidate):
            with open(candidate, encoding="utf-8") as f:
                return Cosmos3Config.from_dict(json.load(f))
    if keys_and_shapes is None:
        raise FileNotFoundError(f"No config.json for the Cosmos3 checkpoint at {path!r} and no weights to infer it from.")
    return infer_config(keys_and_shapes)


def infer_config(shapes: dict[str, tuple]) -> Cosmos3Config:
    """Derive the architecture of a merged single-file checkpoint from its weight shapes. The mRoPE split is
    not visible in weights: it keeps Nano's proportions (24/20/20 of 64 frequency pairs)."""
    require_cosmos3_keys(shapes, "this file")
    head_dim = shapes["layers.0.self_attn.norm_added_q.weight"][0]
    spatial = round(head_dim / 2 * 20 / 64)
    hidden = shapes["proj_in.weight"][0]
    layers = 1 + max(int(k.split(".")[1]) for k in shapes if k.startswith("layers."))
    patch_dim = shapes["proj_in.weight"][1]
    return Cosmos3Config(
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=shapes["layers.0.self_attn.add_q_proj.weight"][0] // head_dim,
        num_key_value_heads=shapes["layers.0.self_attn.add_k_proj.weight"][0] // head_dim,
        head_dim=head_dim,
        intermediate_size=shapes["layers.0.mlp_moe_gen.up_proj.weight"][0],
        vocab_size=shapes["embed_tokens.weight"][0],
        attention_bias="layers.0.self_attn.add_q_proj.bias" in shapes,
        latent_channel=patch_dim // 4,
        patch_latent_dim=patch_dim,
        qk_norm_for_text="layers.0.self_attn.norm_q.weight" in shapes,
        rope_axes_dim=(head_dim // 2 - 2 * spatial, spatial, spatial),
    )


def tensor_shapes(files: list[str]) -> dict[str, tuple]:
    """Key -> shape over all files, read from the safetensors headers only."""
    from safetensors import safe_open

    shapes = {}
    for file in files:
        with safe_open(file, framework="pt") as f:
            for key in f.keys():
                shapes[key] = tuple(f.get_slice(key).get_shape())
    return shapes


def expected_tensors(config: Cosmos3Config, dtype: torch.dtype | None = None) -> dict[str, tuple[tuple, torch.dtype]]:
    """Key -> (shape, storage dtype) of every weight the model holds for ``config`` stored as ``dtype``, from a
    meta-device build (no memory, no init). Norm scales, embeddings and patch projections keep their own dtype."""
    from .model import Cosmos3Transformer

    model = Cosmos3Transformer(config, device="meta", dtype=dtype)
    return {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}


def check_checkpoint(shapes: dict[str, tuple], expected: dict[str, tuple], source: str) -> list[str]:
    """Compare a checkpoint's key -> shape (from the headers) with the model's expected tensors before anything is
    loaded: raises naming missing weights or shape mismatches. Returns the unknown keys (neither expected nor a
    known unused module), which loading ignores."""
    wrong = [f"{k}: {tuple(shapes[k])} in the file, {expected[k][0]} expected" for k in expected
             if k in shapes and tuple(shapes[k]) != tuple(expected[k][0])]
    if wrong:
        raise ValueError(
            f"Cosmos3 checkpoint {source} does not match its config.json: {len(wrong)} weight shape(s) differ, e.g. "
            f"{wrong[:3]}. Use the config.json that came with these weights."
        )
    missing = sorted(set(expected) - set(shapes))
    if missing:
        raise ValueError(f"Cosmos3 checkpoint {source} lacks {len(missing)} weight(s), e.g. {missing[:5]}: it is incomplete.")
    skipped = [k for k in shapes if k not in expected and is_unused_key(k)]
    if skipped:
        log.info("Cosmos3: skipping %d tensors not used for video generation (lm_head/action/sound/norm).", len(skipped))
    unknown = [k for k in shapes if k not in expected and not is_unused_key(k)]
    if unknown:
        log.warning("Cosmos3: ignoring %d unknown tensors, e.g. %s", len(unknown), unknown[:5])
    return unknown


@torch.no_grad()
def load_weights(model: torch.nn.Module, files: list[str]) -> dict:
    """Copy the checkpoint into a plain-torch ``model`` one tensor at a time (peak host memory stays near one copy
    of the weights), casting to each parameter's dtype; the ComfyUI loader goes through ComfyUI's own loading
    instead. Raises before copying anything when weights are missing or mismatched. Returns counts of loaded,
    skipped and unknown tensors."""
    from safetensors import safe_open

    params = dict(model.state_dict(keep_vars=True))
    shapes = tensor_shapes(files)
    unknown = check_checkpoint(shapes, {k: (tuple(v.shape), v.dtype) for k, v in params.items()}, str(files[0]))
    for file in files:
        with safe_open(file, framework="pt") as f:
            for key in f.keys():
                if key in params:
                    params[key].data.copy_(f.get_tensor(key))
    skipped = len(shapes) - len(params) - len(unknown)
    return {"loaded": len(params), "skipped": skipped, "unexpected": len(unknown)}
