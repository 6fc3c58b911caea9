"""Memory accounting of a Cosmos3 video run: weights per pathway and dtype, activations, text K/V, a step
cache's history (a figure the cache gives), VAE decode, and a plan for a card of a given size. Torch only; nothing
is allocated (the model is built on the meta device), so the plan holds without a GPU and a host can use it for its memory estimates.

Pathways: the text pathway (``embed_tokens`` and each layer's und projections, QK norms, MLP and norms) runs
once per prompt and sampling run, its per-layer keys/values cached; the generator pathway (``add_*`` projections,
``*_moe_gen``, ``proj_in/out``, ``norm_moe_gen``, ``time_embedder``) runs on every computed step. No weight
serves both (``SHARED`` stays empty for Cosmos3; the category exists so that a family member with shared
weights is counted honestly rather than assigned to one side).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cosmos3 import Cosmos3Config, activation_bytes
from cosmos3.config import VAE_SPATIAL

TEXT, GENERATOR, SHARED = "text", "generator", "shared"
GIB = 1024**3
# ComfyUI's Wan2.2 VAE (the Cosmos3 VAE): 705M parameters; its decode estimate per latent pixel of one frame
# (the decoder is causal and decodes frame by frame, so the workspace does not grow with the frame count).
VAE_PARAMETERS = 705_000_000
VAE_DECODE_BYTES_PER_LATENT_PIXEL = 8000 * 16 * 16  # x dtype size: ComfyUI's memory_used_decode for Wan2.2
_TEXT_LAYER_PARTS = ("self_attn.to_", "self_attn.norm_q.", "self_attn.norm_k.", "self_attn.k_norm_und_for_gen.",
                     "mlp.", "input_layernorm.", "post_attention_layernorm.")
_GEN_LAYER_PARTS = ("self_attn.add_", "self_attn.to_add_out.", "self_attn.norm_added_", "mlp_moe_gen.",
                    "input_layernorm_moe_gen.", "post_attention_layernorm_moe_gen.")
_GEN_TOP = ("proj_in.", "proj_out.", "norm_moe_gen.", "time_embedder.")


def pathway_of(name: str) -> str:
    """TEXT, GENERATOR or SHARED for a parameter name of :class:`Cosmos3Transformer`; raises on a name the
    accounting does not know (a new module must be placed deliberately, not silently)."""
    if name.startswith("layers."):
        part = name.split(".", 2)[2]
        if part.startswith(_GEN_LAYER_PARTS):  # checked first: "to_add_out" also starts with "to_"
            return GENERATOR
        if part.startswith(_TEXT_LAYER_PARTS):
            return TEXT
    elif name.startswith("embed_tokens."):
        return TEXT
    elif name.startswith(_GEN_TOP):
        return GENERATOR
    raise ValueError(f"the memory plan does not know which pathway parameter {name!r} belongs to.")


def meta_model(config: Cosmos3Config, weight_dtype: torch.dtype = torch.bfloat16, operations=None):
    """The model on the meta device with its real parameter dtypes (fp8 storage keeps norms, embeddings and
    patch projections in bf16, the time embedder in fp32), without allocating memory."""
    from cosmos3 import Cosmos3Transformer
    from cosmos3.ops import TorchOps

    return Cosmos3Transformer(config, operations=operations or TorchOps, device="meta", dtype=weight_dtype)


def weight_bytes(model: torch.nn.Module) -> dict[str, dict[torch.dtype, int]]:
    """Bytes of the model's parameters per pathway and storage dtype: ``{pathway: {dtype: bytes}}``."""
    out: dict[str, dict[torch.dtype, int]] = {TEXT: {}, GENERATOR: {}, SHARED: {}}
    for name, p in model.named_parameters():
        bucket = out[pathway_of(name)]
        bucket[p.dtype] = bucket.get(p.dtype, 0) + p.numel() * p.element_size()
    return out


def unread_parameters(model: torch.nn.Module) -> list[str]:
    """Text-pathway parameters video generation never reads: the last layer's text pathway only provides its
    keys/values, so its query projection and norm, output projection, post-attention norm and MLP are dead
    weight (a loader may skip them)."""
    last = f"layers.{len(model.layers) - 1}."
    parts = ("self_attn.to_q.", "self_attn.norm_q.", "self_attn.to_out.", "post_attention_layernorm.", "mlp.")
    return [n for n, _ in model.named_parameters() if n.startswith(last) and n[len(last):].startswith(parts)]


def latent_grid(config: Cosmos3Config, width: int, height: int, frames: int) -> tuple[int, int, int]:
    """Latent (T, H, W) of a video of ``frames`` frames at ``width``x``height`` (Wan2.2 VAE: 4x time, 16x space)."""
    return (frames - 1) // config.temporal_compression + 1, height // VAE_SPATIAL, width // VAE_SPATIAL


def generator_tokens(config: Cosmos3Config, width: int, height: int, frames: int) -> int:
    """Generator tokens of one video (2x2 patches of the latent; odd latent sizes are padded)."""
    return config.token_count(*latent_grid(config, width, height, frames))


