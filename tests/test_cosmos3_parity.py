"""Parity of the native Cosmos3 transformer with diffusers' reference implementation (fp32, tiny configs)."""

import pytest
import torch

from cosmos3 import Cosmos3Config, Cosmos3Transformer, TextKVCache, TEXT_KV_CACHE_KEY, is_unused_key

from cosmos3_reference import TINY, reference_model, reference_velocity

pytest.importorskip("diffusers")

RTOL = 2e-5


def native_from(ref) -> Cosmos3Transformer:
    """Our model with the reference's weights, loaded by checkpoint key names."""
    cfg = Cosmos3Config.from_dict(dict(ref.config))
    model = Cosmos3Transformer(cfg).float().eval()
    sd = {k: v for k, v in ref.state_dict().items() if not is_unused_key(k)}
    model.load_state_dict(sd, strict=True)
    return model


def rel_err(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def sigma_and_t(sigma: float):
    s = torch.tensor([sigma], dtype=torch.float32)
    return s, (s * 1000.0).item()


@pytest.fixture(scope="module")
def pair():
    ref = reference_model(seed=0)
    return ref, native_from(ref)


def tokens(n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, TINY["vocab_size"], (n,), generator=g).tolist()


@pytest.mark.parametrize(
    "shape,fps",
    [((3, 4, 6), 24.0), ((1, 4, 4), 24.0), ((2, 5, 7), 16.0), ((3, 6, 3), 30.0)],
    ids=["t2v", "t2i", "odd-fps16", "nonsquare-fps30"],
)
def test_single_item_matches_reference(pair, shape, fps):
    ref, ours = pair
    torch.manual_seed(1)
    latent = torch.randn(1, 48, *shape)
    ids = tokens(11, 2)
    sigma, t = sigma_and_t(0.73)
    expected = reference_velocity(ref, latent, t, ids, fps=fps)
    with torch.no_grad():
        got = ours(latent, sigma, torch.tensor([ids]), fps=fps)
    assert got.shape == expected.shape == latent.shape
    assert rel_err(got, expected) < RTOL


def test_i2v_first_frame_conditioned(pair):
    ref, ours = pair
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
    assert rel_err(got, expected) < RTOL


def test_batch_with_different_prompt_lengths(pair):
    """cond and uncond of different lengths in one batched call equal two separate reference calls."""
    ref, ours = pair
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
        assert rel_err(got[i : i + 1], expected) < RTOL


def test_text_kv_cache_gives_identical_results(pair):
    _, ours = pair
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
    _, ours = pair
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
