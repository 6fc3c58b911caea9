"""Write a tiny random Cosmos3 / Wan2.2-layout VAE for tests.

Cosmos3 ships its VAE as a diffusers ``AutoencoderKLWan`` folder
(``vae/config.json`` + ``vae/diffusion_pytorch_model.safetensors``) in the
Wan2.2 configuration: z_dim 48, residual down/up blocks (``is_residual``),
patch size 2 (so 12 input/output channels), 16x spatial and 4x temporal
compression, dim_mult [1, 2, 4, 4], 2 residual blocks per level, separate
encoder (160) and decoder (256) base widths.

``write_tiny_vae`` keeps every one of those structural choices (so the state
dict has exactly the same key *names* and ranks as the real 705M-parameter
VAE) and only shrinks the two base widths (8 / 16): 2.7M fp32 parameters
(about 11 MB), and a decode of a ``[1, 48, 2, 4, 4]`` latent takes well under
a second on CPU.

Usage::

    python -m seacache_testing.tiny_vae OUT_DIR [--seed 0]
"""

from __future__ import annotations

import argparse
import os
from typing import Any

# Per-channel statistics of the Wan2.2 latent space (48 channels). These are
# the values the Wan2.2 VAE release publishes and that ComfyUI's
# ``comfy.latent_formats.Wan22`` uses for process_in/process_out, so a
# pipeline that normalises with the config values and ComfyUI agree.
WAN22_LATENTS_MEAN: list[float] = [
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557,
    -0.1382, 0.0542, 0.2813, 0.0891, 0.1570, -0.0098, 0.0375, -0.1825,
    -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
    -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.1230,
    -0.0313, -0.1649, 0.0117, 0.0723, -0.2839, -0.2083, -0.0520, 0.3748,
    0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667,
]
WAN22_LATENTS_STD: list[float] = [
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.4990, 0.4818, 0.5013,
    0.8158, 1.0344, 0.5894, 1.0901, 0.6885, 0.6165, 0.8454, 0.4978,
    0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093,
    0.5709, 0.6065, 0.6415, 0.4944, 0.5726, 1.2042, 0.5458, 1.6887,
    0.3971, 1.0600, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744,
]

# diffusers AutoencoderKLWan kwargs of the full-size Wan2.2 / Cosmos3 VAE.
WAN22_DIFFUSERS_CONFIG: dict[str, Any] = {
    "base_dim": 160,
    "decoder_base_dim": 256,
    "z_dim": 48,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "dropout": 0.0,
    "is_residual": True,
    "in_channels": 12,
    "out_channels": 12,
    "patch_size": 2,
    "scale_factor_spatial": 16,
    "scale_factor_temporal": 4,
    "latents_mean": WAN22_LATENTS_MEAN,
    "latents_std": WAN22_LATENTS_STD,
}

TINY_BASE_DIM = 8
TINY_DECODER_BASE_DIM = 16


def tiny_vae_config(base_dim: int = TINY_BASE_DIM,
                    decoder_base_dim: int = TINY_DECODER_BASE_DIM) -> dict[str, Any]:
    """AutoencoderKLWan kwargs: the Wan2.2 layout with small base widths."""
    cfg = dict(WAN22_DIFFUSERS_CONFIG)
    cfg["dim_mult"] = list(cfg["dim_mult"])
    cfg["temperal_downsample"] = list(cfg["temperal_downsample"])
    cfg["latents_mean"] = list(WAN22_LATENTS_MEAN)
    cfg["latents_std"] = list(WAN22_LATENTS_STD)
    cfg["base_dim"] = int(base_dim)
    cfg["decoder_base_dim"] = int(decoder_base_dim)
    return cfg


def build_tiny_vae(seed: int = 0, base_dim: int = TINY_BASE_DIM,
                   decoder_base_dim: int = TINY_DECODER_BASE_DIM):
    """Build the tiny ``AutoencoderKLWan`` in memory (fp32, eval mode).

    Weights are drawn from a forked RNG so the caller's global torch RNG state
    is left untouched. RMS-norm gains are perturbed away from 1 so that a
    wrong key mapping cannot hide behind identical initial values, and the
    decoder output conv is scaled down so decoded pixels mostly fall inside
    [-1, 1] (otherwise the final clamp would mask numerical differences).
    """
    import torch
    from diffusers import AutoencoderKLWan

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        vae = AutoencoderKLWan(**tiny_vae_config(base_dim, decoder_base_dim))
        with torch.no_grad():
            for name, p in vae.named_parameters():
                if name.endswith(".gamma"):
                    p.mul_(1.0 + 0.1 * torch.randn_like(p))
            vae.decoder.conv_out.weight.mul_(0.5)
            vae.decoder.conv_out.bias.mul_(0.5)
    return vae.float().eval()


def write_tiny_vae(folder: str | os.PathLike, seed: int = 0,
                   base_dim: int = TINY_BASE_DIM,
                   decoder_base_dim: int = TINY_DECODER_BASE_DIM) -> str:
    """Write ``config.json`` + ``diffusion_pytorch_model.safetensors`` into ``folder``.

    Returns the folder path as a string. Deterministic for a given ``seed``.
    """
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    vae = build_tiny_vae(seed=seed, base_dim=base_dim, decoder_base_dim=decoder_base_dim)
    vae.save_pretrained(folder, safe_serialization=True)
    return folder


def write_full_size_vae(folder: str | os.PathLike, seed: int = 0, device="cpu") -> str:
    """Write a random VAE of the real Wan2.2 / Cosmos3 size (``WAN22_DIFFUSERS_CONFIG``, about 705M parameters,
    bf16) into ``folder``, drawn on ``device`` without building the model (its key names and shapes come from
    the model on the meta device), so that a benchmark decodes at the real cost. Gains near 1, small biases,
    weights with variance 1/fan_in so activations stay finite through the decoder."""
    import json
    import math

    import torch
    from diffusers import AutoencoderKLWan
    from safetensors.torch import save_file

    with torch.device("meta"):
        shapes = {name: t.shape for name, t in AutoencoderKLWan(**WAN22_DIFFUSERS_CONFIG).state_dict().items()}
    gen = torch.Generator(device=device).manual_seed(seed)
    state = {}
    for name, shape in shapes.items():
        value = torch.randn(shape, generator=gen, device=device)
        if name.endswith("gamma") or "norm" in name:
            value = 1.0 + 0.1 * value
        elif name.endswith("bias"):
            value = 0.02 * value
        else:
            value = value / math.sqrt(math.prod(shape[1:]) if len(shape) > 1 else 1)
        state[name] = value.to(torch.bfloat16).cpu()
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    save_file(state, os.path.join(folder, "diffusion_pytorch_model.safetensors"))
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as f:
        json.dump({"_class_name": "AutoencoderKLWan", **WAN22_DIFFUSERS_CONFIG}, f, indent=1)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-dim", type=int, default=TINY_BASE_DIM)
    parser.add_argument("--decoder-base-dim", type=int, default=TINY_DECODER_BASE_DIM)
    ns = parser.parse_args(argv)
    path = write_tiny_vae(ns.out_dir, seed=ns.seed, base_dim=ns.base_dim,
                          decoder_base_dim=ns.decoder_base_dim)
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
