"""A stand-in for the community ComfyUI-Cosmos3 MODEL (RyukoMatoiFan/ComfyUI-Cosmos3), written for these tests:
not its code, only its calling convention, which is what SeaCache's seam depends on.

What the seam relies on and this stand-in reproduces: the diffusion model class is named
``Cosmos3OmniTransformer``, is called as ``forward(x, timesteps, context, ..., transformer_options)`` with token
ids as a float ``context`` [B, L, 1], loops over the batch, and per item runs
``for layer in self.layers: und, gen = layer(und, gen, cos_und, sin_und, cos_gen, sin_gen)`` on 2-D text (und)
and generator (gen) sequences, then ``norm_moe_gen`` and ``proj_out`` on the generator sequence only. It offers
no wrapper or block-replace hook. The BaseModel is flow matching with sigma passed through as the timestep.
"""

from __future__ import annotations

import torch

LATENT_CHANNELS = 16


class StandInLayer(torch.nn.Module):
    """A dual-pathway layer: the text pathway reads only text, the generator pathway reads both."""

    def __init__(self, hidden: int):
        super().__init__()
        self.text_mlp = torch.nn.Linear(hidden, hidden)
        self.gen_mix = torch.nn.Linear(hidden, hidden)
        self.gen_mlp = torch.nn.Linear(hidden, hidden)

    def forward(self, und, gen, cos_und, sin_und, cos_gen, sin_gen):
        und = und + torch.tanh(self.text_mlp(und * cos_und + sin_und))
        gen = gen + torch.tanh(self.gen_mix(gen * cos_gen + sin_gen) + und.mean(0, keepdim=True))
        return und, gen + 0.5 * torch.tanh(self.gen_mlp(gen))


class Cosmos3OmniTransformer(torch.nn.Module):
    """Stand-in diffusion model with the community model's calling convention (see the module docstring)."""

    def __init__(self, image_model=None, device=None, dtype=None, operations=None, hidden_size=32, num_hidden_layers=3, vocab_size=64, **kwargs):
        super().__init__()
        self.dtype = dtype
        self.embed_tokens = torch.nn.Embedding(vocab_size, hidden_size)
        self.proj_in = torch.nn.Linear(LATENT_CHANNELS, hidden_size)
        self.time_embedder = torch.nn.Linear(1, hidden_size)
        self.layers = torch.nn.ModuleList(StandInLayer(hidden_size) for _ in range(num_hidden_layers))
        self.norm_moe_gen = torch.nn.LayerNorm(hidden_size)
        self.proj_out = torch.nn.Linear(hidden_size, LATENT_CHANNELS)

    def forward(self, x, timesteps, context, cosmos3_fps=None, transformer_options={}, **kwargs):
        out = torch.zeros_like(x)
        for b in range(x.shape[0]):
            tokens = x[b].flatten(1).T
            gen = self.proj_in(tokens) + self.time_embedder(timesteps[b].reshape(1, 1).to(tokens))
            und = self.embed_tokens(context[b, :, 0].round().long())
            angle_und = torch.linspace(0, 1, und.shape[0])[:, None]
            angle_gen = torch.linspace(0, 1, gen.shape[0])[:, None]
            rope = (angle_und.cos(), 0.1 * angle_und.sin(), angle_gen.cos(), 0.1 * angle_gen.sin())
            for layer in self.layers:
                und, gen = layer(und, gen, *rope)
            out[b] = self.proj_out(self.norm_moe_gen(gen)).T.reshape(x[b].shape)
        return out


def build(seed: int = 0):
    """A ModelPatcher around a flow-matching BaseModel holding the stand-in (random weights, CPU)."""
    import comfy.latent_formats
    import comfy.model_base
    import comfy.model_patcher
    import comfy.supported_models_base

    class StandInConfig(comfy.supported_models_base.BASE):
        unet_config = {}
        unet_extra_config = {}
        latent_format = comfy.latent_formats.Wan21
        sampling_settings = {"shift": 3.0, "multiplier": 1.0}
        supported_inference_dtypes = [torch.float32]

    config = StandInConfig({})
    config.set_inference_dtype(torch.float32, None)
    torch.manual_seed(seed)
    base = comfy.model_base.BaseModel(config, comfy.model_base.ModelType.FLOW, device=torch.device("cpu"), unet_model=Cosmos3OmniTransformer)
    return comfy.model_patcher.ModelPatcher(base, load_device=torch.device("cpu"), offload_device=torch.device("cpu"))


def conditioning(tokens: list[int]):
    """CONDITIONING of prompt token ids as the community text-encode node gives them ([1, L, 1] floats)."""
    return [[torch.tensor(tokens, dtype=torch.float32).reshape(1, -1, 1), {"cosmos3_fps": 24.0}]]
