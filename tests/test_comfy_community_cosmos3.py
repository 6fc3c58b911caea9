"""SeaCache Apply on a MODEL with the community ComfyUI-Cosmos3 calling convention (stand-in mirroring the pack at
b9226bf, and its first layout 1388a60; needs COMFYUI_PATH): the decoder-layer stack seam is chosen, reused calls
run no generator layer, the text pathway (prefill cache, K/V from the conditioning) is untouched, threshold 0 is
exact, runs repeat, per-branch state holds, the input MODEL (and its layer list) is unchanged, an unknown layer
interface is refused before the first step, and a failure of SeaCache's code inside the model falls back to
whole calls. The real pack is tested in test_comfy_community_cosmos3_pack.py."""

import functools
import sys

import pytest
import torch

from seacache_testing import community_cosmos3_standin as standin
from seacache_testing.anymodel_runs import last_report, seacache

STEPS = 12
LATENT = (16, 3, 4, 4)
POSITIVE, NEGATIVE = [5, 9, 11, 3], [7, 2, 8, 1]


@pytest.fixture(scope="module")
def community(comfy):
    from seacache_testing import comfyui_harness

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    comfyui_harness.load_pack_with_comfyui_loader(comfy)
    yield standin.build()
    torch.set_num_threads(threads)


