"""The memory accounting (seacache_testing/memory_plan.py) against independent arithmetic and against real tensors."""

from __future__ import annotations

import pytest
import torch

from cosmos3 import TEXT_KV_CACHE_KEY, Cosmos3Config, Cosmos3Transformer, TextKVCache, patchify, reference_sigmas
from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing.seacache_host import run_stack
from seacache_testing.memory_plan import (
    GENERATOR,
    GIB,
    SHARED,
    TEXT,
    activation_bytes,
    generator_tokens,
    latent_grid,
    meta_model,
    pathway_of,
    plan,
    run_memory,
    text_kv_bytes,
    unread_parameters,
    weight_bytes,
)

NANO = Cosmos3Config()
TINY = dict(hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            intermediate_size=96, vocab_size=512, rope_axes_dim=(6, 5, 5))


@pytest.mark.parametrize("overrides", [{}, TINY, {**TINY, "attention_bias": True},
                                       {**TINY, "qk_norm_for_text": False, "use_und_k_norm_for_gen": True},
                                       {**TINY, "hidden_act": "relu2"}])
def test_parameter_count_equals_meta_model_numel(overrides):
    config = Cosmos3Config(**overrides)
    model = meta_model(config)
    assert config.parameter_count() == sum(p.numel() for p in model.parameters())


def _expected_nano_bytes(linear_elem: int, small_elem: int) -> dict[str, int]:
    """Nano weight bytes from the architecture alone: big matrices at ``linear_elem`` bytes, norms, embeddings
    and patch projections at ``small_elem``, the time embedder in fp32."""
    h, q, kv, d, m, n = 4096, 32 * 128, 8 * 128, 128, 12288, 36
    per_path_linear = h * q + 2 * h * kv + q * h + 3 * h * m  # attention projections + SwiGLU, one pathway
    per_path_norms = 2 * h + 2 * d  # input + post-attention norms, q and k norms
    text = n * (per_path_linear * linear_elem + per_path_norms * small_elem) + 151936 * h * small_elem
    patch = (192 * h + h + h * 192 + 192) * small_elem
    time = (256 * h + h + h * h + h) * 4
    gen = n * (per_path_linear * linear_elem + per_path_norms * small_elem) + patch + h * small_elem + time
    return {TEXT: text, GENERATOR: gen, SHARED: 0}


@pytest.mark.parametrize("dtype, linear_elem, small_elem", [(torch.bfloat16, 2, 2), (torch.float8_e4m3fn, 1, 2),
                                                            (torch.float32, 4, 4)])
def test_nano_weight_bytes_per_pathway(dtype, linear_elem, small_elem):
    split = weight_bytes(meta_model(NANO, dtype))
    assert {k: sum(v.values()) for k, v in split.items()} == _expected_nano_bytes(linear_elem, small_elem)
    if dtype == torch.float8_e4m3fn:  # only the big matrices are fp8
        assert split[GENERATOR][torch.float8_e4m3fn] == 36 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288)
        assert split[GENERATOR][torch.float32] == (256 * 4096 + 4096 + 4096 * 4096 + 4096) * 4


def test_pathways_are_what_each_pathway_reads():
    """Gradients show which parameters the text pathway and the generator call actually read."""
    torch.manual_seed(0)
    config = Cosmos3Config(**TINY)
    model = Cosmos3Transformer(config)
    names = dict(model.named_parameters())
    tokens = torch.tensor([[5, 6, 7, 8, 9], [10, 11, 12, -1, -1]])

    text = model.compute_text_kv(tokens, torch.float32)
    sum(k.sum() + v.sum() for k, v in text.layers).backward()
    read_by_text = {n for n, p in names.items() if p.grad is not None}
    model.zero_grad(set_to_none=True)

    cache = TextKVCache()
    cache.put(TextKVCache.key(tokens, torch.float32),
              type(text)([(k.detach(), v.detach()) for k, v in text.layers], text.lengths))
    x = torch.randn(2, 48, 2, 4, 4)
    model(x, torch.tensor([0.7, 0.7]), tokens, fps=24.0, transformer_options={TEXT_KV_CACHE_KEY: cache}).sum().backward()
    read_by_gen = {n for n, p in names.items() if p.grad is not None}

    classified = {n: pathway_of(n) for n in names}
    assert read_by_gen == {n for n, c in classified.items() if c == GENERATOR}
    text_weights = {n for n, c in classified.items() if c == TEXT}
    assert read_by_text <= text_weights
    # The last layer's text pathway only provides K/V: its queries, output projection and MLP are never read.
    last = f"layers.{config.num_hidden_layers - 1}."
    never_read = {n[len(last):] for n in text_weights - read_by_text}
    assert all(n.startswith(last) for n in text_weights - read_by_text)
    assert set(unread_parameters(model)) == text_weights - read_by_text
    assert never_read == {"self_attn.to_q.weight", "self_attn.to_out.weight", "self_attn.norm_q.weight",
                          "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight",
                          "post_attention_layernorm.weight"}


