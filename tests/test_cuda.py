"""GPU paths of the native Cosmos3 and SeaCache (``pytest -m cuda``; skipped without a CUDA device).

Tolerances (relative error = max |out - ref| / max |ref| of the velocity):
- bf16 compute vs fp32 on the same (bf16-representable) weights: below 3e-2.
- fp8 e4m3fn storage + bf16 compute vs fp32 on the same fp8-rounded weights: below 3e-2 (only the compute
  dtype differs); vs fp32 on the unrounded weights: below 0.15 (fp8 keeps 3 mantissa bits; 0.06 measured on
  the CPU, bf16 vs fp32 0.009).
- torch.compile (inductor) vs eager, fp32: below 1e-3, with the same gate decisions.
"""

from __future__ import annotations

import contextlib

import pytest
import torch

from cosmos3 import TEXT_KV_CACHE_KEY, Cosmos3Config, TextKVCache, reference_sigmas
from seacache_testing.cosmos3_random_weights import random_model
from seacache_core import SeaCacheConfig, SeaCacheRun

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device: the GPU checks (bf16/fp8 kernels, "
                       "torch.compile, host syncs) run on a CUDA machine with `pytest -m cuda`"),
]

CONFIG = Cosmos3Config(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, head_dim=32,
                       intermediate_size=768, vocab_size=1024, rope_axes_dim=(6, 5, 5))
LATENT = (1, 48, 5, 12, 16)  # 5 latent frames of 12x16 -> 240 generator tokens per item
STEPS = 8
DEVICE = "cuda"


def rel(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()


def inputs(device):
    """Noise, cond/uncond prompt tokens of different lengths (so per-item attention runs), fp32."""
    gen = torch.Generator(device="cpu").manual_seed(5)
    noise = torch.randn(LATENT, generator=gen).to(device)
    tokens = torch.full((2, 40), -1, dtype=torch.long)
    tokens[0, :40] = torch.randint(0, CONFIG.vocab_size, (40,), generator=gen)
    tokens[1, :23] = torch.randint(0, CONFIG.vocab_size, (23,), generator=gen)
    return noise, tokens.to(device)


class Host:
    """Routes the model's stack seam through a session (None: plain stack)."""

    def __init__(self, model, session):
        self.model, self.session = model, session

    def __call__(self, hidden, inp):
        if self.session is None:
            return self.model.run_gen_stack(hidden, inp)
        return self.session.run(lambda h: self.model.run_gen_stack(h, inp), hidden, inp.latent,
                                inp.host.sigma[0], ["cond", "uncond"])


def sample(model, noise, tokens, dtype, session=None, call=None, steps=STEPS):
    """Euler flow sampling with CFG 6 (cond + uncond batched); returns the final latent (fp32)."""
    sigmas = reference_sigmas(steps, 5.0)
    model.call_gen_stack = Host(model, session)
    options = {TEXT_KV_CACHE_KEY: TextKVCache()}
    call = model if call is None else call
    x = noise.clone()
    try:
        with torch.no_grad():
            for i in range(steps):
                v = call(x.to(dtype).expand(2, -1, -1, -1, -1), sigmas[i].to(x.device).expand(2), tokens, fps=24.0,
                         transformer_options=options).float()
                x = x + (sigmas[i + 1] - sigmas[i]).item() * (v[1:] + 6.0 * (v[:1] - v[1:]))
    finally:
        del model.call_gen_stack
    return x


def velocity(model, noise, tokens, dtype, sigma=0.6):
    with torch.no_grad():
        return model(noise.to(dtype).expand(2, -1, -1, -1, -1), torch.full((2,), sigma, device=noise.device),
                     tokens, fps=24.0).float()


def test_bf16_forward_matches_fp32():
    noise, tokens = inputs(DEVICE)
    ref_model = random_model(CONFIG, torch.float32, DEVICE, seed=1)
    bf16 = random_model(CONFIG, torch.bfloat16, DEVICE, seed=1)
    ref_model.load_state_dict({k: v.float() for k, v in bf16.state_dict().items()})  # same weights, fp32 compute
    ref = velocity(ref_model, noise, tokens, torch.float32)
    assert rel(velocity(bf16, noise, tokens, torch.bfloat16), ref) < 3e-2


def test_fp8_storage_matches_fp32():
    noise, tokens = inputs(DEVICE)
    exact = random_model(CONFIG, torch.float32, DEVICE, seed=2)
    fp8 = random_model(CONFIG, torch.float8_e4m3fn, DEVICE, seed=2)
    assert fp8.layers[0].mlp_moe_gen.up_proj.weight.dtype == torch.float8_e4m3fn
    assert fp8.layers[0].input_layernorm_moe_gen.weight.dtype == torch.bfloat16
    rounded = random_model(CONFIG, torch.float32, DEVICE, seed=2)
    rounded.load_state_dict({k: v.float() for k, v in fp8.state_dict().items()})
    out = velocity(fp8, noise, tokens, torch.bfloat16)
    assert rel(out, velocity(rounded, noise, tokens, torch.float32)) < 3e-2
    assert rel(out, velocity(exact, noise, tokens, torch.float32)) < 0.15


def test_threshold_zero_is_bit_identical_to_uncached():
    noise, tokens = inputs(DEVICE)
    model = random_model(CONFIG, torch.bfloat16, DEVICE, seed=3)
    plain = sample(model, noise, tokens, torch.bfloat16)
    session = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=0.0), reference_sigmas(STEPS, 5.0))
    cached = sample(model, noise, tokens, torch.bfloat16, session)
    assert session.stats.reused == 0 and session.stats.calls == STEPS
    assert torch.equal(cached, plain)


