"""Core model patches on this pack's Cosmos3 in a real ComfyUI (needs COMFYUI_PATH): block-replace patches
(``patches_replace["dit"]``, e.g. core skip-layer guidance) reach each generator layer, and LoRA files in
ComfyUI's, kohya's and diffusers/PEFT key formats load through core ``LoraLoaderModelOnly``."""

import pytest
import torch

from seacache_testing.anymodel_runs import last_report
from seacache_testing.comfy_runs import rel

STEPS = 8


def _with_replace(model, patch, layers):
    patched = model.clone()
    for i in layers:
        patched.set_model_patch_replace(patch, "dit", "double_block", i)
    return patched


def test_block_replace_patch_runs_each_layer_and_identity_is_exact(tiny):
    seen = []

    def identity(args, extra):
        seen.append(args["transformer_options"]["block_index"])
        return extra["original_block"](args)

    layers = len(tiny.model.model.diffusion_model.layers)
    plain = tiny.sample(tiny.model, steps=STEPS)
    patched = _with_replace(tiny.model, identity, range(layers))
    assert torch.equal(tiny.sample(patched, steps=STEPS), plain)
    assert seen == list(range(layers)) * STEPS  # one batched cond+uncond call per step


def _skip_layer_guidance(tiny, model):
    tiny.ns.load_extra_nodes("nodes_slg.py")
    return tiny.ns.run_node("SkipLayerGuidanceDiT", model=model, double_layers="1", single_layers="", scale=3.0,
                            start_percent=0.0, end_percent=1.0, rescaling_scale=0.0).outputs[0]


def test_core_skip_layer_guidance_changes_cosmos3(tiny):
    """SkipLayerGuidanceDiT's skipped-layer call used to run every layer on Cosmos3 (its patch was ignored), so
    its guidance term was zero; it now skips the named layer and changes the result."""
    plain = tiny.sample(tiny.model, steps=STEPS)
    assert rel(tiny.sample(_skip_layer_guidance(tiny, tiny.model), steps=STEPS), plain) > 1e-2


def test_skip_layer_guidance_with_seacache_on_cosmos3(tiny):
    """SeaCache before or after skip-layer guidance: threshold 0 is bit-identical to the guided graph without
    SeaCache; at the default threshold SeaCache reuses and its error stays within 1.5x of its own on the plain graph."""
    from seacache_testing.composition_cases import rel_error

    steps = 12
    plain, guided = tiny.sample(tiny.model, steps=steps), tiny.sample(_skip_layer_guidance(tiny, tiny.model), steps=steps)
    alone = tiny.seacache()
    error_alone = rel_error(tiny.sample(alone, steps=steps), plain)
    for build in (lambda **kw: _skip_layer_guidance(tiny, tiny.seacache(**kw)),
                  lambda **kw: tiny.seacache(_skip_layer_guidance(tiny, tiny.model), **kw)):
        assert torch.equal(tiny.sample(build(threshold=0.0), steps=steps), guided)
        cached = build()
        error = rel_error(tiny.sample(cached, steps=steps), guided)
        report = last_report(cached)
        print(f"\nCosmos3 + SkipLayerGuidanceDiT: error {error:.4f} (reused {report['reused']}/{report['calls']}), "
              f"SeaCache alone {error_alone:.4f} (reused {last_report(alone)['reused']})")
        assert report["reused"] > 0 and error <= 1.5 * error_alone


def test_seacache_skips_block_patches_with_the_stack(tiny):
    """The Cosmos3 seam wraps the whole generator stack: a block patch (added before or after SeaCache Apply) runs
    on computed calls only, threshold 0 is bit-identical to the patched graph without SeaCache."""
    calls = []

    def identity(args, extra):
        calls.append(args["transformer_options"]["block_index"])
        return extra["original_block"](args)

    plain = tiny.sample(_with_replace(tiny.model, identity, [1]), steps=STEPS)
    for before in (True, False):
        base = _with_replace(tiny.model, identity, [1]) if before else tiny.model
        exact = tiny.seacache(base, threshold=0.0)
        exact = exact if before else _with_replace(exact, identity, [1])
        assert torch.equal(tiny.sample(exact, steps=STEPS), plain)
        cached = tiny.seacache(base)
        cached = cached if before else _with_replace(cached, identity, [1])
        calls.clear()
        tiny.sample(cached, steps=STEPS)
        report = last_report(cached)
        assert report["reused"] > 0 and len(calls) == report["ran"]


