"""The Cosmos3 omni transformer for video and image generation, with the generator stack as an explicit seam.

A call runs three steps: :meth:`Cosmos3Transformer.prepare` (patchify, ``proj_in``, time embedding, rotary
tables), :meth:`Cosmos3Transformer.run_gen_stack` (every layer's generator pathway over cached text keys/values;
returns hidden states before ``norm_moe_gen``) and :meth:`Cosmos3Transformer.finish` (``norm_moe_gen``,
``proj_out``, unpatchify, zero velocity on conditioned frames). A step cache wraps ``run_gen_stack`` through
:meth:`Cosmos3Transformer.call_gen_stack`, which a host may override to add its own wrapper mechanism.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .config import Cosmos3Config
from .layers import Cosmos3Layer
from .ops import TorchOps, norm_class, precise_dtype, sdpa_attention
from .rope import rope_cos_sin, text_positions, vision_positions
from .sound import add_sound_modules, check_sound_latent, embed_sound, sound_positions, sound_velocity, split_sound
from .text_kv import TEXT_KV_CACHE_KEY, TextKV, TextKVCache

@dataclass(frozen=True)
class HostValues:
    """A call's small per-item values on the host: each host read of a device tensor waits for the GPU's queue,
    so :func:`read_host_values` reads them in one transfer and every later use (rotary positions, the text K/V
    cache key, a step cache's sigma) takes them from here."""

    sigma: tuple[float, ...]  # [B] noise levels
    token_ids: tuple[int, ...]  # [B * L] prompt tokens, row-major, -1 after each prompt
    batch: int

    @property
    def lengths(self) -> list[int]:
        """Each prompt's token count (ids >= 0)."""
        width = len(self.token_ids) // self.batch
        return [sum(t >= 0 for t in self.token_ids[i * width : (i + 1) * width]) for i in range(self.batch)]


def read_host_values(sigma: torch.Tensor, token_ids: torch.Tensor) -> HostValues:
    """``sigma [B]`` and ``token_ids [B, L]`` read to the host in one transfer (packed as float64, which holds
    every token id and float32 sigma exactly)."""
    packed = torch.cat((sigma.double(), token_ids.flatten().double())).tolist()
    b = sigma.shape[0]
    return HostValues(tuple(packed[:b]), tuple(int(t) for t in packed[b:]), b)


@dataclass
class GenStackInputs:
    """Everything the generator stack and a step cache need for one call, besides the hidden states."""

    latent: torch.Tensor  # the noisy latent, conditioned frames clean, [B, C, T, H, W]
    sigma: torch.Tensor  # [B] noise level of each item
    token_ids: torch.Tensor  # [B, L_max] prompt tokens, -1 after each prompt's end
    cos: torch.Tensor  # [B, N, head_dim] rotary tables of the generator tokens
    sin: torch.Tensor
    grid: tuple[int, int, int]  # patch grid (T, H/2, W/2)
    frame_is_clean: torch.Tensor  # [B, T] bool: conditioned frames (no time embedding, zero velocity)
    transformer_options: dict = field(default_factory=dict)
    host: HostValues | None = None  # sigma and token ids on the host (read once per call)
    sound_frames: int = 0  # sound tokens at the end of the generator sequence (0: video only)
    sound: torch.Tensor | None = None  # the noisy sound latent [B, sound_dim, T_s] (None: video only)


class TimestepEmbedder(nn.Module):
    """Sinusoidal(256, cos first) features of ``t`` through linear-silu-linear, kept in float32."""

    def __init__(self, hidden_size: int, ops, device=None):
        super().__init__()
        self.linear_1 = ops.Linear(256, hidden_size, bias=True, device=device, dtype=torch.float32)
        self.linear_2 = ops.Linear(hidden_size, hidden_size, bias=True, device=device, dtype=torch.float32)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = 128
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
        angles = t.float()[:, None] * freqs[None]
        features = torch.cat((torch.cos(angles), torch.sin(angles)), dim=-1)
        return self.linear_2(F.silu(self.linear_1(features)))


def frame_mask_from(cond_mask: torch.Tensor | None, batch: int, frames: int, device) -> torch.Tensor:
    """Per-frame conditioned flags [B, T] from a mask shaped [B, T], [B, 1, T, 1, 1] or [B, C, T, H, W]."""
    if cond_mask is None:
        return torch.zeros(batch, frames, dtype=torch.bool, device=device)
    m = cond_mask.to(device)
    if m.ndim == 5:
        m = m.amax(dim=(1, 3, 4))
    if m.ndim != 2 or m.shape[1] != frames:
        raise ValueError(f"cond_mask must give one flag per latent frame ({frames}), got shape {tuple(cond_mask.shape)}.")
    if m.shape[0] != batch:
        m = m.repeat(math.ceil(batch / m.shape[0]), 1)[:batch]
    return m > 0.5


LAYER_PATCH_KIND = "double_block"
"""Generator layer ``i`` is replaced by ``transformer_options["patches_replace"]["dit"][(LAYER_PATCH_KIND, i)]``
when present, the way ComfyUI's core DiT models offer their blocks (so block-patch nodes such as skip-layer guidance
work with their "double" layer list). The patch is called ``patch(args, {"original_block": fn})`` and returns a dict
whose ``"img"`` is the layer's output; ``fn(args)`` runs the layer itself. ``args``: ``"img"`` the generator hidden
states [B, N, D]; ``"txt"`` the layer's cached text ``(keys, values)`` [B, Hkv, L, Dh] (read-only); ``"text_lengths"``
each prompt's length when padded, else None; ``"pe"`` the rotary ``(cos, sin)`` of the generator tokens;
``"transformer_options"`` the call's options (with ``block_index``, ``total_blocks`` and ``block_type`` set as core
models set them). Patches run inside the generator stack, so a step cache that reuses the stack skips them too."""


class Cosmos3Transformer(nn.Module):
    """Cosmos3 omni transformer restricted to vision generation (text-to-video/image, image-to-video).

    Parameter names equal the official flat checkpoint keys, so ``transformer/`` shards load directly.
    ``operations`` supplies ``Linear``/``RMSNorm``/``Embedding``; ``attention`` is the attention function.
    """

    def __init__(self, config: Cosmos3Config, operations=TorchOps, attention=sdpa_attention, device=None, dtype=None):
        super().__init__()
        self.config = config
        self.attention = attention
        ops, kw = operations, dict(device=device, dtype=dtype)
        h = config.hidden_size
        self.layers = nn.ModuleList(Cosmos3Layer(config, ops, **kw) for _ in range(config.num_hidden_layers))
        kw = dict(device=device, dtype=precise_dtype(dtype))
        self.embed_tokens = ops.Embedding(config.vocab_size, h, **kw)
        self.norm_moe_gen = norm_class(ops, config.hidden_act)(h, eps=config.rms_norm_eps, **kw)
        self.proj_in = ops.Linear(config.patch_latent_dim, h, bias=True, **kw)
        self.proj_out = ops.Linear(h, config.patch_latent_dim, bias=True, **kw)
        self.time_embedder = TimestepEmbedder(h, ops, device=device)
        if config.sound_gen:
            add_sound_modules(self, config, ops, **kw)

    # ---------------------------------------------------------------- entry point
    def forward(self, x, timestep, token_ids, fps=None, cond_latent=None, cond_mask=None, transformer_options=None,
                sound=None, **kwargs):
        """Velocity ``[B, C, T, H, W]`` for latent ``x`` at noise level ``timestep`` (sigma in [0, 1], [B]).

        ``token_ids [B, L]`` are the prompt tokens (-1 pads shorter prompts at the end); ``fps`` [B] or a number
        (None: no fps modulation); ``cond_latent``/``cond_mask`` give clean frames for image-to-video: flagged
        frames are replaced by ``cond_latent``, get no time embedding and a zero velocity. With a sound latent
        ``sound [B, sound_dim, T_s]`` (``sound_gen`` checkpoints) both are denoised together and the result is the
        pair (video velocity, sound velocity ``[B, sound_dim, T_s]``).
        """
        inputs, hidden = self.prepare(x, timestep, token_ids, fps, cond_latent, cond_mask, transformer_options or {},
                                      sound)
        return self.finish(self.call_gen_stack(hidden, inputs), inputs)

    # ---------------------------------------------------------------- step 1
    def prepare(self, x, timestep, token_ids, fps=None, cond_latent=None, cond_mask=None, transformer_options=None,
                sound=None):
        """Generator hidden states after ``proj_in`` + time embedding (sound tokens last when ``sound`` is given),
        and the :class:`GenStackInputs`."""
        cfg, (b, c, t) = self.config, x.shape[:3]
        if c != cfg.latent_channel:
            raise ValueError(f"Cosmos3 expects {cfg.latent_channel} latent channels, got {c} (shape {tuple(x.shape)}).")
        if sound is not None:
            check_sound_latent(cfg, sound, b)
        token_ids = _batch_rows(token_ids.long(), b)
        clean = frame_mask_from(cond_mask, b, t, x.device)
        if cond_latent is not None:
            x = torch.where(clean[:, None, :, None, None], _batch_rows(cond_latent.to(x), b), x)
        patches, grid = patchify(x, cfg.latent_patch_size)
        hidden = self.proj_in(patches)
        sigma = _batch_rows(timestep.reshape(-1).float(), b)
        temb = self.time_embedder((sigma * 1000.0) * cfg.timestep_scale).to(hidden.dtype)
        noisy = (~clean).repeat_interleave(grid[1] * grid[2], dim=1)
        hidden = hidden + torch.where(noisy[..., None], temb[:, None, :], torch.zeros_like(temb[:, None, :]))
        host = read_host_values(sigma, token_ids)
        fps_rows = _fps_rows(fps, b)
        positions = torch.stack(
            [vision_positions(cfg, n, grid, f, x.device) for n, f in zip(host.lengths, fps_rows)]
        )
        sound_frames = 0 if sound is None else sound.shape[2]
        if sound_frames:
            sound = _batch_rows(sound, b)
            hidden = torch.cat((hidden, embed_sound(self, sound, temb, hidden.dtype)), dim=1)
            audio = torch.stack([sound_positions(cfg, n, sound_frames, x.device) for n in host.lengths])
            positions = torch.cat((positions, audio), dim=2)
        cos, sin = rope_cos_sin(cfg, positions, hidden.dtype)
        options = transformer_options or {}
        inputs = GenStackInputs(x, sigma, token_ids, cos, sin, grid, clean, options, host,
                                sound_frames=sound_frames, sound=sound)
        return inputs, hidden

    # ---------------------------------------------------------------- step 2
    def call_gen_stack(self, hidden: torch.Tensor, inputs: GenStackInputs) -> torch.Tensor:
        """The seam a step cache wraps; hosts override it to dispatch through their wrapper mechanism."""
        return self.run_gen_stack(hidden, inputs)

    def run_gen_stack(self, hidden: torch.Tensor, inputs: GenStackInputs) -> torch.Tensor:
        """All layers' generator pathway; returns the generator hidden states before ``norm_moe_gen``."""
        options = inputs.transformer_options
        host_ids = inputs.host.token_ids if inputs.host is not None else None
        text = self.text_kv(inputs.token_ids, hidden.dtype, options, host_ids)
        attention = self.bind_attention(options)
        replace = options.get("patches_replace", {}).get("dit", {})
        options["total_blocks"], options["block_type"] = len(self.layers), "double"
        for i, (layer, (k, v)) in enumerate(zip(self.layers, text.layers)):
            options["block_index"] = i
            patch = replace.get((LAYER_PATCH_KIND, i))
            if patch is None:
                hidden = layer.gen_step(hidden, k, v, inputs.cos, inputs.sin, text.lengths, attention)
            else:
                args = {"img": hidden, "txt": (k, v), "text_lengths": text.lengths, "pe": (inputs.cos, inputs.sin),
                        "transformer_options": options}
                hidden = patch(args, {"original_block": functools.partial(self._original_layer, layer)})["img"]
        return hidden

    def _original_layer(self, layer: Cosmos3Layer, args: dict) -> dict:
        """One layer's generator pathway on a block-replace patch's ``args`` (see :data:`LAYER_PATCH_KIND`)."""
        (k, v), (cos, sin) = args["txt"], args["pe"]
        attention = self.bind_attention(args["transformer_options"])
        return {"img": layer.gen_step(args["img"], k, v, cos, sin, args["text_lengths"], attention)}

    def bind_attention(self, transformer_options: dict):
        """The attention function for this call's generator layers; hosts whose attention reads per-call options
        (ComfyUI's attention-override nodes) override this to pass them along."""
        return self.attention

    def text_kv(self, token_ids: torch.Tensor, dtype: torch.dtype, transformer_options: dict | None = None,
                host_ids: tuple[int, ...] | None = None) -> TextKV:
        """Per-layer text keys/values for a padded prompt batch, from the run's cache when one is provided
        (``host_ids``: the token ids already on the host, so the look-up reads nothing from the device)."""
        cache: TextKVCache | None = (transformer_options or {}).get(TEXT_KV_CACHE_KEY)
        key = TextKVCache.key(token_ids, dtype, host_ids) if cache is not None else None
        entry = cache.get(key) if cache is not None else None
        if entry is None:
            entry = self.compute_text_kv(token_ids, dtype)
            if cache is not None:
                cache.put(key, entry)
        return entry

    def compute_text_kv(self, token_ids: torch.Tensor, dtype: torch.dtype) -> TextKV:
        """Run the text pathway (causal attention over the prompt) and collect each layer's keys/values."""
        lengths = (token_ids >= 0).sum(dim=1)
        und = self.embed_text(token_ids.clamp(min=0), dtype)
        positions = text_positions(token_ids.shape[1], token_ids.device)
        cos, sin = rope_cos_sin(self.config, positions.unsqueeze(0), dtype)
        kv, last = [], len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            und, layer_kv = layer.text_step(und, cos, sin, self.attention, advance=i < last)
            kv.append(layer_kv)
        lengths = lengths.tolist()
        return TextKV(kv, lengths if min(lengths) < token_ids.shape[1] else None)

    def embed_text(self, token_ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Token embeddings in the compute dtype (hosts with cast-on-the-fly embeddings override this)."""
        return self.embed_tokens(token_ids).to(dtype)

    # ---------------------------------------------------------------- step 3
    def finish(self, hidden: torch.Tensor, inputs: GenStackInputs) -> torch.Tensor:
        """Velocity from the stack output: final norm, projection, unpatchify, zero on conditioned frames; with
        sound tokens, the pair (video velocity, sound velocity)."""
        hidden, sound_hidden = split_sound(self.norm_moe_gen(hidden), inputs.sound_frames)
        out = self.proj_out(hidden)
        _, _, _, hgt, wid = inputs.latent.shape
        v = unpatchify(out, inputs.grid, self.config.latent_patch_size, self.config.latent_channel, (hgt, wid))
        clean = inputs.frame_is_clean[:, None, :, None, None]
        v = torch.where(clean, torch.zeros((), dtype=v.dtype, device=v.device), v)
        return v if sound_hidden is None else (v, sound_velocity(self, sound_hidden))


def activation_bytes(config: Cosmos3Config, tokens: int, dtype: torch.dtype = torch.bfloat16) -> int:
    """Estimated activation peak of one model call over ``tokens`` generator tokens (all batch items).

    This is the one activation model of the pack (the ComfyUI model's ``memory_required``, the memory plan in
    ``seacache_testing/memory_plan.py`` and the benchmarks use it): it is derived from the layer's code rather than
    fitted, and the GPU benchmark prints the measured peak beside it. The peak is inside a layer's MLP: the stack
    input (held for the residual), the layer input, the hidden states after attention, the normalised MLP input (4 x hidden) and silu(gate), up and their product
    (3 x intermediate) per token. Attention is assumed memory-efficient (no tokens^2 matrix), as with
    PyTorch SDPA flash/efficient kernels; matmul workspaces are not counted."""
    elem = torch.empty((), dtype=dtype).element_size()
    return tokens * (4 * config.hidden_size + 3 * config.intermediate_size) * elem


def patchify(x: torch.Tensor, p: int) -> tuple[torch.Tensor, tuple[int, int, int]]:
    """[B, C, T, H, W] -> tokens [B, T*H'*W', p*p*C] (features ordered (ph, pw, c)); odd sizes are zero-padded."""
    b, c, t, h, w = x.shape
    x = F.pad(x, (0, (-w) % p, 0, (-h) % p))
    hp, wp = x.shape[3] // p, x.shape[4] // p
    x = x.reshape(b, c, t, hp, p, wp, p).permute(0, 2, 3, 5, 4, 6, 1)
    return x.reshape(b, t * hp * wp, p * p * c), (t, hp, wp)


def unpatchify(tokens: torch.Tensor, grid, p: int, channels: int, size: tuple[int, int]) -> torch.Tensor:
    """Inverse of :func:`patchify`, cropping the padding back to ``size`` (H, W)."""
    b, (t, hp, wp) = tokens.shape[0], grid
    x = tokens.reshape(b, t, hp, wp, p, p, channels).permute(0, 6, 1, 2, 4, 3, 5)
    return x.reshape(b, channels, t, hp * p, wp * p)[:, :, :, : size[0], : size[1]]


def _batch_rows(t: torch.Tensor, batch: int) -> torch.Tensor:
    """Repeat a per-item tensor whose batch divides ``batch`` (ComfyUI may batch conds of repeated items)."""
    if t.shape[0] == batch:
        return t
    if batch % t.shape[0]:
        raise ValueError(f"Cannot match a batch of {t.shape[0]} to {batch} latent items.")
    return t.repeat(batch // t.shape[0], *([1] * (t.ndim - 1)))


def _fps_rows(fps, batch: int) -> list[float | None]:
    """fps per item as Python floats (None: no fps modulation)."""
    if fps is None:
        return [None] * batch
    rows = [float(v) for v in fps.reshape(-1).tolist()] if isinstance(fps, torch.Tensor) else [float(fps)]
    return rows if len(rows) == batch else (rows * batch)[:batch]
