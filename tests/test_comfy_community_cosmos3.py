"""SeaCache Apply on a MODEL with the community ComfyUI-Cosmos3 calling convention (needs COMFYUI_PATH): the
decoder-layer stack seam is chosen, reused calls run no layer (text pathway included), threshold 0 is exact,
runs repeat, per-branch state holds, and the input MODEL (and its layer list) is unchanged."""

import pytest
import torch

from seacache_testing import community_cosmos3_standin as standin
from seacache_testing.anymodel_runs import last_report, seacache

STEPS = 12
LATENT = (16, 3, 4, 4)


@pytest.fixture(scope="module")
def community(comfy):
    from seacache_testing import comfyui_harness

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    comfyui_harness.load_pack_with_comfyui_loader(comfy)
    yield standin.build()
    torch.set_num_threads(threads)


def run(ns, model, batch=1, cfg=5.0):
    guider = ns.run_node("CFGGuider", model=model, positive=standin.conditioning([5, 9, 11, 3]), negative=standin.conditioning([7, 2]), cfg=cfg).outputs[0]
    sampler = ns.run_node("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = ns.run_node("RandomNoise", noise_seed=4).outputs[0]
    sigmas = ns.run_node("BasicScheduler", model=model, scheduler="simple", steps=STEPS, denoise=1.0).outputs[0]
    latent = {"samples": torch.zeros(batch, *LATENT)}
    return ns.run_node("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent).outputs[0]["samples"]


class LayerCalls:
    def __init__(self, layers):
        self.calls = 0
        self.handles = [layer.register_forward_hook(self.hook) for layer in layers]

    def hook(self, *_):
        self.calls += 1

    def close(self):
        for handle in self.handles:
            handle.remove()


def test_layer_stack_seam_skips_every_layer_on_reused_calls(comfy, community):
    layers = list(community.model.diffusion_model.layers)
    plain = run(comfy, community)
    exact = seacache(comfy, community, threshold=0.0)
    assert torch.equal(run(comfy, exact), plain)
    patched = seacache(comfy, community)
    counter = LayerCalls(layers)
    try:
        first = run(comfy, patched)
    finally:
        counter.close()
    report = last_report(patched)
    assert report["seam"] == "Cosmos3 decoder-layer stack (community ComfyUI-Cosmos3)"
    assert report["calls"] == STEPS and report["reused"] > 0
    assert counter.calls == report["ran"] * 2 * len(layers)  # cond and uncond items per computed call, none reused
    assert torch.equal(run(comfy, patched), first) and not torch.equal(first, plain)


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
