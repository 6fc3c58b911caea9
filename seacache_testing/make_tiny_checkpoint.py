"""Write a small random-weight Cosmos3 checkpoint in the official folder layout of a family member (no download).

    <root>/transformer/config.json, <stem>-0000k-of-0000n.safetensors + <stem>.safetensors.index.json
                   (stem ``diffusion_pytorch_model`` as diffusers writes it, or ``model`` as some re-uploads do)
    <root>/vae/            tiny diffusers AutoencoderKLWan (Wan2.2 layout)
    <root>/sound_tokenizer/ tiny diffusers Cosmos3AVAEAudioTokenizer (sound presets only)
    <root>/text_tokenizer/ tiny tokenizer with a chat template (or its files at the root, as some Edge uploads)
    <root>/scheduler/scheduler_config.json
    <root>/assets/negative_prompt.json (structured JSON, absent for Super-style presets)
    <root>/modular_model_index.json (4-step presets: the distilled sigma schedule)

Presets (see PRESETS): ``tiny`` (Nano layout; tests, seconds on a CPU), ``medium`` (benchmarks: large enough that
the generator stack dominates a call, as in Cosmos3-Nano), ``nano`` (Cosmos3-Nano's own dimensions, 27 GB of bf16
drawn on ``--device``, with a full-size random VAE: the GPU benchmark through ComfyUI), and one tiny checkpoint per family member's layout and
architecture: ``tiny-edge``, ``tiny-super``, ``tiny-t2i``, ``tiny-i2v``, ``tiny-t2i-4step``, ``tiny-i2v-4step``,
``tiny-bias``, ``tiny-sound`` (a ``sound_gen`` transformer with 8 sound latent channels) and ``tiny-sound-hop960``
(the same, its audio VAE's ``hop_size`` 960 disagreeing with the transformer's 25 sound frames a second). Sizes, distilled sigmas and negative prompts are made up; layouts and switches follow the
public checkpoints as far as they are documented. The transformer also carries ``lm_head``/``norm`` tensors like
the official checkpoint, which the loader skips.

    python -m seacache_testing.make_tiny_checkpoint OUT_DIR [--preset tiny|tiny-edge|...] [--seed 0] [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field

import torch

from cosmos3 import Cosmos3Config, Cosmos3Transformer

TINY_SIZES = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                  intermediate_size=96, vocab_size=512, rope_axes_dim=(6, 5, 5))
MEDIUM_SIZES = dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                    intermediate_size=1536, vocab_size=512, rope_axes_dim=(12, 10, 10))
# A structured negative prompt like the official assets/negative_prompt.json (the pipeline passes json.dumps of it).
NEGATIVE_PROMPT = {
    "quality": "blurry, low quality, distorted, watermark, static frames",
    "motion": "jerky, frozen",
}
UNIPC_SCHEDULER = {
    "_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "prediction_type": "flow_prediction",
    "use_flow_sigmas": True, "flow_shift": 10.0, "solver_order": 2, "final_sigmas_type": "zero",
}
DISTILLED_SCHEDULER = {
    "_class_name": "FlowMatchEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": 5.0,
    "stochastic_sampling": True,
}


@dataclass(frozen=True)
class Preset:
    """What a generated checkpoint looks like: architecture switches and folder layout."""

    sizes: dict
    architecture: dict = field(default_factory=dict)  # Cosmos3Config switches (hidden_act, qk norms, bias)
    weight_stem: str = "diffusion_pytorch_model"  # or "model"
    tokenizer_at_root: bool = False  # tokenizer files at the checkpoint root instead of text_tokenizer/
    tokenizer_flavour: str = "qwen2"  # see seacache_testing/tiny_tokenizer.py FLAVOURS
    negative_prompt: bool = True  # write assets/negative_prompt.json
    distilled_sigmas: tuple = ()  # 4-step checkpoints: modular_model_index.json + FlowMatchEuler scheduler
    audio_hop_size: int | None = None  # sound presets: hop_size written into sound_tokenizer/config.json
    full_size: bool = False  # weights drawn on the device, a full-size VAE (too large to build on a CPU quickly)


EDGE_ARCHITECTURE = {"hidden_act": "relu2", "qk_norm_for_text": False, "use_und_k_norm_for_gen": True}
FOUR_STEP_SIGMAS = (1.0, 0.75, 0.5, 0.25)
PRESETS = {
    "tiny": Preset(TINY_SIZES),
    "medium": Preset(MEDIUM_SIZES),
    "nano": Preset({}, full_size=True),  # Cosmos3Config's defaults are Nano's dimensions
    "tiny-edge": Preset(TINY_SIZES, EDGE_ARCHITECTURE, weight_stem="model", tokenizer_at_root=True,
                        tokenizer_flavour="nemotron"),
    "tiny-super": Preset(TINY_SIZES, negative_prompt=False),
    "tiny-t2i": Preset(TINY_SIZES, negative_prompt=False),
    "tiny-i2v": Preset(TINY_SIZES, weight_stem="model", negative_prompt=False),
    "tiny-t2i-4step": Preset(TINY_SIZES, negative_prompt=False, distilled_sigmas=FOUR_STEP_SIGMAS),
    "tiny-i2v-4step": Preset(TINY_SIZES, weight_stem="model", negative_prompt=False, distilled_sigmas=FOUR_STEP_SIGMAS),
    "tiny-bias": Preset(TINY_SIZES, {"attention_bias": True}),
    "tiny-sound": Preset(TINY_SIZES, {"sound_gen": True, "sound_dim": 8}),
    "tiny-sound-hop960": Preset(TINY_SIZES, {"sound_gen": True, "sound_dim": 8}, audio_hop_size=960),
}
# tiny-edge: Edge's relu2 backbone. Its QK-norm switches are not published, so the preset also takes the other
# switch diffusers offers (text keys normalised for the generator only) to cover it in a checkpoint too.


@torch.no_grad()
def random_transformer_state(config: Cosmos3Config, seed: int) -> dict[str, torch.Tensor]:
    """Random weights for every checkpoint key (norm gains near 1, small biases), plus the unused LM head."""
    gen = torch.Generator().manual_seed(seed)
    model = Cosmos3Transformer(config)
    state = {}
    for name, tensor in model.state_dict().items():
        if "norm" in name:
            value = 1.0 + 0.1 * torch.randn(tensor.shape, generator=gen)
        elif name.endswith("bias"):
            value = 0.02 * torch.randn(tensor.shape, generator=gen)
        else:
            fan_in = tensor.shape[-1] if tensor.ndim > 1 else 1
            value = torch.randn(tensor.shape, generator=gen) / fan_in**0.5
        state[name] = value.to(torch.bfloat16 if config.hidden_size >= 512 else torch.float32).contiguous()
    return with_unused_lm_head(state, config)


def with_unused_lm_head(state: dict[str, torch.Tensor], config: Cosmos3Config) -> dict[str, torch.Tensor]:
    """``state`` plus the LM head and final norm the official checkpoint carries (the loader skips them)."""
    like = state["proj_in.weight"]
    state["lm_head.weight"] = torch.zeros(config.vocab_size, config.hidden_size, dtype=like.dtype, device=like.device)
    state["norm.weight"] = torch.ones(config.hidden_size, dtype=like.dtype, device=like.device)
    return state


def device_transformer_state(config: Cosmos3Config, seed: int, device) -> dict[str, torch.Tensor]:
    """Random bf16 weights for every checkpoint key, drawn on ``device`` (``random_model``'s rule); the shards are
    copied to the host one at a time when written."""
    from .cosmos3_random_weights import random_model

    return with_unused_lm_head(dict(random_model(config, torch.bfloat16, device, seed).state_dict()), config)


def write_sharded(state: dict[str, torch.Tensor], folder: str, shards: int, stem: str = "diffusion_pytorch_model") -> None:
    """Split the state across ``shards`` safetensors files named ``<stem>-0000k-of-0000n`` with an index."""
    from safetensors.torch import save_file

    keys = sorted(state)
    per = -(-len(keys) // shards)
    weight_map = {}
    for i in range(shards):
        name = f"{stem}-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: state[k].contiguous().cpu() for k in keys[i * per : (i + 1) * per]}
        save_file(part, os.path.join(folder, name))
        weight_map.update({k: name for k in part})
    total = sum(t.numel() * t.element_size() for t in state.values())
    with open(os.path.join(folder, f"{stem}.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


def _write_json(path: str, payload) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1)


def make_tiny_checkpoint(root: str, preset: str = "tiny", seed: int = 0, shards: int = 2,
                         transformer_weights: tuple[Cosmos3Config, dict] | None = None, device="cpu") -> str:
    """Write the whole checkpoint folder of ``preset`` at ``root`` and return it. ``transformer_weights`` (config,
    state dict) puts a trained transformer (the benchmarks' proxies) in the preset's layout instead of random
    weights of the preset's sizes. ``device``: where a full-size preset's weights are drawn."""
    from .tiny_tokenizer import write_tiny_tokenizer
    from .tiny_vae import write_full_size_vae, write_tiny_vae

    if preset not in PRESETS:
        raise ValueError(f"Unknown preset {preset!r}; choose one of {sorted(PRESETS)}.")
    spec = PRESETS[preset]
    config, state = transformer_weights or (Cosmos3Config(**spec.sizes, **spec.architecture), None)
    transformer = os.path.join(root, "transformer")
    _write_json(os.path.join(transformer, "config.json"), {"_class_name": "Cosmos3OmniTransformer", **config.to_dict()})
    if state is None:
        state = device_transformer_state(config, seed, device) if spec.full_size else random_transformer_state(config, seed)
    write_sharded(state, transformer, max(shards, 8) if spec.full_size else shards, spec.weight_stem)
    del state
    (write_full_size_vae(os.path.join(root, "vae"), seed=seed, device=device) if spec.full_size
     else write_tiny_vae(os.path.join(root, "vae"), seed=seed))
    if config.sound_gen:
        from .tiny_audio_vae import write_tiny_audio_vae

        write_tiny_audio_vae(os.path.join(root, "sound_tokenizer"), seed=seed, hop_size=spec.audio_hop_size)
    write_tiny_tokenizer(root if spec.tokenizer_at_root else os.path.join(root, "text_tokenizer"), spec.tokenizer_flavour)
    scheduler = DISTILLED_SCHEDULER if spec.distilled_sigmas else UNIPC_SCHEDULER
    _write_json(os.path.join(root, "scheduler", "scheduler_config.json"), scheduler)
    if spec.distilled_sigmas:
        _write_json(os.path.join(root, "modular_model_index.json"), {
            "_class_name": "Cosmos3DistilledModularPipeline", "is_distilled": True,
            "distilled_sigmas": list(spec.distilled_sigmas),
        })
    if spec.negative_prompt:
        _write_json(os.path.join(root, "assets", "negative_prompt.json"), NEGATIVE_PROMPT)
    return root


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu", help="where the nano preset's weights are drawn (cuda on a GPU)")
    args = parser.parse_args()
    print(make_tiny_checkpoint(args.out_dir, args.preset, args.seed, device=args.device))
