"""Cache-DiT on diffusers' Cosmos3 transformer (seacache_testing/cachedit_cosmos3.py, which
``python -m benchmarks.cachedit_cosmos3`` runs), through its own API, on the CPU: its DBCache skips decoder layers
that the library counts itself, a threshold of 0 reproduces the uncached run exactly, a refreshed context repeats a
run, F8B8 is refused on a short stack, and the proxy in diffusers' transformer samples what the pack's Cosmos3
samples. Skips without cache-dit (requirements-test.txt pins it) or diffusers."""

import pytest
import torch

pytest.importorskip("diffusers")
cache_dit = pytest.importorskip("cache_dit")

from seacache_testing import cachedit_cosmos3 as bench  # noqa: E402

STEPS = 10
SHIFT = 5.0


@pytest.fixture(scope="module")
def tiny():
    """The tiny random diffusers Cosmos3 (2 layers) and its uncached run of pair 0."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    model = bench.subject("random")
    yield model, bench.sample(model, model.transformer, 0, STEPS, SHIFT)
    torch.set_num_threads(threads)


def cached_run(model, method):
    """(layers run per call, final latent, Cache-DiT's reported cached calls) of pair 0 with ``method``."""
    transformer = method.cached(model.transformer, STEPS)
    cache_dit.refresh_context(transformer, num_inference_steps=STEPS)
    per_call, x = bench.sample(model, transformer, 0, STEPS, SHIFT)
    return per_call, x, bench.library_cached_calls(transformer), transformer


def test_uncached_run_computes_every_layer_of_both_calls(tiny):
    model, (per_call, x) = tiny
    assert per_call == [len(model.transformer.layers)] * (2 * STEPS)
    assert torch.isfinite(x).all()


def test_dbcache_f1b0_skips_layers_it_reports_and_stays_close(tiny):
    model, (_, plain) = tiny
    layers = len(model.transformer.layers)
    per_call, x, reported, _ = cached_run(model, bench.CacheDit("F1B0", 1, 0, 0.08))
    cached = [n for n in per_call if n < layers]
    assert len(per_call) == 2 * STEPS and cached and all(n == 1 for n in cached)  # the front layer always runs
    assert len(cached) == reported
    error = float((x - plain).norm() / plain.norm())
    assert torch.isfinite(x).all() and 0 < error < 0.05, error


def test_threshold_zero_equals_uncached_and_a_refreshed_context_repeats_a_run(tiny):
    model, (_, plain) = tiny
    per_call, x, reported, _ = cached_run(model, bench.CacheDit("never", 1, 0, 0.0))
    assert reported == 0 and torch.equal(x, plain)
    method = bench.CacheDit("F1B0 + TaylorSeer", 1, 0, 0.08, taylorseer_order=1)
    first_calls, first, _, transformer = cached_run(model, method)
    cache_dit.refresh_context(transformer, num_inference_steps=STEPS)
    again_calls, again = bench.sample(model, transformer, 0, STEPS, SHIFT)
    assert again_calls == first_calls and torch.equal(again, first) and not torch.equal(first, plain)


def test_library_count_is_not_layer_executions(tiny):
    """F1B1 on two layers leaves no layer to reuse, yet Cache-DiT's summary counts cached calls: the benchmark
    counts executed layers itself."""
    model, (_, plain) = tiny
    per_call, x, reported, _ = cached_run(model, bench.CacheDit("F1B1", 1, 1, 0.12))
    assert per_call == [2] * (2 * STEPS) and torch.equal(x, plain)
    assert reported > 0


def test_f8b8_refused_on_a_short_stack_and_return_dict_unsupported(tiny):
    model, _ = tiny
    rows = bench.run(model, [bench.CacheDit("F8B8 @0.12", 8, 8, 0.12)], [0], 2, SHIFT, log=lambda *_: None)
    assert rows[1]["refused"] == ("AssertionError: Fn_compute_blocks 8 must be less than the number of "
                                  "transformer blocks 2")
    transformer = bench.CacheDit("F1B0", 1, 0, 0.08).cached(model.transformer, STEPS)
    latent = torch.zeros(1, *model.latent_shape)
    inputs = bench.reference_inputs(transformer, latent, 500.0, model.prompts(0)[0])
    with pytest.raises(TypeError, match="unexpected keyword argument 'return_dict'"):
        transformer(**inputs, return_dict=False)  # how diffusers 0.42.1's pipeline calls it


def test_natural_proxy_in_diffusers_samples_as_the_packs_cosmos3():
    model = bench.subject("natural")
    _, x = bench.sample(model, model.transformer, 0, 4, SHIFT)
    native = bench.native_sample(model, 0, 4, SHIFT)
    assert float((x - native).norm() / native.norm()) < 1e-5
