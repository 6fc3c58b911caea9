"""Cache-DiT (vipshop/cache-dit 1.5.x) on diffusers' Cosmos3 transformer, through Cache-DiT's own API: the subject
sampled (a trained proxy's weights in diffusers' ``Cosmos3OmniTransformer``, or the tiny random reference model),
the Cache-DiT configurations, and a run that counts executed layers itself. ``python -m benchmarks.cachedit_cosmos3``
prints the table; ``tests/test_cachedit_cosmos3.py`` pins what the benchmark relies on.

The published Cosmos3-Nano comparison ran SeaCache against Cache-DiT's DBCache F1B0 (its default shape), F8B8 at
residual threshold 0.12 (its quality setting) and F1B0 with the TaylorSeer calibrator. The pack's Cosmos3 equals
diffusers' (tests/test_cosmos3_parity.py), so a proxy carries over; :func:`run` checks it per run. Sampling is the
way diffusers' Cosmos3 pipeline calls its transformer: one call for the prompt, one for the empty prompt
(``has_separate_cfg``), flow-matching Euler on the pack's sigma schedule (``cosmos3.schedule.reference_sigmas``), CFG.

How Cache-DiT is enabled (its transformer-only interface, no pipeline object):

- ``cache_dit.enable_cache(transformer, cache_config=DBCacheConfig(Fn_compute_blocks, Bn_compute_blocks,
  residual_diff_threshold, max_warmup_steps, num_inference_steps, ...), calibrator_config=...)``. Cache-DiT
  recognises ``Cosmos3OmniTransformer`` by its class name (its "Cosmos" adapter), wraps it in a stand-in pipeline,
  applies its ``Cosmos3OmniPatchFunctor`` (the decoder layers' stream order made (generator, text), so that the
  residual-difference decision follows the denoised tokens) and replaces ``transformer.forward``.
- ``cache_dit.refresh_context(transformer, num_inference_steps=steps)`` before every run: a transformer used
  without a pipeline otherwise carries state from one sampling run into the next (a second run differs from the
  first), which Cache-DiT's documentation says this call is for.
- The replaced ``forward`` takes no ``return_dict`` and always returns the tuple form, while diffusers 0.42.1's
  pipeline passes ``return_dict=False`` (TypeError: ``__patch_transformer_forward__() got an unexpected keyword
  argument 'return_dict'``, Cache-DiT 1.5.1 to 1.5.3). So the call here leaves ``return_dict`` out and accepts
  either form.
- F8B8 reuses layers only on a stack of more than 16; on fewer than 8 Cache-DiT refuses it at the first call
  ("Fn_compute_blocks 8 must be less than the number of transformer blocks N", an AssertionError). The proxies
  have 3 layers, the tiny model 2; the table says so, and runs F1B1 at 0.12 (front and back layer always computed)
  as F8B8's shape on a short stack.
- On a stack this short DBCache has a floor: the front layer runs on every call, so F1B0 with 8 warm-up steps of
  35 computes at least 8 + 27 / 3 = 17 of 35 full calls on a 3-layer proxy (about 2x); 3x and 4x are out of its
  reach there, unlike on Cosmos3-Nano's deep stack.
- Its warm-up default (8 computed steps of 28-50) is scaled to the run: ``round(8 * steps / 35)``.
- "TaylorSeer alone": Cache-DiT has TaylorSeer only as a calibrator of DBCache, and DBCache computes at least one
  front layer (``Fn_compute_blocks must be >= 1``). TaylorSeer's own schedule (compute every ``interval``-th step
  after warm-up, forecast between) is Cache-DiT's static steps-computation mask (``cache_dit.steps_mask``,
  ``steps_computation_policy="static"``) with F1B0 and TaylorSeer order 1: the first layer still runs each step.

Stack calls are counted here, not taken from Cache-DiT's summary: every execution of a decoder layer's generator
MLP (``mlp_moe_gen``, which a cached layer skips) is counted, divided by the layers and by the two calls of a step.
Cache-DiT's own count of cached calls (``cache_dit.summary``) is kept beside the count observed here (calls that
ran fewer than all layers). Cache-DiT and diffusers are imported only when a function needs them.
"""

