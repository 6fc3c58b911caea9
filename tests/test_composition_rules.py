"""How SeaCache recognises other step caches and guidance calls (nodes/seacache/composition.py); no ComfyUI needed."""

from __future__ import annotations

import threading
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
    seen = []

    def post_cfg(args):
        seen.append(args["model_options"]["transformer_options"].get(composition.GUIDANCE_OPTION))
        return args["denoised"]

    run_options = {"transformer_options": {"seacache_run": "run"}}
    options = {"sampler_post_cfg_function": [post_cfg]}
    composition.mark_guidance_calls(options)
    assert options["sampler_post_cfg_function"][0]({"denoised": 7, "model_options": run_options}) == 7
    assert seen == [True] and run_options == {"transformer_options": {"seacache_run": "run"}}  # the run's options unchanged


def test_two_threads_guidance_marks_stay_with_their_calls(composition):
    """One thread inside a guidance function, another making the sampler's own call at the same moment, a third
    running the guidance function's model call for it (ComfyUI's MultiGPU pool): only the guidance call is marked."""
    inside, done = threading.Event(), threading.Event()
    marks = {}

    def model_call(name, model_options):
        marks[name] = model_options["transformer_options"].get(composition.GUIDANCE_OPTION, False)

    def post_cfg(args):
        inside.set()
        pool = threading.Thread(target=model_call, args=("guidance (pool thread)", args["model_options"]))
        pool.start()
        pool.join()
        assert done.wait(10)  # stay inside the guidance function until the other thread's sampler call is made
        model_call("guidance (own thread)", args["model_options"])
        return args["denoised"]

    run_options = {"transformer_options": {"seacache_run": "run"}}
    options = {"sampler_post_cfg_function": [post_cfg]}
    composition.mark_guidance_calls(options)
    guidance = threading.Thread(target=options["sampler_post_cfg_function"][0], args=({"denoised": 1, "model_options": run_options},))
    guidance.start()
    assert inside.wait(10)
    sampler = threading.Thread(target=model_call, args=("sampler", run_options))
    sampler.start()
    sampler.join()
    done.set()
    guidance.join()
    assert marks == {"guidance (pool thread)": True, "sampler": False, "guidance (own thread)": True}
