"""One Cosmos3 decoder layer: a text (understanding) pathway and a generator pathway over one joint attention."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import Cosmos3Config
from .ops import norm_class, precise_dtype
from .rope import apply_rope


class MLP(nn.Module):
    """Feed-forward block without biases: SwiGLU ``down(silu(gate(x)) * up(x))`` for ``hidden_act="silu"``
    (Qwen3 backbones: Nano, Super), ungated squared ReLU ``down(relu(up(x))**2)`` for ``"relu2"`` (Nemotron: Edge)."""

    def __init__(self, config: Cosmos3Config, ops, device=None, dtype=None):
        super().__init__()
        h, m = config.hidden_size, config.intermediate_size
        self.gated = config.hidden_act == "silu"
        if self.gated:
            self.gate_proj = ops.Linear(h, m, bias=False, device=device, dtype=dtype)
        self.up_proj = ops.Linear(h, m, bias=False, device=device, dtype=dtype)
        self.down_proj = ops.Linear(m, h, bias=False, device=device, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(torch.relu(self.up_proj(x)).square())


class PackedAttention(nn.Module):
    """Projections and per-head QK norms of both pathways (names as in the official checkpoint)."""

    def __init__(self, config: Cosmos3Config, ops, device=None, dtype=None):
        super().__init__()
        h, d, bias = config.hidden_size, config.head_dim, config.attention_bias
        q, kv = config.num_attention_heads * d, config.num_key_value_heads * d
        kw = dict(device=device, dtype=dtype)
        self.to_q = ops.Linear(h, q, bias=bias, **kw)
        self.to_k = ops.Linear(h, kv, bias=bias, **kw)
        self.to_v = ops.Linear(h, kv, bias=bias, **kw)
        self.to_out = ops.Linear(q, h, bias=bias, **kw)
        self.add_q_proj = ops.Linear(h, q, bias=bias, **kw)
        self.add_k_proj = ops.Linear(h, kv, bias=bias, **kw)
        self.add_v_proj = ops.Linear(h, kv, bias=bias, **kw)
        self.to_add_out = ops.Linear(q, h, bias=bias, **kw)
        eps, norm = config.rms_norm_eps, norm_class(ops, config.hidden_act)
        kw = dict(device=device, dtype=precise_dtype(dtype))
        if config.qk_norm_for_text:
            self.norm_q = norm(d, eps=eps, **kw)
            self.norm_k = norm(d, eps=eps, **kw)
        else:
            self.norm_q = self.norm_k = nn.Identity()
        # Without text QK norms a checkpoint may still normalise the text keys the generator reads.
        use_gen_k_norm = config.use_und_k_norm_for_gen and not config.qk_norm_for_text
        self.k_norm_und_for_gen = norm(d, eps=eps, **kw) if use_gen_k_norm else None
        self.norm_added_q = norm(d, eps=eps, **kw)
        self.norm_added_k = norm(d, eps=eps, **kw)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """[B, N, heads*D] -> [B, N, heads, D] (norms act on D before the transpose to [B, heads, N, D])."""
    return x.unflatten(-1, (heads, -1))


class Cosmos3Layer(nn.Module):
    """Decoder layer. The text pathway never reads generator tokens, so its keys/values per layer depend only
    on the prompt (:meth:`text_step`); the generator pathway (:meth:`gen_step`) attends over them."""

    def __init__(self, config: Cosmos3Config, ops, device=None, dtype=None):
        super().__init__()
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        eps, h, norm = config.rms_norm_eps, config.hidden_size, norm_class(ops, config.hidden_act)
        kw = dict(device=device, dtype=dtype)
        self.self_attn = PackedAttention(config, ops, **kw)
        self.mlp = MLP(config, ops, **kw)
        self.mlp_moe_gen = MLP(config, ops, **kw)
        kw = dict(device=device, dtype=precise_dtype(dtype))
        self.input_layernorm = norm(h, eps=eps, **kw)
        self.input_layernorm_moe_gen = norm(h, eps=eps, **kw)
        self.post_attention_layernorm = norm(h, eps=eps, **kw)
        self.post_attention_layernorm_moe_gen = norm(h, eps=eps, **kw)

    def text_modules(self) -> list[nn.Module]:
        """Modules of the text pathway (run once per prompt; its keys/values are cached)."""
        a = self.self_attn
        norms = [m for m in (a.norm_q, a.norm_k, a.k_norm_und_for_gen) if isinstance(m, nn.Module) and not isinstance(m, nn.Identity)]
        return [self.input_layernorm, a.to_q, a.to_k, a.to_v, a.to_out, *norms, self.post_attention_layernorm, self.mlp]

    def generator_modules(self) -> list[nn.Module]:
        """Modules of the generator pathway (run on every computed step)."""
        a = self.self_attn
        return [self.input_layernorm_moe_gen, a.add_q_proj, a.add_k_proj, a.add_v_proj, a.norm_added_q,
                a.norm_added_k, a.to_add_out, self.post_attention_layernorm_moe_gen, self.mlp_moe_gen]

    def text_step(self, und, cos, sin, attention, advance: bool):
        """Keys/values this layer offers the generator ``([B, Hkv, L, D], [B, Hkv, L, D])``, and the text hidden
        states after the layer when ``advance`` (the last layer's text output is never needed)."""
        a = self.self_attn
        x = self.input_layernorm(und)
        k = a.norm_k(_heads(a.to_k(x), self.kv_heads))
        v = _heads(a.to_v(x), self.kv_heads).transpose(1, 2)
        k_gen = a.k_norm_und_for_gen(k) if a.k_norm_und_for_gen is not None else k
        k_gen = apply_rope(k_gen.transpose(1, 2), cos, sin)
        if not advance:
            return None, (k_gen, v)
        q = apply_rope(a.norm_q(_heads(a.to_q(x), self.heads)).transpose(1, 2), cos, sin)
        k = k_gen if a.k_norm_und_for_gen is None else apply_rope(k.transpose(1, 2), cos, sin)
        und = und + a.to_out(attention(q, k, v, causal=True))
        und = und + self.mlp(self.post_attention_layernorm(und))
        return und, (k_gen, v)

    def gen_step(self, gen, text_k, text_v, cos, sin, text_lengths, attention):
        """Generator tokens after this layer: full attention over ``[text K/V ; generator K/V]``, then the MLP.

        With prompts of different lengths (``text_lengths``) each item attends over its own unpadded text keys,
        so no attention mask is ever needed (masks disable fast kernels and some backends ignore them)."""
        a = self.self_attn
        x = self.input_layernorm_moe_gen(gen)
        q = apply_rope(a.norm_added_q(_heads(a.add_q_proj(x), self.heads)).transpose(1, 2), cos, sin)
        k = apply_rope(a.norm_added_k(_heads(a.add_k_proj(x), self.kv_heads)).transpose(1, 2), cos, sin)
        v = _heads(a.add_v_proj(x), self.kv_heads).transpose(1, 2)
        if text_lengths is None:
            out = attention(q, torch.cat((text_k, k), dim=2), torch.cat((text_v, v), dim=2))
        else:
            out = torch.cat([
                attention(q[i : i + 1], torch.cat((text_k[i : i + 1, :, :n], k[i : i + 1]), dim=2),
                          torch.cat((text_v[i : i + 1, :, :n], v[i : i + 1]), dim=2))
                for i, n in enumerate(text_lengths)
            ])
        gen = gen + a.to_add_out(out)
        return gen + self.mlp_moe_gen(self.post_attention_layernorm_moe_gen(gen))