# --------------------------------------------------------------------------- LoRA
RANK, ALPHA, STRENGTH = 2, 1.0, 0.7
GEN_MODULES = ("layers.0.self_attn.add_q_proj", "layers.1.mlp_moe_gen.up_proj")
TEXT_MODULES = ("layers.0.self_attn.to_k", "layers.0.self_attn.to_v")
LORA_FORMATS = {  # format -> (key of the up/B matrix, key of the down/A matrix, key of alpha or None) per module name
    "comfyui": (lambda n: f"diffusion_model.{n}.lora_up.weight", lambda n: f"diffusion_model.{n}.lora_down.weight", lambda n: f"diffusion_model.{n}.alpha"),
    "kohya": (lambda n: f"lora_unet_{n.replace('.', '_')}.lora_up.weight", lambda n: f"lora_unet_{n.replace('.', '_')}.lora_down.weight", lambda n: f"lora_unet_{n.replace('.', '_')}.alpha"),
    "diffusers": (lambda n: f"transformer.{n}.lora_B.weight", lambda n: f"transformer.{n}.lora_A.weight", None),
    "diffusers_alpha": (lambda n: f"transformer.{n}.lora_B.weight", lambda n: f"transformer.{n}.lora_A.weight", lambda n: f"transformer.{n}.alpha"),
    "peft": (lambda n: f"base_model.model.{n}.lora_B.weight", lambda n: f"base_model.model.{n}.lora_A.weight", None),
    "unprefixed": (lambda n: f"{n}.lora_B.weight", lambda n: f"{n}.lora_A.weight", None),
}


def _lora_matrices(dm, modules, seed):
    generator = torch.Generator().manual_seed(seed)
    out = {}
    for name in modules:
        weight = dm.get_submodule(name).weight
        out[name] = (torch.randn(weight.shape[0], RANK, generator=generator) * 0.5,
                     torch.randn(RANK, weight.shape[1], generator=generator) * 0.5)
    return out


def _write_lora(path, fmt, matrices):
    from safetensors.torch import save_file

    up, down, alpha = LORA_FORMATS[fmt]
    tensors = {}
    for name, (b, a) in matrices.items():
        tensors[up(name)], tensors[down(name)] = b.contiguous(), a.contiguous()
        if alpha is not None:
            tensors[alpha(name)] = torch.tensor(ALPHA)
    save_file(tensors, str(path))


@pytest.fixture(scope="module")
def lora_dir(tiny, tmp_path_factory):
    """A loras folder with one file per key format (generator modules) and a text-pathway-only LoRA."""
    root = tmp_path_factory.mktemp("loras")
    dm = tiny.model.model.diffusion_model
    gen = _lora_matrices(dm, GEN_MODULES, seed=11)
    for fmt in LORA_FORMATS:
        _write_lora(root / f"gen_{fmt}.safetensors", fmt, gen)
    text = _lora_matrices(dm, TEXT_MODULES, seed=12)
    _write_lora(root / "text_diffusers.safetensors", "diffusers", text)
    tiny.ns.folder_paths.add_model_folder_path("loras", str(root), is_default=True)
    return {"gen": gen, "text": text}


def _load_lora(tiny, model, name, strength=STRENGTH):
    return tiny.ns.run_node("LoraLoaderModelOnly", model=model, lora_name=name, strength_model=strength).outputs[0]


@pytest.mark.parametrize("fmt", list(LORA_FORMATS))
def test_lora_formats_load_with_the_exact_delta(tiny, lora_dir, fmt, caplog):
    import comfy.lora

    with caplog.at_level("WARNING"):
        patched = _load_lora(tiny, tiny.model, f"gen_{fmt}.safetensors")
    assert not [r for r in caplog.records if "lora key not loaded" in r.getMessage()]
    dm = tiny.model.model.diffusion_model
    scale = STRENGTH * (ALPHA / RANK if LORA_FORMATS[fmt][2] is not None else 1.0)
    assert sorted(patched.patches) == sorted(f"diffusion_model.{n}.weight" for n in GEN_MODULES)
    for name, (b, a) in lora_dir["gen"].items():
        key, weight = f"diffusion_model.{name}.weight", dm.get_submodule(name).weight.detach()
        got = comfy.lora.calculate_weight(patched.patches[key], weight.clone().float(), key)
        assert torch.allclose(got - weight.float(), scale * (b @ a), rtol=1e-5, atol=1e-6)


def test_lora_before_or_after_seacache_gives_the_same_output(tiny, lora_dir):
    name = "gen_diffusers.safetensors"
    seacache_alone = tiny.sample(tiny.seacache(), steps=STEPS)
    lora_first = tiny.seacache(_load_lora(tiny, tiny.model, name))
    seacache_first = _load_lora(tiny, tiny.seacache(), name)
    a, b = tiny.sample(lora_first, steps=STEPS), tiny.sample(seacache_first, steps=STEPS)
    assert torch.equal(a, b) and rel(a, seacache_alone) > 1e-3  # the LoRA applies, wherever it sits
    reports = [last_report(m) for m in (lora_first, seacache_first)]
    assert reports[0]["reused"] == reports[1]["reused"] > 0


