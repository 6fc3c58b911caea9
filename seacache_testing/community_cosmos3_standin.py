"""A stand-in for the community ComfyUI-Cosmos3 MODEL (RyukoMatoiFan/ComfyUI-Cosmos3), written for these tests:
not its code, only its calling convention as of commit b9226bf, which is what SeaCache's seam depends on, so the
seam's logic is covered where the real pack is not installed.

What the seam relies on and this stand-in reproduces: the diffusion model class is named
``Cosmos3OmniTransformer``, is called as ``forward(x, timesteps, context, ..., cosmos3_und_kv=None,
transformer_options)`` with token ids as a float ``context`` [B, L, 1], and loops over the batch. Per item it takes
the text K/V of every layer from ``cosmos3_und_kv`` [B, layers, 2, L, D] (split reasoner) or from its prefill
(``for layer in self.layers: und, k, v = layer.forward_und(und, cos_und, sin_und)``), cached per prompt, then runs
``for layer, (k, v) in zip(self.layers, und_kv): gen = layer.forward_gen(gen, k, v, cos_gen, sin_gen)`` on 2-D
sequences, then ``norm_moe_gen`` and ``proj_out``. It offers no wrapper or block-replace hook. The BaseModel is
flow matching with sigma passed through as the timestep.

``layout="1388a60"`` builds the pack's first convention instead: no K/V cache, and per layer
``und, gen = layer(und, gen, cos_und, sin_und, cos_gen, sin_gen)``.
"""

from __future__ import annotations

import torch

LATENT_CHANNELS = 16


class Pathways(torch.nn.Module):
    """The two pathways of a dual-pathway layer: the text pathway reads only text and yields its K/V; the
    generator pathway reads the generator sequence and that K/V."""

    def __init__(self, hidden: int):
        super().__init__()
        self.text_mlp = torch.nn.Linear(hidden, hidden)
        self.text_kv = torch.nn.Linear(hidden, 2 * hidden)
        self.gen_mix = torch.nn.Linear(hidden, hidden)
        self.gen_mlp = torch.nn.Linear(hidden, hidden)

    def text(self, und_seq, cos_und, sin_und):
        und_seq = und_seq + torch.tanh(self.text_mlp(und_seq * cos_und + sin_und))
        k_und, v_und = self.text_kv(und_seq).chunk(2, dim=-1)
        return und_seq, k_und, v_und

    def generate(self, gen_seq, k_und, v_und, cos_gen, sin_gen):
        attention = torch.softmax(gen_seq @ k_und.T, dim=-1) @ v_und
        gen_seq = gen_seq + torch.tanh(self.gen_mix(gen_seq * cos_gen + sin_gen) + attention)
        return gen_seq + 0.5 * torch.tanh(self.gen_mlp(gen_seq))


class StandInLayer(Pathways):
    """The layer as of b9226bf: one method per pathway."""

    def forward_und(self, und_seq, cos_und, sin_und):
        return self.text(und_seq, cos_und, sin_und)

    def forward_gen(self, gen_seq, k_und, v_und, cos_gen, sin_gen):
        return self.generate(gen_seq, k_und, v_und, cos_gen, sin_gen)


class JointLayer(Pathways):
    """The first commit's layer (1388a60): one call runs both pathways."""

    def forward(self, und_seq, gen_seq, cos_und, sin_und, cos_gen, sin_gen):
        und_out, k_und, v_und = self.text(und_seq, cos_und, sin_und)
        return und_out, self.generate(gen_seq, k_und, v_und, cos_gen, sin_gen)


