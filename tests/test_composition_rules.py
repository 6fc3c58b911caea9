"""How SeaCache recognises other step caches and guidance calls (nodes/seacache/composition.py); no ComfyUI needed."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def composition(import_pack_module):
    return import_pack_module("nodes.seacache.composition")


@pytest.mark.parametrize(
    ("wrappers", "options", "cache"),
    [
        ({"outer_sample": {"easycache": []}}, {"easycache": object()}, "EasyCache (core)"),
        ({"outer_sample": {"lazycache": []}}, {"easycache": object()}, "LazyCache (core)"),  # LazyCache reuses the option key
        ({}, {"rel_l1_thresh": 0.3, "coefficients": [1.0], "max_skip_steps": 3}, "TeaCache (ComfyUI-TeaCache)"),
        ({}, {"magcache_thresh": 0.24, "magcache_K": 4}, "MagCache (ComfyUI-MagCache)"),
        ({"diffusion_model": {"seacache": []}}, {"seacache_settings": object(), "patches_replace": {}}, None),
    ],
)
def test_other_caches_are_recognised_by_their_keys(composition, wrappers, options, cache):
    patcher = SimpleNamespace(wrappers=wrappers)
    assert composition.other_cache(patcher, {"transformer_options": options}) == cache
    if cache is None:
        composition.refuse_other_caches(patcher, {"transformer_options": options})
    else:
        with pytest.raises(ValueError, match=f"SeaCache Apply and {cache.split(' (')[0]}.*Remove one"):
            composition.refuse_other_caches(patcher, {"transformer_options": options})


def test_options_signature_tells_other_replacement_patches(composition):
    block, skip = object(), object()
    run = {"patches_replace": {"dit": {("double_block", 0): block}}}
    assert composition.options_signature({**run, "cond_or_uncond": [0, 1]}) == composition.options_signature(run)
    other = {"patches_replace": {"dit": {("double_block", 0): skip}}}
    assert composition.options_signature(other) != composition.options_signature(run)


def test_guidance_functions_mark_their_model_calls(composition):
    run = SimpleNamespace(guidance_depth=0)
    seen = []

    def post_cfg(args):
        seen.append(run.guidance_depth)
        return args["denoised"]

    options = {"sampler_post_cfg_function": [post_cfg]}
    composition.mark_guidance_calls(options, run)
    assert options["sampler_post_cfg_function"][0]({"denoised": 7}) == 7
    assert seen == [1] and run.guidance_depth == 0