from __future__ import annotations

import copy
import inspect
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from cosmos3.schedule import reference_sigmas
from seacache_testing.cosmos3_reference import reference_inputs
from seacache_testing.peer_comparison import pair_of

STEPS = 35
FPS = 24.0
RANDOM_CFG = 4.0
CACHE_DIT_WARMUP = 8  # DBCacheConfig's max_warmup_steps default, meant for 28-50 steps


# ----------------------------------------------------------------------------------------------- the model
@dataclass
class Subject:
    """What is sampled: the diffusers transformer (float32, eval), a pair's prompt tokens and the CFG scale, the
    latent shape [C, T, H, W], and for a proxy the pack's own Cosmos3 with the same weights (the parity check)."""

    name: str
    transformer: torch.nn.Module
    latent_shape: tuple[int, int, int, int]
    cfg: float
    prompts: object  # pair -> (prompt tokens, empty-prompt tokens)
    native: torch.nn.Module | None = None
    data: object = None


def diffusers_from_proxy(data) -> tuple[torch.nn.Module, torch.nn.Module]:
    """(diffusers ``Cosmos3OmniTransformer``, the pack's ``Cosmos3Transformer``), both with ``data``'s trained proxy
    weights. The proxy's config keys that diffusers' constructor does not take (``temporal_compression``, 4 as the
    reference inputs assume) are left out; the only weights diffusers has beyond the proxy's are the unused
    ``norm``/``lm_head`` of the language head, which the load must be missing and nothing else."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer

    from cosmos3 import is_unused_key
    from seacache_testing import quality_proxy as proxy

    config = data.config()
    if config.temporal_compression != 4:
        raise ValueError(f"reference_inputs packs 4x temporal compression, the proxy has {config.temporal_compression}")
    accepted = inspect.signature(Cosmos3OmniTransformer.__init__).parameters
    transformer = Cosmos3OmniTransformer(**{k: v for k, v in config.to_dict().items() if k in accepted}).float().eval()
    native = proxy.load_proxy(data.folder, data=data)
    loaded = transformer.load_state_dict(native.state_dict(), strict=False)
    unexpected_missing = [k for k in loaded.missing_keys if not is_unused_key(k)]
    if unexpected_missing or loaded.unexpected_keys:
        raise ValueError(f"proxy weights do not fit diffusers' transformer: missing {unexpected_missing}, "
                         f"unexpected {loaded.unexpected_keys}")
    return transformer, native


def subject(name: str) -> Subject:
    """``natural`` / ``synthetic``: the trained Cosmos3-architecture proxy in diffusers' transformer (pairs as
    the peer benchmark numbers them, ``peer_comparison.pair_of``); ``random``: the tiny random reference model (2 layers, 48 channels) with random
    prompts."""
    if name == "random":
        from seacache_testing.cosmos3_reference import reference_model, tokens

        return Subject(name, reference_model(seed=0), (48, 3, 4, 6), RANDOM_CFG,
                       lambda pair: (tokens(11, 2 + pair), tokens(5, 1000 + pair)))
    from seacache_testing import quality_proxy as proxy

    data = {"natural": proxy.NATURAL, "synthetic": proxy.SYNTHETIC}[name]
    transformer, native = diffusers_from_proxy(data)
    frames = data.latent_shape[1]
    return Subject(name, transformer, data.latent_shape, data.cfg,
                   lambda pair: (data.prompt_tokens(pair_of(data, pair)[0], frames), data.prompt_tokens(None, frames)),
                   native=native, data=data)


def noise_seed(model: Subject, pair: int) -> int:
    """A pair's noise seed (bench_peers' numbering for a proxy)."""
    if model.data is None:
        return pair
    return pair_of(model.data, pair)[1]


# ----------------------------------------------------------------------------------------------- counting
@contextmanager
def layer_runs(transformer):
    """Yields a list that gets, per transformer call, how many decoder layers ran their generator MLP (a layer
    Cache-DiT reuses does not); hooks on the modules, whatever Cache-DiT replaced around them."""
    per_call: list[int] = []
    handles = [transformer.register_forward_pre_hook(lambda *_: per_call.append(0))]

    def count(*_):
        per_call[-1] += 1

    handles += [layer.mlp_moe_gen.register_forward_hook(count) for layer in transformer.layers]
    try:
        yield per_call
    finally:
        for handle in handles:
            handle.remove()


def velocity(transformer, latent, timestep: float, token_ids) -> torch.Tensor:
    """The vision velocity [1, C, T, H, W] of one call, ``return_dict`` left out (see the module docstring)."""
    out = transformer(**reference_inputs(transformer, latent, timestep, token_ids, fps=FPS))
    return (out[0] if isinstance(out, tuple) else out.sample)[0]


def sample(model: Subject, transformer, pair: int, steps: int, shift: float) -> tuple[list[int], torch.Tensor]:
    """(layers run per transformer call, final latent [1, C, T, H, W]) of one pair: flow Euler with CFG, the prompt
    then the empty prompt each step (as diffusers' pipeline calls the transformer)."""
    prompt, empty = model.prompts(pair)
    x = torch.randn(1, *model.latent_shape, generator=torch.Generator().manual_seed(noise_seed(model, pair)))
    sigmas = reference_sigmas(steps, shift)
    with layer_runs(transformer) as per_call, torch.no_grad():
        for i in range(steps):
            t = float(sigmas[i]) * 1000.0
            cond, uncond = velocity(transformer, x, t, prompt), velocity(transformer, x, t, empty)
            x = x + (sigmas[i + 1] - sigmas[i]) * (uncond + model.cfg * (cond - uncond))
    return list(per_call), x


def native_sample(model: Subject, pair: int, steps: int, shift: float) -> torch.Tensor:
    """The same pair by the pack's Cosmos3 (``train_proxy.sample``: cond and uncond in one batch)."""
    from seacache_testing import quality_proxy as proxy

    label, seed = pair_of(model.data, pair)
    return proxy.sample(model.native, label, seed, steps, shift, data=model.data)


# ----------------------------------------------------------------------------------------------- methods
@dataclass(frozen=True)
class CacheDit:
    """One Cache-DiT configuration: DBCache's front/back computed layers and residual threshold, TaylorSeer's order
    (0: no calibrator) and, for TaylorSeer's own schedule, the compute interval of a static steps mask (0: the
    dynamic residual-difference decision)."""

    name: str
    fn: int
    bn: int
    threshold: float
    taylorseer_order: int = 0
    interval: int = 0

    def configs(self, steps: int):
        """(DBCacheConfig, calibrator config or None) for a run of ``steps``."""
        import cache_dit

        warmup = max(1, round(CACHE_DIT_WARMUP * steps / STEPS))
        mask = {}
        if self.interval:
            cycles = -(-(steps - warmup) // self.interval)
            mask = dict(steps_computation_mask=cache_dit.steps_mask(
                compute_bins=[warmup] + [1] * cycles, cache_bins=[self.interval - 1] * cycles, total_steps=steps),
                steps_computation_policy="static")
        cache = cache_dit.DBCacheConfig(Fn_compute_blocks=self.fn, Bn_compute_blocks=self.bn,
                                        residual_diff_threshold=self.threshold, max_warmup_steps=warmup,
                                        num_inference_steps=steps, **mask)
        calibrator = cache_dit.TaylorSeerCalibratorConfig(taylorseer_order=self.taylorseer_order) if self.taylorseer_order else None
        return cache, calibrator

    def cached(self, transformer, steps: int):
        """A copy of ``transformer`` with this configuration enabled through ``cache_dit.enable_cache`` (the
        original stays uncached)."""
        import cache_dit

        copied = copy.deepcopy(transformer)
        cache, calibrator = self.configs(steps)
        cache_dit.enable_cache(copied, cache_config=cache, calibrator_config=calibrator)
        return copied


METHODS = (
    CacheDit("F1B0 @0.08 (DBCache default threshold)", 1, 0, 0.08),
    CacheDit("F8B8 @0.12", 8, 8, 0.12),
    CacheDit("F1B1 @0.12 (F8B8's shape on a short stack)", 1, 1, 0.12),
    CacheDit("F1B0 @0.08 + TaylorSeer order 1", 1, 0, 0.08, taylorseer_order=1),
    CacheDit("TaylorSeer alone (every 2nd step, order 1)", 1, 0, 0.08, taylorseer_order=1, interval=2),
)


def swept(thresholds=(), intervals=()) -> tuple[CacheDit, ...]:
    """More speeds of the published shapes: F1B0 and F1B0 + TaylorSeer at each residual threshold, TaylorSeer's own
    schedule at each compute interval."""
    return (*(CacheDit(f"F1B0 @{t:g}", 1, 0, t) for t in thresholds),
            *(CacheDit(f"F1B0 @{t:g} + TaylorSeer order 1", 1, 0, t, taylorseer_order=1) for t in thresholds),
            *(CacheDit(f"TaylorSeer alone (compute interval {n}, order 1)", 1, 0, 0.08, taylorseer_order=1, interval=n)
              for n in intervals))


def library_cached_calls(transformer) -> int:
    """Cache-DiT's own count of cached calls in the last run (``cache_dit.summary``: the prompt's and the empty
    prompt's cached steps)."""
    import cache_dit

    stats = cache_dit.summary(transformer, details=False) or []
    return sum(len(s.cached_steps or []) + len(s.cfg_cached_steps or []) for s in stats[:1])


# ----------------------------------------------------------------------------------------------- running
def run(model: Subject, methods, pairs, steps: int, shift: float, log=print) -> list[dict]:
    """Per method (uncached first): mean full stack calls per run (of ``steps``), the geometric-mean relative
    error against uncached, the cached calls observed here and by Cache-DiT; a method Cache-DiT refuses gets its
    error text."""
    import cache_dit

    transformer, layers = model.transformer, len(model.transformer.layers)
    references, rows = {}, []
    calls = []
    for pair in pairs:
        per_call, references[pair] = sample(model, transformer, pair, steps, shift)
        calls.append(sum(per_call) / layers / 2)
    rows.append(dict(method="uncached", calls=sum(calls) / len(calls), error=0.0, observed=0, reported=0))
    if model.native is not None:
        parity = max(float((native_sample(model, p, steps, shift) - references[p]).norm() / references[p].norm())
                     for p in pairs)
        log(f"diffusers vs the pack's Cosmos3, uncached: max relative difference {parity:.1e}")
    for method in methods:
        try:
            cached = method.cached(transformer, steps)
        except AssertionError as error:  # Cache-DiT's own refusal (F8B8 on a short stack)
            rows.append(dict(method=method.name, refused=f"AssertionError: {error}"))
            continue
        calls, errors, observed, reported = [], [], 0, 0
        try:
            for pair in pairs:
                cache_dit.refresh_context(cached, num_inference_steps=steps)
                per_call, x = sample(model, cached, pair, steps, shift)
                calls.append(sum(per_call) / layers / 2)
                errors.append(max(float((x - references[pair]).norm() / references[pair].norm()), 1e-12))
                observed += sum(1 for n in per_call if n < layers)
                reported += library_cached_calls(cached)
        except AssertionError as error:  # raised on the first call where Cache-DiT builds its blocks
            rows.append(dict(method=method.name, refused=f"AssertionError: {error}"))
            continue
        geo = float(torch.tensor(errors).log().mean().exp())
        rows.append(dict(method=method.name, calls=sum(calls) / len(calls), error=geo, observed=observed, reported=reported))
    return rows