class Cosmos3OmniTransformer(torch.nn.Module):
    """Stand-in diffusion model with the community model's calling convention (see the module docstring)."""

    def __init__(self, image_model=None, device=None, dtype=None, operations=None, hidden_size=32, num_hidden_layers=3, vocab_size=64, layout="b9226bf", **kwargs):
        super().__init__()
        self.dtype, self.layout = dtype, layout
        self.embed_tokens = torch.nn.Embedding(vocab_size, hidden_size)
        self.proj_in = torch.nn.Linear(LATENT_CHANNELS, hidden_size)
        self.time_embedder = torch.nn.Linear(1, hidden_size)
        self.layers = torch.nn.ModuleList(StandInLayer(hidden_size) for _ in range(num_hidden_layers))
        self.norm_moe_gen = torch.nn.LayerNorm(hidden_size)
        self.proj_out = torch.nn.Linear(hidden_size, LATENT_CHANNELS)
        self._und_kv_cache = {}
        self.prefills = 0  # text prefills run (not answered from the cache), for the tests

    @staticmethod
    def rope(length: int):
        angle = torch.linspace(0, 1, length)[:, None]
        return angle.cos(), 0.1 * angle.sin()

    def _und_prefill(self, token_ids):
        """Per-layer (k, v) of a prompt, computed once per prompt (cached, at most two prompts)."""
        key = token_ids.numpy().tobytes()
        if key not in self._und_kv_cache:
            und, und_kv = self.embed_tokens(token_ids), []
            for layer in self.layers:
                und, k_und, v_und = layer.forward_und(und, *self.rope(und.shape[0]))
                und_kv.append((k_und, v_und))
            if len(self._und_kv_cache) >= 2:
                self._und_kv_cache.pop(next(iter(self._und_kv_cache)))
            self._und_kv_cache[key] = und_kv
            self.prefills += 1
        return self._und_kv_cache[key]

    def forward(self, x, timesteps, context, cosmos3_fps=None, cosmos3_und_kv=None, transformer_options={}, **kwargs):
        out = torch.zeros_like(x)
        for b in range(x.shape[0]):
            tokens = x[b].flatten(1).T
            gen = self.proj_in(tokens) + self.time_embedder(timesteps[b].reshape(1, 1).to(tokens))
            token_ids = context[b, :, 0].round().long()
            rope_gen = self.rope(gen.shape[0])
            if self.layout == "1388a60":
                und = self.embed_tokens(token_ids)
                for layer in self.layers:
                    und, gen = layer(und, gen, *self.rope(und.shape[0]), *rope_gen)
            else:
                if cosmos3_und_kv is not None:
                    packed = cosmos3_und_kv[min(b, cosmos3_und_kv.shape[0] - 1)]
                    und_kv = [(packed[i, 0], packed[i, 1]) for i in range(packed.shape[0])]
                else:
                    und_kv = self._und_prefill(token_ids)
                for layer, (k_und, v_und) in zip(self.layers, und_kv):
                    gen = layer.forward_gen(gen, k_und, v_und, *rope_gen)
            out[b] = self.proj_out(self.norm_moe_gen(gen)).T.reshape(x[b].shape)
        return out


def build(seed: int = 0, layout: str = "b9226bf", latent_format=None):
    """A ModelPatcher around a flow-matching BaseModel holding the stand-in (random weights, CPU); ``latent_format``
    (a ComfyUI latent format class with 16 channels) replaces the default Wan 2.1 video format."""
    import comfy.conds
    import comfy.latent_formats
    import comfy.model_base
    import comfy.model_patcher
    import comfy.supported_models_base

    chosen_format = comfy.latent_formats.Wan21 if latent_format is None else latent_format

    class StandInConfig(comfy.supported_models_base.BASE):
        unet_config = {"layout": layout}
        unet_extra_config = {}
        latent_format = chosen_format
        sampling_settings = {"shift": 3.0, "multiplier": 1.0}
        supported_inference_dtypes = [torch.float32]

    class StandInModel(comfy.model_base.BaseModel):
        def extra_conds(self, **kwargs):
            out = super().extra_conds(**kwargs)
            if kwargs.get("cosmos3_und_kv") is not None:
                out["cosmos3_und_kv"] = comfy.conds.CONDRegular(kwargs["cosmos3_und_kv"])
            return out

    config = StandInConfig({"layout": layout})
    config.set_inference_dtype(torch.float32, None)
    torch.manual_seed(seed)
    base = StandInModel(config, comfy.model_base.ModelType.FLOW, device=torch.device("cpu"), unet_model=Cosmos3OmniTransformer)
    if layout == "1388a60":
        for layer in base.diffusion_model.layers:
            layer.__class__ = JointLayer
    return comfy.model_patcher.ModelPatcher(base, load_device=torch.device("cpu"), offload_device=torch.device("cpu"))


def conditioning(tokens: list[int], und_kv: torch.Tensor | None = None):
    """CONDITIONING of prompt token ids as the community text-encode node gives them ([1, L, 1] floats), with the
    text K/V a separately loaded text tower prefilled (split reasoner) when given."""
    extras = {"cosmos3_fps": 24.0}
    if und_kv is not None:
        extras["cosmos3_und_kv"] = und_kv
    return [[torch.tensor(tokens, dtype=torch.float32).reshape(1, -1, 1), extras]]


def und_kv(model_patcher, tokens: list[int]) -> torch.Tensor:
    """The stand-in's text K/V for a prompt packed as the community conditioning carries them: [1, layers, 2, L, D]."""
    layers = model_patcher.model.diffusion_model._und_prefill(torch.tensor(tokens))
    return torch.stack([torch.stack(kv) for kv in layers]).unsqueeze(0).detach().clone()
