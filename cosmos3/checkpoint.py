"""Reading official Cosmos3 ``transformer/`` checkpoints (sharded or merged safetensors) into the model."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

import torch

from .config import Cosmos3Config

log = logging.getLogger(__name__)

WEIGHT_NAMES = ("diffusion_pytorch_model", "model")
"""Stems of transformer weight files: diffusers' name, and the one some re-uploads (community packs) use."""
TOKENIZER_FOLDER = "text_tokenizer"
NEGATIVE_PROMPT_FILE = os.path.join("assets", "negative_prompt.json")
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
    """Keys generation never reads: the LM head, action modules, the text pathway's final norm, and the sound
    modules when the config has no ``sound_gen`` (a ``sound_gen`` model holds them, so they are expected)."""
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
    """Safetensors files of a checkpoint: a ``transformer/`` folder, a checkpoint root holding ``transformer/``,
    or one merged ``.safetensors`` file. In a folder, for each stem of :data:`WEIGHT_NAMES` in turn, a
    ``<stem>.safetensors.index.json`` with its shards, else a single ``<stem>.safetensors``. Raises naming the
    folder and the files looked for, or the shards an index lists that are missing."""
    if os.path.isfile(path):
        return [path]
    folder = os.path.join(path, "transformer") if os.path.isdir(os.path.join(path, "transformer")) else path
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"Cosmos3 checkpoint not found: {path!r} is neither a folder nor a .safetensors file.")
    for stem in WEIGHT_NAMES:
        index = os.path.join(folder, f"{stem}.safetensors.index.json")
        if os.path.isfile(index):
            with open(index, encoding="utf-8") as f:
                names = sorted(set(json.load(f)["weight_map"].values()))
            files = [os.path.join(folder, n) for n in names]
            absent = [f for f in files if not os.path.isfile(f)]
            if absent:
                raise FileNotFoundError(
                    f"Cosmos3 checkpoint is incomplete: shard(s) {absent} listed in {index} are missing."
                )
            return files
        single = os.path.join(folder, f"{stem}.safetensors")
        if os.path.isfile(single):
            return [single]
    looked_for = [f"{stem}.safetensors.index.json (+ shards) or {stem}.safetensors" for stem in WEIGHT_NAMES]
    raise FileNotFoundError(f"No Cosmos3 weights in {folder!r}: expected {' / '.join(looked_for)}.")


def tokenizer_folder(root: str) -> str:
    """The folder holding the prompt tokenizer of a checkpoint root: ``text_tokenizer/`` (Nano, Super) or the
    root itself (some Edge uploads keep ``tokenizer.json`` there). Raises naming both places looked at."""
    candidates = (os.path.join(root, TOKENIZER_FOLDER), root)
    for folder in candidates:
        if os.path.isfile(os.path.join(folder, "tokenizer.json")):
            return folder
    looked = " and ".join(os.path.join(folder, "tokenizer.json") for folder in candidates)
    raise FileNotFoundError(
        f"No Cosmos3 tokenizer for the checkpoint at {root}: missing {looked}. Copy the checkpoint's "
        "text_tokenizer/ folder (tokenizer.json, tokenizer_config.json) there."
    )


def read_negative_prompt(root: str) -> str:
    """The checkpoint's recommended negative prompt, as NVIDIA's scripts pass it: the structured JSON of
    ``assets/negative_prompt.json`` serialised with ``json.dumps`` (a file holding a JSON string gives that string).
    Without the file (Cosmos3-Super ships no ``assets/``) it is "", which is what diffusers' pipeline uses when no
    negative prompt is given. Raises naming the file when it is not valid JSON."""
    path = os.path.join(root, NEGATIVE_PROMPT_FILE)
    if not os.path.isfile(path):
        log.info("Cosmos3: no %s; the default negative prompt is empty (as in diffusers' pipeline).", path)
        return ""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as err:
        raise ValueError(f"Cosmos3 negative prompt {path} is not valid JSON ({err}); fix or delete the file.") from err
    return data if isinstance(data, str) else json.dumps(data)


@dataclass(frozen=True)
class DistilledSchedule:
    """Sampling recipe of a few-step distilled checkpoint (Cosmos3-Super-Text2Image-4Step / -Image2Video-4Step)."""

    sigmas: list[float]  # every step's sigma and the final 0, shifted as the checkpoint's scheduler does
    stochastic: bool  # the scheduler re-noises each step (x0 -> (1 - s') x0 + s' noise): ComfyUI's "lcm" sampler

    @property
    def sampler(self) -> str:
        """The ComfyUI sampler taking the same steps: ``lcm`` (re-noising) or ``euler`` (deterministic)."""
        return "lcm" if self.stochastic else "euler"


_RESHAPING_SCHEDULER_KEYS = ("use_dynamic_shifting", "shift_terminal", "use_karras_sigmas", "use_exponential_sigmas",
                             "use_beta_sigmas", "invert_sigmas")


def read_distilled_schedule(root: str) -> DistilledSchedule | None:
    """The fixed schedule of a distilled checkpoint, or None for the others. diffusers' distilled pipeline takes
    ``distilled_sigmas`` from ``modular_model_index.json`` and gives them to its FlowMatchEuler scheduler, which
    applies the ``shift`` of ``scheduler/scheduler_config.json`` and appends a final 0; CFG is 1 (baked in)."""
    path = os.path.join(root, "modular_model_index.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        raw = json.load(f).get("distilled_sigmas")
    if not raw:
        return None
    scheduler = {}
    scheduler_path = os.path.join(root, "scheduler", "scheduler_config.json")
    if os.path.isfile(scheduler_path):
        with open(scheduler_path, encoding="utf-8") as f:
            scheduler = json.load(f)
    unsupported = [k for k in _RESHAPING_SCHEDULER_KEYS if scheduler.get(k)]
    if unsupported:
        raise ValueError(f"{scheduler_path}: {unsupported} reshape the distilled schedule and are not supported here.")
    shift = torch.tensor(float(scheduler.get("shift", 1.0)), dtype=torch.float32)
    sigmas = torch.tensor([float(s) for s in raw], dtype=torch.float32)
    sigmas = shift * sigmas / (1 + (shift - 1) * sigmas)
    return DistilledSchedule(sigmas.tolist() + [0.0], bool(scheduler.get("stochastic_sampling", False)))


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
    """Derive the architecture of a merged single-file checkpoint from its weight shapes: sizes, attention bias,
    the backbone (no ``gate_proj``: Nemotron ``relu2``) and which QK norms exist. Not visible in weights, so kept
    at Nano's values: the mRoPE split (24/20/20 of 64 frequency pairs), rope theta, eps, base fps, the sound latent
    rate (25 a second). Sound modules (``audio_proj_in``) make a ``sound_gen`` config."""
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
        hidden_act="silu" if "layers.0.mlp_moe_gen.gate_proj.weight" in shapes else "relu2",
        latent_channel=patch_dim // 4,
        patch_latent_dim=patch_dim,
        qk_norm_for_text="layers.0.self_attn.norm_q.weight" in shapes,
        use_und_k_norm_for_gen="layers.0.self_attn.k_norm_und_for_gen.weight" in shapes,
        rope_axes_dim=(head_dim // 2 - 2 * spatial, spatial, spatial),
        sound_gen="audio_proj_in.weight" in shapes,
        sound_dim=shapes["audio_proj_in.weight"][1] if "audio_proj_in.weight" in shapes else None,
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