def test_pathway_of_rejects_unknown_names():
    with pytest.raises(ValueError, match="lm_head.weight"):
        pathway_of("lm_head.weight")


@pytest.mark.parametrize("size, grid, tokens", [((832, 480, 93), (24, 30, 52), 9360),
                                                ((1280, 720, 189), (48, 45, 80), 44160)])
def test_token_counts_match_patchify(size, grid, tokens):
    assert latent_grid(NANO, *size) == grid
    assert generator_tokens(NANO, *size) == tokens
    patches, _ = patchify(torch.zeros(1, 48, *grid), NANO.latent_patch_size)
    assert patches.shape[1] == tokens


def test_text_kv_bytes_match_the_real_cache():
    torch.manual_seed(0)
    config = Cosmos3Config(**TINY)
    model = Cosmos3Transformer(config).to(torch.bfloat16)
    tokens = torch.full((2, 9), -1)
    tokens[0, :9], tokens[1, :4] = torch.arange(9), torch.arange(4)
    with torch.no_grad():
        kv = model.compute_text_kv(tokens, torch.bfloat16)
    measured = sum(t.numel() * t.element_size() for pair in kv.layers for t in pair)
    assert measured == text_kv_bytes(config, [9, 4], torch.bfloat16)
    assert text_kv_bytes(NANO, [512, 512]) == 36 * 2 * 2 * 8 * 512 * 128 * 2


@pytest.mark.parametrize("forecaster, order", [("newton", 0), ("newton", 1), ("newton", 2), ("chebyshev", 1),
                                               ("chebyshev", 2)])
def test_history_bytes_match_a_full_session(forecaster, order):
    config = Cosmos3Config(**TINY)
    cache = SeaCacheConfig(gate="sea", threshold=0.0, order=order, forecaster=forecaster)
    tokens, steps = 24, cache.residuals_kept + 2  # long enough to fill the history
    sigmas = reference_sigmas(steps, 5.0)
    run = SeaCacheRun(cache, sigmas)
    latent = torch.randn(2, 48, 3, 4, 4)
    for i in range(steps):
        hidden = torch.randn(2, tokens, config.hidden_size, dtype=torch.bfloat16)
        run_stack(run, lambda h: h * 1.5, hidden, latent, float(sigmas[i]), ["cond", "uncond"])
    stored = [r for key in ("cond", "uncond") for _, r in run.states[key].history.records]
    measured = sum(r.numel() * r.element_size() for r in stored)
    assert len(stored) == 2 * (12 if forecaster == "chebyshev" else order + 1)
    assert measured == 2 * cache.history_bytes(tokens * config.hidden_size, 2)  # 2 branches, bf16
    assert SeaCacheConfig(order=order, forecaster=forecaster, residual_storage="cpu").history_bytes(100, 2) == 0


def test_activation_estimate_formula():
    assert activation_bytes(NANO, 2 * 9360) == 2 * 9360 * (4 * 4096 + 3 * 12288) * 2
    assert activation_bytes(NANO, 10, torch.float32) == 10 * (4 * 4096 + 3 * 12288) * 4


def test_run_memory_and_plan_add_up():
    history = 2 * SeaCacheConfig(order=1).history_bytes(9360 * NANO.hidden_size, 2)
    m = run_memory(NANO, 832, 480, 93, torch.float8_e4m3fn, prompt_tokens=(300, 600), history=history)
    assert m.tokens == 9360 and m.batch == 2
    assert m.text_kv == text_kv_bytes(NANO, [300, 600])
    assert m.history == history == 2 * 2 * 9360 * 4096 * 2
    assert m.denoise_bytes(text_resident=True, history_on_device=True) == (
        sum(m.weights.values()) + m.activations + m.text_kv + m.history)
    assert m.denoise_bytes(False, False) == m.weights[GENERATOR] + m.activations + m.text_kv
    budget, reserve = 24 * GIB, GIB
    rows = plan(m, budget, reserve)
    assert [r.label for r in rows] == ["all resident", "text offloaded", "text offloaded, history on CPU"]
    assert all(r.fits == (r.denoise <= budget - reserve) for r in rows)
    assert rows[0].denoise > rows[1].denoise > rows[2].denoise
    # fp8 at 832x480x93 fits a 24 GiB card even with every weight resident; bf16 needs the text pathway gone.
    assert rows[0].fits
    bf16 = plan(run_memory(NANO, 832, 480, 93, torch.bfloat16, history=history), budget, reserve)
    assert [r.fits for r in bf16] == [False, True, True]
