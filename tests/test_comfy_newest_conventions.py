"""Calling conventions of ComfyUI's newest model code that the ComfyUI versions the suite runs on (0.3.64, 0.33.0)
do not have yet, reproduced by small fakes so the adapted code paths run in CI (docs/comfyui-compatibility.md lists
every symbol the pack relies on; each fake names the ComfyUI commit it mirrors). Needs COMFYUI_PATH.
"""

from __future__ import annotations

import inspect

import pytest

from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import sample, seacache

MODEL = "wan21_t2v"
HISTORY = 2 * 3 * (3 * 4 * 4 * 128) * 4  # 2 branches x (order 2 + 1) residuals x tokens x width x fp32 bytes
PROFILE_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def takes_attention_profile(estimator) -> bool:
    """Whether a ``memory_required`` takes the ``memory_efficient_attention`` keyword, by its signature."""
    params = inspect.signature(estimator).parameters.values()
    return any((p.name == "memory_efficient_attention" and p.kind in PROFILE_KINDS) or p.kind is p.VAR_KEYWORD for p in params)


def newest_estimate_memory(profile: bool):
    """``comfy.sampler_helpers.estimate_memory`` as ComfyUI's newest code calls the model (Comfy-Org/ComfyUI
    53757775, ``comfy/sampler_helpers.py`` and ``call_model_memory_required`` in ``comfy/model_patcher.py``): the
    attention profile of the run is passed as ``memory_efficient_attention`` only to an estimator whose signature
    takes it, so older estimators keep working. Conditioning shapes are left out (the tiny Wan has none that count)."""

    def estimate_memory(model, noise_shape, conds):
        estimator = model.model.memory_required
        extra = {"memory_efficient_attention": profile} if takes_attention_profile(estimator) else {}
        full = estimator([noise_shape[0] * 2, *noise_shape[1:]], cond_shapes={}, **extra)
        minimum = estimator([noise_shape[0], *noise_shape[1:]], cond_shapes={}, **extra)
        return full, minimum

    return estimate_memory


def sampler_helpers():
    """ComfyUI's ``comfy.sampler_helpers`` (importable once the ``comfy`` fixture has set ComfyUI up)."""
    import comfy.sampler_helpers

    return comfy.sampler_helpers


def test_newest_estimate_call_skips_the_profile_for_an_estimator_without_it(comfy, pack, monkeypatch, asked):
    """The model's estimator takes no attention profile (BaseModel on 0.3.64 and 0.33.0): while SeaCache counts its
    history in, the newest caller must still see that signature, not SeaCache's ``**kwargs``, or it would pass the
    keyword on and the estimator would reject it before the first step."""
    spec, model = tiny_comfy_models.SPECS[MODEL], tiny_comfy_models.build(MODEL)
    assert not takes_attention_profile(model.model.memory_required)
    monkeypatch.setattr(sampler_helpers(), "estimate_memory", newest_estimate_memory(profile=False))
    sample(comfy, model, spec, steps=1)
    sample(comfy, seacache(comfy, model, residual_order="2"), spec, steps=1)
    assert asked[1] - asked[0] == pytest.approx(HISTORY)
    assert "memory_required" not in vars(model.model)


def test_newest_estimate_call_hands_the_profile_through_to_an_estimator_that_takes_it(comfy, pack, monkeypatch, asked):
    """The model's estimator takes the profile (``BaseModel.memory_required`` at 53757775): it reaches the estimator
    through SeaCache's shadow, and the history is still added."""
    spec, model = tiny_comfy_models.SPECS[MODEL], tiny_comfy_models.build(MODEL)
    legacy, profiles = type(model.model).memory_required, []

    def memory_required(self, input_shape, cond_shapes={}, memory_efficient_attention=None):
        profiles.append(memory_efficient_attention)
        return legacy(self, input_shape, cond_shapes=cond_shapes)

    monkeypatch.setattr(type(model.model), "memory_required", memory_required)
    monkeypatch.setattr(sampler_helpers(), "estimate_memory", newest_estimate_memory(profile=True))
    sample(comfy, model, spec, steps=1)
    sample(comfy, seacache(comfy, model, residual_order="2"), spec, steps=1)
    assert asked[1] - asked[0] == pytest.approx(HISTORY)
    assert profiles.count(True) == 4  # full and minimum estimate of both runs (the sampler's batch checks pass none)