def text_kv_bytes(config: Cosmos3Config, prompt_tokens: list[int], dtype: torch.dtype = torch.bfloat16) -> int:
    """Bytes of the cached text keys/values of one padded prompt batch: per layer K and V of shape
    [B, kv_heads, L_max, head_dim] in the compute dtype (prompts are padded to the longest)."""
    elem = torch.empty((), dtype=dtype).element_size()
    per_token = config.num_hidden_layers * 2 * config.num_key_value_heads * config.head_dim * elem
    return len(prompt_tokens) * max(prompt_tokens) * per_token


def vae_decode_bytes(width: int, height: int, dtype: torch.dtype = torch.bfloat16) -> tuple[int, int]:
    """(weights, workspace) bytes of a Wan2.2 VAE decode at ``width``x``height``, using ComfyUI's own decode
    estimate (frame-causal: independent of the frame count); tiled decoding lowers the workspace."""
    elem = torch.empty((), dtype=dtype).element_size()
    return VAE_PARAMETERS * elem, VAE_DECODE_BYTES_PER_LATENT_PIXEL * (height // VAE_SPATIAL) * (width // VAE_SPATIAL) * elem


@dataclass(frozen=True)
class RunMemory:
    """Every memory figure of one run setting, in bytes (see the functions of this module for each)."""

    width: int
    height: int
    frames: int
    weight_dtype: torch.dtype
    tokens: int  # generator tokens per video
    batch: int  # model batch per call (2 = cond + uncond batched)
    weights: dict[str, int]  # pathway -> bytes
    activations: int
    text_activations: int  # the text pathway's own peak while it encodes the prompts
    text_kv: int
    history: int  # a step cache's state on the device at its fullest (SeaCache's residual history), 0 without one
    vae_weights: int
    vae_decode: int
    prompt_tokens: tuple[int, ...] = field(default=(512, 512))

    def denoise_bytes(self, text_resident: bool, history_on_device: bool) -> int:
        """Device bytes during the denoising loop: generator (and shared) weights, the text weights only when
        they stay resident, activations, cached text K/V and, on the device, the step cache's history."""
        weights = self.weights[GENERATOR] + self.weights[SHARED] + (self.weights[TEXT] if text_resident else 0)
        return weights + self.activations + self.text_kv + (self.history if history_on_device else 0)

    def encode_bytes(self) -> int:
        """Device bytes while the text pathway computes the prompt K/V (once per prompt and run)."""
        return self.weights[TEXT] + self.weights[SHARED] + self.text_activations + self.text_kv


def run_memory(config: Cosmos3Config, width: int, height: int, frames: int, weight_dtype: torch.dtype = torch.bfloat16,
               compute_dtype: torch.dtype = torch.bfloat16, prompt_tokens: tuple[int, ...] = (512, 512),
               history: int = 0, model: torch.nn.Module | None = None) -> RunMemory:
    """All figures of one setting: ``len(prompt_tokens)`` branches batched in each call (cond + uncond);
    ``history`` is the step cache's own figure for it (see ``SeaCacheConfig.history_bytes``)."""
    model = model if model is not None else meta_model(config, weight_dtype)
    tokens = generator_tokens(config, width, height, frames)
    batch = len(prompt_tokens)
    vae_w, vae_ws = vae_decode_bytes(width, height, compute_dtype)
    return RunMemory(
        width, height, frames, weight_dtype, tokens, batch,
        {k: sum(v.values()) for k, v in weight_bytes(model).items()},
        activation_bytes(config, batch * tokens, compute_dtype),
        activation_bytes(config, batch * max(prompt_tokens), compute_dtype),
        text_kv_bytes(config, list(prompt_tokens), compute_dtype),
        history,
        vae_w, vae_ws, tuple(prompt_tokens),
    )


@dataclass(frozen=True)
class PlanRow:
    """One option of the plan: where the text weights and the history live, the device bytes, whether it fits."""

    label: str
    text_resident: bool
    history_on_device: bool
    denoise: int
    fits: bool


def plan(memory: RunMemory, budget_bytes: int, reserve_bytes: int = GIB) -> list[PlanRow]:
    """The options for a card of ``budget_bytes`` (``reserve_bytes`` kept for the CUDA context and the
    allocator), cheapest change first: everything resident; text pathway offloaded after encoding; both that
    and the residual history on the CPU."""
    usable = budget_bytes - reserve_bytes
    rows = []
    for label, text_resident, history_on_device in (
        ("all resident", True, True),
        ("text offloaded", False, True),
        ("text offloaded, history on CPU", False, False),
    ):
        need = memory.denoise_bytes(text_resident, history_on_device)
        rows.append(PlanRow(label, text_resident, history_on_device, need, need <= usable))
    return rows


def gib(n: int | float) -> str:
    """Bytes as GiB with two decimals."""
    return f"{n / GIB:.2f}"


def nbytes(tensors) -> int:
    """Total bytes of an iterable of tensors (for measured counterparts of these estimates)."""
    return sum(t.numel() * t.element_size() for t in tensors)


__all__ = [
    "GENERATOR", "GIB", "SHARED", "TEXT", "PlanRow", "RunMemory", "activation_bytes", "generator_tokens", "gib",
    "latent_grid", "meta_model", "nbytes", "pathway_of", "plan", "run_memory", "text_kv_bytes", "unread_parameters", "vae_decode_bytes", "weight_bytes",
]
