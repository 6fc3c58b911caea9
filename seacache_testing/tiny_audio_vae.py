"""Write a tiny random Cosmos3 audio VAE (the checkpoint's ``sound_tokenizer/``) for tests.

The folder is what diffusers' ``Cosmos3AVAEAudioTokenizer.save_pretrained`` writes (``config.json`` +
``diffusion_pytorch_model.safetensors``, encoder and decoder), in the shipped Oobleck/SnakeBeta configuration with
the shipped strides and rate (hop 1920 at 48 kHz: 25 latent frames a second, as the transformer's sound positions
assume; stride 5 takes the odd output-padding path) and tiny widths: 8 latent channels, decoder base width 2. Snake parameters and weight-norm gains are randomised so a wrong key mapping shows.
``--hop-size`` writes a ``hop_size`` into the config (diffusers then sizes a clip's sound by it, not by the strides).

    python -m seacache_testing.tiny_audio_vae OUT_DIR [--seed 0] [--hop-size 960]
"""

from __future__ import annotations

import argparse
import os

TINY_AUDIO_VAE = dict(vocoder_input_dim=8, dec_dim=2, enc_dim=2, enc_latent_dim=16, enc_num_blocks=1)


def build_tiny_audio_vae(seed: int = 0, hop_size: int | None = None):
    """The tiny diffusers audio VAE in fp32 with random Snake parameters and gains (caller's RNG untouched)."""
    import torch
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        vae = Cosmos3AVAEAudioTokenizer(**TINY_AUDIO_VAE, hop_size=hop_size)
        with torch.no_grad():
            for name, p in vae.named_parameters():
                if name.endswith((".alpha", ".beta")):
                    p.copy_(0.3 * torch.randn_like(p))
                elif name.endswith("weight_g"):
                    p.mul_(0.5 + torch.rand_like(p))
            vae.decoder.conv2.weight_g.mul_(0.3)
    return vae.float().eval()


def write_tiny_audio_vae(folder: str | os.PathLike, seed: int = 0, hop_size: int | None = None) -> str:
    """Write the tiny audio VAE into ``folder`` (deterministic for a seed); returns the folder."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    build_tiny_audio_vae(seed, hop_size).save_pretrained(folder, safe_serialization=True)
    return folder


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hop-size", type=int, default=None)
    args = parser.parse_args()
    print(write_tiny_audio_vae(args.out_dir, args.seed, args.hop_size))
