"""Parity of the native Cosmos3 transformer with diffusers' reference implementation (fp32, tiny configs)."""

import pytest
import torch

from cosmos3 import Cosmos3Config, Cosmos3Transformer, TextKVCache, TEXT_KV_CACHE_KEY, is_unused_key

from seacache_testing.cosmos3_reference import (
    TINY, VARIANTS, check, native_from, reference_model, reference_velocity, sigma_and_t, tokens,
)

pytest.importorskip("diffusers")

@pytest.fixture(scope="module", params=sorted(VARIANTS))
def pair(request):
    ref = reference_model(seed=0, **VARIANTS[request.param])
    return ref, native_from(ref), request.param


def test_variant_builds_the_reference_modules(pair):
    """Each switch really changes the architecture (same parameter names and shapes as diffusers)."""
    ref, ours, variant = pair
    names = {k: tuple(v.shape) for k, v in ref.state_dict().items() if not is_unused_key(k)}
    assert names == {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    overrides = VARIANTS[variant]
    assert ("layers.0.mlp_moe_gen.gate_proj.weight" in names) == (overrides.get("hidden_act", "silu") == "silu")
    assert ("layers.0.self_attn.add_q_proj.bias" in names) == overrides.get("attention_bias", False)
    assert ("layers.0.self_attn.k_norm_und_for_gen.weight" in names) == overrides.get("use_und_k_norm_for_gen", False)
    assert ("layers.0.self_attn.norm_q.weight" in names) == overrides.get("qk_norm_for_text", True)
    assert ours.config.parameter_count() == sum(v.numel() for k, v in ref.state_dict().items()
                                                if not k.startswith(("lm_head.", "norm.")))


@pytest.mark.parametrize(
    "shape,fps",
    [((3, 4, 6), 24.0), ((1, 4, 4), 24.0), ((2, 5, 7), 16.0), ((3, 6, 3), 30.0)],
    ids=["t2v", "t2i", "odd-fps16", "nonsquare-fps30"],
)
def test_single_item_matches_reference(pair, shape, fps):
    ref, ours, variant = pair
    torch.manual_seed(1)
    latent = torch.randn(1, 48, *shape)
    ids = tokens(11, 2)
    sigma, t = sigma_and_t(0.73)
    expected = reference_velocity(ref, latent, t, ids, fps=fps)
    with torch.no_grad():
        got = ours(latent, sigma, torch.tensor([ids]), fps=fps)
    assert got.shape == expected.shape == latent.shape
    check(got, expected, f"{variant} {'t2i' if shape[0] == 1 else 't2v'} {shape} fps {fps:g}")


def test_i2v_first_frame_conditioned(pair):
    ref, ours, variant = pair
    torch.manual_seed(3)
    latent = torch.randn(1, 48, 3, 4, 4)
    clean = torch.randn(1, 48, 3, 4, 4)
    ids = tokens(9, 4)
    sigma, t = sigma_and_t(0.41)
    ref_input = latent.clone()
    ref_input[:, :, 0] = clean[:, :, 0]
    expected = reference_velocity(ref, ref_input, t, ids, clean_frames=(0,))
    mask = torch.tensor([[1.0, 0.0, 0.0]])
    with torch.no_grad():
        got = ours(latent, sigma, torch.tensor([ids]), fps=24.0, cond_latent=clean, cond_mask=mask)
    assert torch.equal(got[:, :, 0], torch.zeros_like(got[:, :, 0]))
    assert expected[:, :, 0].abs().max() == 0
    check(got, expected, f"{variant} i2v")


def test_batch_with_different_prompt_lengths(pair):
    """cond and uncond of different lengths in one batched call equal two separate reference calls."""
    ref, ours, variant = pair
    torch.manual_seed(5)
    latent = torch.randn(2, 48, 2, 4, 6)
    long_ids, short_ids = tokens(13, 6), tokens(7, 7)
    padded = torch.full((2, 13), -1, dtype=torch.long)
    padded[0] = torch.tensor(long_ids)
    padded[1, :7] = torch.tensor(short_ids)
    sigma = torch.tensor([0.9, 0.9])
    t = (sigma[:1] * 1000.0).item()
    with torch.no_grad():
        got = ours(latent, sigma, padded, fps=24.0)
    for i, ids in enumerate((long_ids, short_ids)):
        expected = reference_velocity(ref, latent[i : i + 1], t, ids)
        check(got[i : i + 1], expected, f"{variant} batch item {i}")


def test_text_kv_cache_gives_identical_results(pair):
    _, ours, _ = pair
    torch.manual_seed(8)
    latent = torch.randn(2, 48, 2, 4, 4)
    ids = torch.tensor([tokens(10, 9), tokens(10, 10)])
    sigma = torch.tensor([0.5, 0.5])
    cache = TextKVCache()
    opts = {TEXT_KV_CACHE_KEY: cache}
    with torch.no_grad():
        plain = ours(latent, sigma, ids, fps=24.0)
        first = ours(latent, sigma, ids, fps=24.0, transformer_options=opts)
        second = ours(latent * 0.5, sigma * 0.5, ids, fps=24.0, transformer_options=opts)
        second_plain = ours(latent * 0.5, sigma * 0.5, ids, fps=24.0)
    assert torch.equal(plain, first)
    assert torch.equal(second, second_plain)
    assert (cache.misses, cache.hits, len(cache)) == (1, 1, 1)


def test_gen_stack_seam_composes_to_forward(pair):
    """prepare -> run_gen_stack -> finish is the whole forward, and the stack residual is what a cache records."""
    _, ours, _ = pair
    torch.manual_seed(11)
    latent = torch.randn(1, 48, 2, 4, 4)
    ids = torch.tensor([tokens(6, 12)])
    sigma = torch.tensor([0.3])
    with torch.no_grad():
        inputs, hidden = ours.prepare(latent, sigma, ids, 24.0)
        out = ours.run_gen_stack(hidden, inputs)
        composed = ours.finish(out, inputs)
        direct = ours(latent, sigma, ids, fps=24.0)
    assert hidden.shape == out.shape == (1, 2 * 2 * 2, TINY["hidden_size"])
    assert torch.equal(composed, direct)
    assert (out - hidden).abs().max() > 0


class HostOps:
    """Host operations without a NemotronRMSNorm of their own (as ComfyUI's ``comfy.ops`` classes)."""

    Linear = torch.nn.Linear
    Embedding = torch.nn.Embedding
    RMSNorm = torch.nn.RMSNorm


def test_relu2_model_built_from_host_ops_matches_reference():
    """A host that supplies only RMSNorm gets a derived Nemotron norm; the relu2 model still matches diffusers."""
    ref = reference_model(seed=4, hidden_act="relu2")
    ours = Cosmos3Transformer(Cosmos3Config.from_dict(dict(ref.config)), operations=HostOps).float().eval()
    ours.load_state_dict({k: v for k, v in ref.state_dict().items() if not is_unused_key(k)}, strict=True)
    assert type(ours.norm_moe_gen).__name__ == "NemotronRMSNorm" and isinstance(ours.norm_moe_gen, torch.nn.RMSNorm)
    torch.manual_seed(2)
    latent, ids = torch.randn(1, 48, 2, 4, 4), tokens(8, 3)
    expected = reference_velocity(ref, latent, 600.0, ids)
    with torch.no_grad():
        check(ours(latent, torch.tensor([0.6]), torch.tensor([ids]), fps=24.0), expected, "relu2 host ops")


@pytest.mark.parametrize("weight_dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("input_dtype", [torch.bfloat16, torch.float32])
def test_nemotron_norm_bit_exact_in_low_precision(weight_dtype, input_dtype):
    """Nemotron norms multiply by the weight in float32 (a bf16 Qwen3 norm rounds to bf16 first): ours and the
    one derived from a host RMSNorm equal diffusers' Cosmos3NemotronRMSNorm bit for bit."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3NemotronRMSNorm

    from cosmos3.ops import NemotronRMSNorm, RMSNorm, nemotron_norm_class

    torch.manual_seed(0)
    weight = 1.0 + 0.3 * torch.randn(64)
    x = (3.0 * torch.randn(2, 7, 64)).to(input_dtype)
    ref = Cosmos3NemotronRMSNorm(64, eps=1e-6)
    ref.weight.data = weight.to(weight_dtype)
    expected = ref(x)
    for cls in (NemotronRMSNorm, nemotron_norm_class(HostOps)):
        norm = cls(64, eps=1e-6, dtype=weight_dtype)
        norm.weight.data.copy_(weight)
        got = norm(x)
        assert got.dtype == input_dtype and torch.equal(got, expected), cls
    if weight_dtype == input_dtype == torch.bfloat16:  # the Qwen3 norm rounds before the product: not the same
        qwen = RMSNorm(64, eps=1e-6, dtype=weight_dtype)
        qwen.weight.data.copy_(weight)
        assert not torch.equal(qwen(x), expected)


@pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="no fp8 dtype in this torch")
def test_fp8_edge_keeps_nemotron_norms_embeddings_and_patch_projections_in_bf16():
    cfg = Cosmos3Config(**{**TINY, "rope_axes_dim": tuple(TINY["rope_axes_dim"]), **VARIANTS["relu2-und-k-norm"]})
    model = Cosmos3Transformer(cfg, device="meta", dtype=torch.float8_e4m3fn)  # meta: torch cannot init fp8
    layer = model.layers[0]
    assert layer.mlp_moe_gen.up_proj.weight.dtype == torch.float8_e4m3fn and not hasattr(layer.mlp_moe_gen, "gate_proj")
    norms = [layer.input_layernorm, layer.self_attn.norm_added_k, layer.self_attn.k_norm_und_for_gen, model.norm_moe_gen]
    assert all(type(n).__name__ == "NemotronRMSNorm" and n.weight.dtype == torch.bfloat16 for n in norms)
    assert model.embed_tokens.weight.dtype == model.proj_in.weight.dtype == torch.bfloat16
    assert model.time_embedder.linear_1.weight.dtype == torch.float32
