"""Memory plan of Cosmos3 video generation, computed on the CPU (meta-device model, nothing allocated).

Prints, for Cosmos3-Nano (the config defaults, or ``--config path/to/transformer/config.json`` for another
checkpoint): parameter counts and weight bytes per pathway and storage dtype (bf16 and fp8), generator tokens,
activation peak estimate, text K/V, SeaCache history and VAE decode at 832x480x93 and 1280x720x189, and which
placements fit a card of ``--card-gib`` (default 24). No GPU and no download needed.

    python -m benchmarks.bench_memory [--card-gib 24] [--reserve-gib 1] [--prompt-tokens 512 512] [--config FILE]
"""

from __future__ import annotations

import argparse
import json

import torch

from cosmos3 import Cosmos3Config
from seacache_core import SeaCacheConfig
from seacache_testing.memory_plan import (
    GENERATOR, GIB, SHARED, TEXT, generator_tokens, gib, meta_model, plan, run_memory, unread_parameters,
    weight_bytes,
)

SIZES = ((832, 480, 93), (1280, 720, 189))
DTYPES = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
SHORT = {torch.bfloat16: "bf16", torch.float8_e4m3fn: "fp8", torch.float32: "fp32"}


def weights_table(config: Cosmos3Config) -> dict:
    """Print the weight bytes per pathway and dtype for each storage choice; return the meta models."""
    models = {}
    print(f"parameters: {config.parameter_count():,} (hidden {config.hidden_size}, {config.num_hidden_layers} layers, "
          f"{config.num_attention_heads}/{config.num_key_value_heads} heads x {config.head_dim}, MLP "
          f"{config.intermediate_size}, vocab {config.vocab_size})")
    print("| storage | text pathway GiB | generator pathway GiB | shared GiB | total GiB | by dtype (GiB) |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for label, dtype in DTYPES.items():
        model = models[label] = meta_model(config, dtype)
        split = weight_bytes(model)
        total = {k: sum(v.values()) for k, v in split.items()}
        by_dtype = {}
        for part in split.values():
            for dt, n in part.items():
                by_dtype[dt] = by_dtype.get(dt, 0) + n
        detail = ", ".join(f"{SHORT.get(dt, str(dt))} {gib(n)}" for dt, n in by_dtype.items())
        print(f"| {label} | {gib(total[TEXT])} | {gib(total[GENERATOR])} | {gib(total[SHARED])} | "
              f"{gib(sum(total.values()))} | {detail} |")
    params = dict(models["bf16"].named_parameters())
    unread = unread_parameters(models["bf16"])
    print(f"never read for video (last layer's text queries/output/MLP, a loader may skip them): "
          f"{sum(params[n].numel() for n in unread):,} parameters, {gib(sum(params[n].numel() * 2 for n in unread))} GiB in bf16")
    return models


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="a Cosmos3 transformer config.json (default: Cosmos3-Nano)")
    parser.add_argument("--card-gib", type=float, default=24.0)
    parser.add_argument("--reserve-gib", type=float, default=1.0, help="kept free for the CUDA context and allocator")
    parser.add_argument("--prompt-tokens", type=int, nargs="+", default=[512, 512],
                        help="token count of each prompt batched in one call (cond, uncond)")
    args = parser.parse_args()
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            config = Cosmos3Config.from_dict(json.load(f))
    else:
        config = Cosmos3Config()
    models = weights_table(config)
    budget, reserve = int(args.card_gib * GIB), int(args.reserve_gib * GIB)
    prompts = tuple(args.prompt_tokens)
    print(f"\nper run (bf16 compute, {len(prompts)} prompts of {'/'.join(map(str, prompts))} tokens batched, "
          "SeaCache order 1; attention memory-efficient, no tokens^2 matrix):")
    print("| size | latent (T,H,W) | gen tokens/video | activations GiB | text K/V GiB | SeaCache history GiB "
          "| VAE decode GiB (weights + workspace) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    runs = {}
    for w, h, f in SIZES:
        for label, dtype in DTYPES.items():
            history = len(prompts) * SeaCacheConfig(order=1).history_bytes(
                generator_tokens(config, w, h, f) * config.hidden_size, torch.bfloat16.itemsize)
            runs[(w, h, f, label)] = run_memory(config, w, h, f, dtype, prompt_tokens=prompts, history=history,
                                                model=models[label])
        m = runs[(w, h, f, "bf16")]
        grid = ((f - 1) // config.temporal_compression + 1, h // 16, w // 16)
        print(f"| {w}x{h}x{f} | {grid} | {m.tokens:,} | {gib(m.activations)} | {gib(m.text_kv)} | "
              f"{gib(m.history)} | {gib(m.vae_weights)} + {gib(m.vae_decode)} |")
    print(f"\nplan for a {args.card_gib:g} GiB card ({args.reserve_gib:g} GiB reserved, usable "
          f"{gib(budget - reserve)} GiB); denoising-loop device bytes:")
    print("| size | weights | all resident | text offloaded | text offloaded + history on CPU | text encode "
          "(once per prompt) |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (w, h, f, label), m in runs.items():
        cells = [f"{gib(r.denoise)} {'fits' if r.fits else 'no'}" for r in plan(m, budget, reserve)]
        print(f"| {w}x{h}x{f} | {label} | " + " | ".join(cells) + f" | {gib(m.encode_bytes())} |")
    print("\nVAE decode runs after denoising; ComfyUI unloads the transformer first when the card needs the room "
          "(ComfyUI's Wan2.2 decode estimate; tiled decode for less).")


if __name__ == "__main__":
    main()