def run(ns, model, batch=1, cfg=5.0, positive=None, negative=None):
    positive = positive or standin.conditioning(POSITIVE)
    negative = negative or standin.conditioning(NEGATIVE)
    guider = ns.run_node("CFGGuider", model=model, positive=positive, negative=negative, cfg=cfg).outputs[0]
    sampler = ns.run_node("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = ns.run_node("RandomNoise", noise_seed=4).outputs[0]
    sigmas = ns.run_node("BasicScheduler", model=model, scheduler="simple", steps=STEPS, denoise=1.0).outputs[0]
    latent = {"samples": torch.zeros(batch, *LATENT)}
    return ns.run_node("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent).outputs[0]["samples"]


@pytest.fixture
def generator_runs(monkeypatch):
    """Counts runs of a layer's generator pathway (either layout)."""
    counter = {"runs": 0}
    generate = standin.Pathways.generate

    def counting(self, *args):
        counter["runs"] += 1
        return generate(self, *args)

    monkeypatch.setattr(standin.Pathways, "generate", counting)
    return counter


@pytest.mark.parametrize("layout", ["b9226bf", "1388a60"])
def test_layer_stack_seam_skips_every_generator_layer_on_reused_calls(comfy, community, generator_runs, layout):
    model = standin.build(layout=layout)
    layers = len(model.model.diffusion_model.layers)
    plain = run(comfy, model)
    exact = seacache(comfy, model, threshold=0.0)
    assert torch.equal(run(comfy, exact), plain)
    patched = seacache(comfy, model)
    generator_runs["runs"] = 0
    first = run(comfy, patched)
    report = last_report(patched)
    assert report["seam"] == "Cosmos3 decoder-layer stack (community ComfyUI-Cosmos3)" and report["stopped"] is None
    assert report["calls"] == STEPS and report["reused"] > 0
    assert generator_runs["runs"] == report["ran"] * 2 * layers  # cond and uncond items per computed call, none reused
    assert torch.equal(run(comfy, patched), first) and not torch.equal(first, plain)


def test_text_pathway_untouched_prefill_cache_and_conditioning_kv(comfy, community):
    """The prompt's text prefill runs once and is served from the model's cache afterwards, SeaCache or not; text
    K/V carried by the conditioning (split reasoner) replace the prefill and give the same video."""
    model = standin.build(seed=1)
    diffusion_model = model.model.diffusion_model
    plain = run(comfy, model)
    assert diffusion_model.prefills == 2
    cached = run(comfy, seacache(comfy, model))
    assert diffusion_model.prefills == 2
    positive = standin.conditioning(POSITIVE, standin.und_kv(model, POSITIVE))
    negative = standin.conditioning(NEGATIVE, standin.und_kv(model, NEGATIVE))
    diffusion_model._und_kv_cache.clear()
    prefills = diffusion_model.prefills
    assert torch.equal(run(comfy, model, positive=positive, negative=negative), plain)
    assert torch.equal(run(comfy, seacache(comfy, model), positive=positive, negative=negative), cached)
    assert diffusion_model.prefills == prefills


def test_batch_and_input_model_unchanged(comfy, community):
    plain = run(comfy, community)
    patched = seacache(comfy, community)
    out = run(comfy, patched, batch=2)
    assert out.shape[0] == 2 and len(last_report(patched)["records"][5]["branches"]) == 4
    assert not community.object_patches and "seacache_settings" not in community.model_options.get("transformer_options", {})
    # ComfyUI may keep the patched layer list in place while the shared model stays loaded; outside a gated call
    # it iterates the plain layers, so the input MODEL still samples exactly as before.
    assert torch.equal(run(comfy, community), plain)
    twice = seacache(comfy, patched, threshold=0.0)
    assert torch.equal(run(comfy, twice), plain) and len(twice.object_patches) == 1


def test_unknown_layer_interface_is_refused_before_the_first_step(comfy, community, generator_runs):
    """A layer class whose forward_gen parameter is renamed: refused at run start (the MODEL was patched before the
    change) before any model call, and at Apply, naming the pack and the supported commits."""
    model = standin.build()
    patched = seacache(comfy, model)
    renamed = type("StandInLayer", (standin.Pathways,), {
        "forward_und": standin.StandInLayer.forward_und,
        "forward_gen": lambda self, hidden, k_und, v_und, cos_gen, sin_gen: self.generate(hidden, k_und, v_und, cos_gen, sin_gen)})
    for layer in model.model.diffusion_model.layers:
        layer.__class__ = renamed
    refusal = r"RyukoMatoiFan/ComfyUI-Cosmos3.*'forward_gen': \('hidden'.*b9226bf.*1388a60"
    with pytest.raises(ValueError, match=refusal):
        run(comfy, patched)
    assert generator_runs["runs"] == 0
    with pytest.raises(ValueError, match=refusal):
        seacache(comfy, model)
    assert not model.object_patches


def test_failure_inside_the_model_falls_back_to_whole_calls(comfy, community, monkeypatch, caplog):
    """An exception raised by SeaCache's own step inside the model (injected where the first reused call enters the
    stack) stops caching: the run completes, every later call computes whole, the report says why, one warning."""
    plain = run(comfy, community)
    reference = seacache(comfy, community)
    cached = run(comfy, reference)
    first_reuse = next(r["step"] for r in last_report(reference)["records"] if r["decision"] == "reused")

    for name, module in list(sys.modules.items()):
        if name.endswith("seacache_core.run") and hasattr(module, "SeaCacheRun"):
            predict = module.SeaCacheRun.predict

            @functools.wraps(predict)
            def failing(self, verdict, like, predict=predict):
                if verdict.reuse:  # SeaCache's step at the stack's entry, inside the model
                    raise RuntimeError("injected seam failure")
                return predict(self, verdict, like)

            monkeypatch.setattr(module.SeaCacheRun, "predict", failing)
    patched = seacache(comfy, community)
    with caplog.at_level("WARNING"):
        out = run(comfy, patched)
    report = last_report(patched)
    assert report["status"] == "completed" and report["reused"] == 0 and torch.isfinite(out).all()
    assert report["stopped"] == f"at step {first_reuse}: RuntimeError: injected seam failure"
    assert report["ran"] == first_reuse and report["uncached_calls"] == STEPS - first_reuse
    assert torch.equal(out, plain)  # nothing was reused before the failure, so every call computed whole
    assert not torch.equal(cached, plain)
    assert len([r for r in caplog.records if "SeaCache stopped caching" in r.getMessage()]) == 1


def test_memory_estimate_counts_the_layer_stack_history(comfy, community, monkeypatch):
    """What ComfyUI frees before sampling grows by 2 branches x (order + 1) residuals of [tokens, hidden] in fp32:
    the stand-in embeds each latent position as one token of width 32."""
    asked = []
    load = comfy.mm.load_models_gpu
    monkeypatch.setattr(comfy.mm, "load_models_gpu", lambda models, memory_required=0, **kw: (asked.append(memory_required), load(models, memory_required=memory_required, **kw))[1])
    run(comfy, community)
    run(comfy, seacache(comfy, community))
    tokens = LATENT[1] * LATENT[2] * LATENT[3]
    assert asked[1] - asked[0] == pytest.approx(2 * 2 * tokens * 32 * 4)


def test_failure_of_the_gate_falls_back_to_whole_calls(comfy, community, monkeypatch, caplog):
    """An exception in the gate's decision at a call (injected at the third) stops caching the same way."""
    plain = run(comfy, community)
    for name, module in list(sys.modules.items()):
        if name.endswith("seacache_core.run") and hasattr(module, "SeaCacheRun"):
            decide, calls = module.SeaCacheRun.decide, []

            def failing(self, *args, decide=decide, calls=calls, **kwargs):
                calls.append(1)
                if len(calls) == 3:
                    raise RuntimeError("injected gate failure")
                return decide(self, *args, **kwargs)

            monkeypatch.setattr(module.SeaCacheRun, "decide", failing)
    patched = seacache(comfy, community)
    with caplog.at_level("WARNING"):
        out = run(comfy, patched)
    report = last_report(patched)
    assert report["status"] == "completed" and report["calls"] == 2 and report["uncached_calls"] == STEPS - 2
    assert report["stopped"] == "during sampling: RuntimeError: injected gate failure" and torch.equal(out, plain)
    assert len([r for r in caplog.records if "SeaCache stopped caching" in r.getMessage()]) == 1
