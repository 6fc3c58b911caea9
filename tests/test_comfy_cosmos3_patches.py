"""Core model patches on this pack's Cosmos3 in a real ComfyUI (needs COMFYUI_PATH): block-replace patches
(``patches_replace["dit"]``, e.g. core skip-layer guidance) reach each generator layer, and LoRA files in
ComfyUI's, kohya's and diffusers/PEFT key formats load through core ``LoraLoaderModelOnly``."""

import pytest
import torch

from comfy_runs import rel

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


def test_core_skip_layer_guidance_changes_cosmos3(tiny):
    """SkipLayerGuidanceDiT's skipped-layer call used to run every layer on Cosmos3 (its patch was ignored), so
    its guidance term was zero; it now skips the named layer and changes the result."""
    tiny.ns.load_extra_nodes("nodes_slg.py")
    plain = tiny.sample(tiny.model, steps=STEPS)
    slg = tiny.ns.run_node("SkipLayerGuidanceDiT", model=tiny.model, double_layers="1", single_layers="", scale=3.0,
                           start_percent=0.0, end_percent=1.0, rescaling_scale=0.0).outputs[0]
    assert rel(tiny.sample(slg, steps=STEPS), plain) > 1e-2


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
        report = cached.model_options["transformer_options"]["seacache"].last_run
        assert report["reused"] > 0 and len(calls) == report["full"]
