"""Cosmos3 under ComfyUI's dynamic VRAM (comfy-aimdo), emulated on the CPU the way ``main.py`` turns it on.

With dynamic VRAM, ``comfy.ops`` Linear/Embedding layers are built without weights and only get them through
ComfyUI's own ``load_state_dict``, shards are read through aimdo's mmap, and the core loaders' patcher class is
``ModelPatcherDynamic``. Skipped on ComfyUI versions without dynamic VRAM (0.3.x).
"""

from __future__ import annotations

import inspect

import pytest
import torch

from seacache_testing.comfy_runs import load_tiny


@pytest.fixture
def dynamic_vram(comfy, monkeypatch):
    """Dynamic VRAM switched on for one test (``main.py``'s three steps), switched off again afterwards."""
    memory_management = pytest.importorskip("comfy.memory_management", reason="this ComfyUI has no dynamic VRAM")
    if not hasattr(comfy.model_patcher, "ModelPatcherDynamic"):
        pytest.skip("this ComfyUI has no ModelPatcherDynamic")
    import comfy_aimdo.control

    assert comfy_aimdo.control.init()
    monkeypatch.setattr(memory_management, "aimdo_enabled", True)
    monkeypatch.setattr(comfy.model_patcher, "CoreModelPatcher", comfy.model_patcher.ModelPatcherDynamic)
    return memory_management


def test_loader_and_seacache_under_dynamic_vram_match_the_plain_load(tiny, dynamic_vram, tmp_path_factory):
    dyn = load_tiny(tiny.ns, tmp_path_factory)
    linear = dyn.model.model.diffusion_model.layers[0].mlp_moe_gen.up_proj
    assert getattr(linear, "comfy_need_lazy_init_bias", None) is not None, "the layer was not built lazily"
    assert isinstance(linear.weight, torch.nn.Parameter) and linear.weight.dtype == torch.float32
    plain_sd = tiny.model.model.diffusion_model.state_dict()
    dyn_sd = dyn.model.model.diffusion_model.state_dict()
    assert dyn_sd.keys() == plain_sd.keys()
    assert all(torch.equal(dyn_sd[k], plain_sd[k]) for k in plain_sd)

    plain_cache, dyn_cache = tiny.seacache(), dyn.seacache(dyn.model)
    cached_plain, cached_dyn = tiny.sample(plain_cache), dyn.sample(dyn_cache)
    assert torch.equal(cached_dyn, cached_plain)
    assert torch.equal(dyn.sample(dyn.model), tiny.sample(tiny.model))
    report = dyn_cache.model_options["transformer_options"]["seacache_settings"].last_run
    assert report["reused"] > 0 and report == plain_cache.model_options["transformer_options"]["seacache_settings"].last_run

def test_cached_patcher_init_rebuilds_an_equal_model(tiny, dynamic_vram, tmp_path_factory):
    if "force_deepcopy" not in inspect.signature(tiny.model.clone).parameters:
        pytest.skip("this ComfyUI cannot deep-clone through cached_patcher_init")
    dyn = load_tiny(tiny.ns, tmp_path_factory)
    assert dyn.model.cached_patcher_init is not None and dyn.vae.patcher.cached_patcher_init is not None
    deep = dyn.model.clone(force_deepcopy=True)
    assert deep.model is not dyn.model.model
    assert torch.equal(tiny.sample(deep), tiny.sample(dyn.model))
    vae = dyn.vae.patcher.cached_patcher_init[0](*dyn.vae.patcher.cached_patcher_init[1], disable_dynamic=True)
    assert vae.model is not dyn.vae.first_stage_model
