"""Write a small random-weight Cosmos3 checkpoint in the official folder layout (no download).

    <root>/transformer/config.json, diffusion_pytorch_model-0000k-of-0000n.safetensors + index.json
    <root>/vae/            tiny diffusers AutoencoderKLWan (Wan2.2 layout)
    <root>/text_tokenizer/ tiny Qwen2-style tokenizer with a chat template
    <root>/scheduler/scheduler_config.json, <root>/assets/negative_prompt.json

Presets: ``tiny`` (tests, seconds on a CPU) and ``medium`` (benchmarks: large enough that the generator stack
dominates a call, as it does in Cosmos3-Nano). The transformer also carries ``lm_head``/``norm`` tensors like
the official checkpoint, which the loader skips.

    python scripts/make_tiny_checkpoint.py OUT_DIR [--preset tiny|medium] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cosmos3 import Cosmos3Config, Cosmos3Transformer  # noqa: E402

PRESETS = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                 intermediate_size=96, vocab_size=512, rope_axes_dim=(6, 5, 5)),
    "medium": dict(hidden_size=512, num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
                   intermediate_size=1536, vocab_size=512, rope_axes_dim=(12, 10, 10)),
}
NEGATIVE_PROMPT = "blurry, low quality, distorted, watermark, static frames"
SCHEDULER_CONFIG = {
    "_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "prediction_type": "flow_prediction",
    "use_flow_sigmas": True, "flow_shift": 10.0, "solver_order": 2, "final_sigmas_type": "zero",
}


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
    state["lm_head.weight"] = torch.zeros(config.vocab_size, config.hidden_size, dtype=state["proj_in.weight"].dtype)
    state["norm.weight"] = torch.ones(config.hidden_size, dtype=state["proj_in.weight"].dtype)
    return state


def write_sharded(state: dict[str, torch.Tensor], folder: str, shards: int) -> None:
    """Split the state across ``shards`` safetensors files with a diffusers index."""
    from safetensors.torch import save_file

    keys = sorted(state)
    per = -(-len(keys) // shards)
    weight_map = {}
    for i in range(shards):
        name = f"diffusion_pytorch_model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {k: state[k] for k in keys[i * per : (i + 1) * per]}
        save_file(part, os.path.join(folder, name))
        weight_map.update({k: name for k in part})
    total = sum(t.numel() * t.element_size() for t in state.values())
    with open(os.path.join(folder, "diffusion_pytorch_model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)


def make_tiny_checkpoint(root: str, preset: str = "tiny", seed: int = 0, shards: int = 2) -> str:
    """Write the whole checkpoint folder at ``root`` and return it."""
    from tiny_tokenizer import write_tiny_tokenizer
    from tiny_vae import write_tiny_vae

    config = Cosmos3Config(**PRESETS[preset])
    transformer = os.path.join(root, "transformer")
    os.makedirs(transformer, exist_ok=True)
    with open(os.path.join(transformer, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"_class_name": "Cosmos3OmniTransformer", **config.to_dict()}, f, indent=1)
    write_sharded(random_transformer_state(config, seed), transformer, shards)
    write_tiny_vae(os.path.join(root, "vae"), seed=seed)
    write_tiny_tokenizer(os.path.join(root, "text_tokenizer"))
    for sub, name, payload in (
        ("scheduler", "scheduler_config.json", SCHEDULER_CONFIG),
        ("assets", "negative_prompt.json", {"negative_prompt": NEGATIVE_PROMPT}),
    ):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
        with open(os.path.join(root, sub, name), "w", encoding="utf-8") as f:
            json.dump(payload, f, indent=1)
    return root


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(make_tiny_checkpoint(args.out_dir, args.preset, args.seed))