def test_residual_history_on_cpu_matches_device_history():
    noise, tokens = inputs(DEVICE)
    model = random_model(CONFIG, torch.bfloat16, DEVICE, seed=4)
    results = {}
    for storage in ("compute", "cpu"):
        session = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=100.0, residual_storage=storage), reference_sigmas(STEPS, 5.0))
        out = sample(model, noise, tokens, torch.bfloat16, session)
        records = session.states["cond"].history.records
        assert records and all(r.device.type == ("cpu" if storage == "cpu" else DEVICE) for _, r in records)
        results[storage] = (session.stats.reused, out)
    assert results["cpu"][0] > 0
    assert results["cpu"][0] == results["compute"][0]
    assert torch.equal(results["cpu"][1], results["compute"][1])


@pytest.mark.parametrize("scope", ["model", "layers"])
def test_torch_compile_still_gates(scope):
    noise, tokens = inputs(DEVICE)
    model = random_model(CONFIG, torch.float32, DEVICE, seed=5)
    config = SeaCacheConfig(gate="sea", threshold=0.5)
    eager_session = SeaCacheRun(config, reference_sigmas(STEPS, 5.0))
    eager = sample(model, noise, tokens, torch.float32, eager_session)
    torch._dynamo.reset()
    if scope == "model":
        call = torch.compile(model, backend="inductor")
    else:
        for layer in model.layers:
            layer.gen_step = torch.compile(layer.gen_step, backend="inductor")
        call = None
    compiled_session = SeaCacheRun(config, reference_sigmas(STEPS, 5.0))
    try:
        compiled = sample(model, noise, tokens, torch.float32, compiled_session, call=call)
    finally:
        for layer in model.layers:
            layer.__dict__.pop("gen_step", None)
    decisions = [r.decision for r in compiled_session.stats.records]
    assert compiled_session.stats.reused > 0
    assert decisions == [r.decision for r in eager_session.stats.records]
    assert rel(compiled, eager) < 1e-3


@contextlib.contextmanager
def sync_debug(mode):
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode(mode)
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def allow_syncs(fn):
    """``fn`` with host syncs allowed (the gate reads its distances on the host by design)."""
    def wrapped(*args, **kwargs):
        with sync_debug(0):
            return fn(*args, **kwargs)
    return wrapped


def test_no_host_sync_in_the_layer_loop_beyond_the_gate():
    noise, tokens = inputs(DEVICE)
    model = random_model(CONFIG, torch.bfloat16, DEVICE, seed=6)
    with sync_debug("error"), pytest.raises(RuntimeError):
        noise.sum().item()  # the debug mode does catch a sync
    sigmas = reference_sigmas(STEPS, 5.0)
    options = {TEXT_KV_CACHE_KEY: TextKVCache()}
    session = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=100.0), sigmas)
    decide = allow_syncs(session.decide)

    def decide_allowing_syncs(*args, **kwargs):
        call = decide(*args, **kwargs)
        call.predict, call.commit = allow_syncs(call.predict), allow_syncs(call.commit)
        return call

    session.decide = decide_allowing_syncs
    with torch.no_grad():
        for i in range(STEPS):
            x = noise.to(torch.bfloat16).expand(2, -1, -1, -1, -1)
            inp, hidden = model.prepare(x, sigmas[i].to(DEVICE).expand(2), tokens, 24.0, transformer_options=options)
            text = model.text_kv(inp.token_ids, hidden.dtype, options)  # a per-call cache lookup (keyed on the host)
            sigma = inp.host.sigma[0]

            def stack(h):
                for layer, (k, v) in zip(model.layers, text.layers):
                    h = layer.gen_step(h, k, v, inp.cos, inp.sin, text.lengths, model.attention)
                return h

            with sync_debug("error"):
                out = session.run(stack, hidden, inp.latent, sigma, ["cond", "uncond"])
                model.finish(out, inp)
    assert session.stats.reused > 0  # both the computed and the reused path ran under the check


def test_host_syncs_per_cached_model_call():
    """At most two host waits per model call: the call's sigma and prompt tokens, and the gate's decision (the
    text pathway's prompt lengths add one per run). The sites are named when it fails."""
    import warnings
    from collections import Counter

    noise, tokens = inputs(DEVICE)
    model = random_model(CONFIG, torch.bfloat16, DEVICE, seed=7)
    sigmas = reference_sigmas(STEPS, 5.0)
    session = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=0.5, residual_storage="cpu"), sigmas)
    model.call_gen_stack = Host(model, session)
    options = {TEXT_KV_CACHE_KEY: TextKVCache()}
    x, sites = noise.clone(), Counter()
    try:
        with torch.no_grad():
            for i in range(STEPS):
                sigma = sigmas[i].to(DEVICE).expand(2).clone()
                torch.cuda.synchronize()
                with warnings.catch_warnings(record=True) as caught, sync_debug("warn"):
                    warnings.simplefilter("always")
                    v = model(x.to(torch.bfloat16).expand(2, -1, -1, -1, -1), sigma, tokens, fps=24.0,
                              transformer_options=options).float()
                sites.update(f"{w.filename.rsplit('/', 2)[-1]}:{w.lineno}" for w in caught if "synchroniz" in str(w.message))
                x = x + (sigmas[i + 1] - sigmas[i]).item() * (v[1:] + 6.0 * (v[:1] - v[1:]))
    finally:
        del model.call_gen_stack
    assert session.stats.reused > 0
    assert sum(sites.values()) <= 2 * STEPS + 1, sites