def test_text_kv_cache_never_serves_entries_of_other_weights(tiny, lora_dir):
    """A LoRA on the text pathway only (to_k/to_v, whose keys/values the per-run cache holds) changes the result,
    right after a run of the base model with the same prompts, and runs alternate without drift."""
    lora = _load_lora(tiny, tiny.model, "text_diffusers.safetensors")
    for model in (lora, tiny.seacache(lora, threshold=0.0)):
        base = tiny.sample(tiny.model, steps=STEPS)
        with_lora = tiny.sample(model, steps=STEPS)
        assert rel(with_lora, base) > 1e-3
        assert torch.equal(tiny.sample(tiny.model, steps=STEPS), base)
        assert torch.equal(tiny.sample(model, steps=STEPS), with_lora)


def test_text_kv_cache_follows_hook_loras(tiny, lora_dir):
    """A LoRA hook on the positive prompt only (same prompt tokens as the negative): the text pathway has two sets
    of weights within one call's run, and the cached result must equal computing the text K/V every call."""
    import comfy.patcher_extension

    tiny.ns.load_extra_nodes("nodes_hooks.py")
    hooks = tiny.ns.run_node("CreateHookLoraModelOnly", lora_name="text_diffusers.safetensors", strength_model=STRENGTH).outputs[0]
    prompt = tiny.encode()
    hooked = tiny.ns.run_node("ConditioningSetProperties", cond_NEW=prompt, strength=1.0, set_cond_area="default", hooks=hooks).outputs[0]
    uncached = tiny.model.clone()
    uncached.remove_wrappers_with_key(comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, "cosmos3_text_kv")
    expected = tiny.sample(uncached, hooked, prompt, steps=STEPS)
    assert rel(expected, tiny.sample(uncached, prompt, prompt, steps=STEPS)) > 1e-3  # the hook changes the result
    assert torch.equal(tiny.sample(tiny.model, hooked, prompt, steps=STEPS), expected)


def test_skip_layer_pass_follows_the_main_call_on_cosmos3(tiny, monkeypatch):
    """SkipLayerGuidanceDiT after SeaCache Apply (gate sea, 0.25) on this pack's Cosmos3: the skip pass follows its
    cond's decision with its own history (the Cosmos3 seam wraps the whole generator stack, so any skipped layer
    lies inside it). On every fixed seed it reuses, runs the stack less often and ends nearer the graph without
    SeaCache than with the skip pass run plain (docs/quality.md measures both ways)."""
    import sys

    from seacache_testing.composition_cases import rel_error

    node = tiny.ns.nodes.NODE_CLASS_MAPPINGS["SeaCacheApply"]
    hooks = sys.modules[node.__module__.rsplit(".nodes.", 1)[0] + ".nodes.seacache.hooks"]
    steps = 20

    def run(model, seed):
        return tiny.sample(_skip_layer_guidance(tiny, model), steps=steps, sampler="euler", seed=seed, cfg=5.0)

    def cached(seed):
        model = tiny.seacache(threshold=0.25, gate="sea")
        out = run(model, seed)
        report = last_report(model)  # stack runs counted per item: cond and uncond batched, one skip pass
        return out, report, 2 * report["ran"] + report["guidance_calls"] - report["guidance_reused"]

    for seed in (0, 1, 2, 3):
        reference = run(tiny.model, seed)
        follow, report, follow_work = cached(seed)
        assert report["guidance_calls"] == report["guidance_followed"] == steps and report["guidance_reused"] > 0
        with monkeypatch.context() as plain_pass:
            plain_pass.setattr(hooks.SamplingRun, "start_follower", lambda self, options, x, t: None)
            plain, plain_report, plain_work = cached(seed)
        assert plain_report["guidance_followed"] == 0
        follow_error, plain_error = rel_error(follow, reference), rel_error(plain, reference)
        print(f"seed {seed}: follow {follow_error:.4f} ({follow_work} stack item runs), "
              f"plain {plain_error:.4f} ({plain_work})")
        assert follow_error < plain_error and follow_work < plain_work


def test_a_failing_follower_decision_stops_caching_without_raising(tiny, monkeypatch):
    """The runtime's guard covers the follower path: a follow decision that raises leaves that call and the rest of
    the run computed whole (threshold 0: bit-identical), and the report says why."""
    import sys

    node = tiny.ns.nodes.NODE_CLASS_MAPPINGS["SeaCacheApply"]
    run = sys.modules[node.__module__.rsplit(".nodes.", 1)[0] + ".seacache_core.run"]

    def failing(self, keys, leaders, sigma):
        raise RuntimeError("injected follower failure")

    monkeypatch.setattr(run.SeaCacheRun, "follow", failing)
    guided = tiny.sample(_skip_layer_guidance(tiny, tiny.model), steps=STEPS)
    model = tiny.seacache(threshold=0.0)
    assert torch.equal(tiny.sample(_skip_layer_guidance(tiny, model), steps=STEPS), guided)
    report = last_report(model)
    assert report["stopped"] == "during sampling: RuntimeError: injected follower failure"
    assert report["guidance_calls"] == STEPS and report["guidance_followed"] == 0 and report["calls"] == 1
