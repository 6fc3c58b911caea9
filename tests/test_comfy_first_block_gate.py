"""SeaCache Apply's first-block gates through ComfyUI's sampler nodes (needs COMFYUI_PATH), on the pack's tiny
Cosmos3 and ComfyUI's tiny Wan 2.1.

The reference is computed apart from SeaCache's code, from tensors forward hooks capture during the same run: on
Cosmos3 the first generator layer's input norm (diffusers' ``first_block`` tensor), on Wan the patch embedding and
the time projection, from which the official Wan script's ``norm1(x) * (1 + scale) + shift`` is formed in float64.
Each step's indicator is filtered by ``seacache_testing.first_block_reference`` at the step's sigma; the run's
recorded per-branch distances and its reuse/compute decisions must equal the reference's. cond and uncond are
batched in one call, which reuses only when both branches may (the pack's rule for a batched call; diffusers runs
them apart): the reference applies diffusers' accumulation per branch and that joint verdict.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from seacache_testing import composition_cases as cases
from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import last_report, sample, seacache
from seacache_testing.first_block_reference import reference_distance, reference_indicator, vision_indexes

PUBLISHED = dict(threshold=0.35, residual_order="0", max_consecutive=-1, gate="first block")
GATES = ("first block", "first block same-sigma")
STEPS = 12
TOLERANCE = 1e-5


class PerCall:
    """Forward hooks that keep, for every model call, the batch order (``cond_or_uncond``) and the first output of
    each hooked module within the call."""

    def __init__(self, diffusion_model, modules: dict[str, torch.nn.Module]):
        self.calls: list[dict] = []
        self.handles = [diffusion_model.register_forward_pre_hook(self._start, with_kwargs=True)]
        for name, module in modules.items():
            self.handles.append(module.register_forward_hook(self._keeper(name)))

    def _start(self, module, args, kwargs):
        options = kwargs.get("transformer_options") or {}
        self.calls.append({"order": list(options.get("cond_or_uncond") or [0])})

    def _keeper(self, name):
        def keep(module, args, output):
            if self.calls and name not in self.calls[-1]:
                self.calls[-1][name] = output.detach().clone()
        return keep

    def close(self):
        for handle in self.handles:
            handle.remove()


def reference_run(records, calls, indicators, threshold) -> tuple[list[dict], list[bool]]:
    """Per step: the reference distance of each branch ("cond0/0", "uncond0/0"), and whether the step computes
    (first and last step forced, no cap; a compute clears both branches' accumulated distance)."""
    keys = {0: "cond0/0", 1: "uncond0/0"}
    accumulated, previous, distances, computes = {}, {}, [], []
    for step, (record, call) in enumerate(zip(records, calls)):
        current = {keys[kind]: indicator for kind, indicator in zip(call["order"], indicators(call, record["sigma"]))}
        measured = {key: reference_distance([current[key]], [previous[key]]) for key in current if key in previous}
        forced = step == 0 or step == len(records) - 1
        candidates = {key: accumulated.get(key, 0.0) + measured[key] for key in measured}
        compute = forced or any(c >= threshold for c in candidates.values())
        accumulated = {key: 0.0 if compute else candidates[key] for key in candidates}
        previous = current
        distances.append(measured)
        computes.append(compute)
    return distances, computes


def check_against_reference(report, calls, indicators, threshold):
    records = report["records"]
    assert len(records) == len(calls) == STEPS and report["uncached_calls"] == 0 and report["stopped"] is None
    distances, computes = reference_run(records, calls, indicators, threshold)
    for record, want in zip(records[1:], distances[1:]):
        for key, distance in want.items():
            got = record["branches"][key]["distance"]
            assert abs(got - distance) <= TOLERANCE * distance, (record["step"], key, got, distance)
    assert [r["decision"] != "reused" for r in records] == computes
    assert any(computes[1:-1]) and not all(computes[1:-1])  # the run mixes reuses and computes


@pytest.mark.parametrize("task", ["t2v", "i2v"])
def test_cosmos3_first_block_gate_makes_the_reference_decisions(tiny, task):
    """diffusers' first_block indicator on the native Cosmos3: the first layer's input norm on the video tokens of
    the noisy frames (image-to-video leaves frame 0 out), filtered at each step's own sigma."""
    positive, negative, latent = tiny.encode(), tiny.encode("", negative=True), tiny.empty()
    noisy = None
    if task == "i2v":
        positive, negative, latent = tiny.ns.run_node(
            "SeaCacheCosmos3ImageToVideo", positive=positive, negative=negative, vae=tiny.vae,
            start_image=torch.rand(1, 64, 64, 3, generator=torch.Generator().manual_seed(2)), width=64, height=64,
            length=9, batch_size=1).outputs
        noisy = (1, 2)
    diffusion_model = tiny.model.model.diffusion_model
    hooks = PerCall(diffusion_model, {"norm": diffusion_model.layers[0].input_layernorm_moe_gen})
    model = tiny.seacache(**PUBLISHED)
    try:
        tiny.sample(model, positive, negative, latent, steps=STEPS, sampler="euler")
    finally:
        hooks.close()
    grid = (3, 2, 2)  # 64x64x9 -> latent 3x4x4 -> patch grid
    indexes = vision_indexes(grid, noisy)
    shape = (grid[0] if noisy is None else len(noisy), *grid[1:])

    def indicators(call, sigma):
        return [reference_indicator(stream, indexes, shape, sigma) for stream in call["norm"]]

    check_against_reference(last_report(model), hooks.calls, indicators, PUBLISHED["threshold"])


@pytest.fixture(scope="module")
def pack(comfy):
    """The pack loaded as ComfyUI loads it, the context-window nodes, one torch thread (tiny models)."""
    from seacache_testing import comfyui_harness

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    comfy.load_extra_nodes("nodes_context_windows.py")
    yield comfyui_harness.load_pack_with_comfyui_loader(comfy)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def wan():
    return tiny_comfy_models.build("wan21_t2v")


def test_wan_first_block_gate_makes_the_reference_decisions(comfy, pack, wan):
    """The official Wan 2.1 script's indicator: ``norm1(x) * (1 + scale) + shift`` of the first block on every
    video token, filtered over (F, H, W) at each step's own sigma."""
    spec = tiny_comfy_models.SPECS["wan21_t2v"]
    diffusion_model = wan.model.diffusion_model
    hooks = PerCall(diffusion_model, {"tokens": diffusion_model.patch_embedding,
                                      "time": diffusion_model.time_projection})
    model = seacache(comfy, wan, **PUBLISHED)
    try:
        sample(comfy, model, spec, steps=STEPS)
    finally:
        hooks.close()
    block = diffusion_model.blocks[0]
    dim = block.modulation.shape[-1]
    grid = tuple(hooks.calls[0]["tokens"].shape[2:])

    def indicators(call, sigma):
        tokens = call["tokens"].double().flatten(2).transpose(1, 2)  # [B, N, D], frame by frame
        e0 = call["time"].double().reshape(tokens.shape[0], -1, 6, dim)[:, 0]
        shift, scale = (block.modulation.detach().double()[:, :2] + e0[:, :2]).unbind(1)
        modulated = F.layer_norm(tokens, (dim,), eps=block.norm1.eps) * (1 + scale[:, None]) + shift[:, None]
        return [reference_indicator(item, vision_indexes(grid), grid, sigma) for item in modulated]

    assert grid == (3, 4, 4)
    check_against_reference(last_report(model), hooks.calls, indicators, PUBLISHED["threshold"])


@pytest.mark.parametrize("gate", GATES)
def test_threshold_zero_is_bit_identical_on_cosmos3(tiny, gate):
    plain = tiny.sample(tiny.model, steps=8)
    model = tiny.seacache(gate=gate, threshold=0.0)
    assert torch.equal(tiny.sample(model, steps=8), plain)
    report = last_report(model)
    assert report["reused"] == 0 and report["uncached_calls"] == 0 and report["stopped"] is None


@pytest.mark.parametrize("gate", GATES)
def test_threshold_zero_is_bit_identical_on_wan(comfy, pack, wan, gate):
    spec = tiny_comfy_models.SPECS["wan21_t2v"]
    model = seacache(comfy, wan, gate=gate, threshold=0.0)
    assert torch.equal(sample(comfy, model, spec, steps=8), sample(comfy, wan, spec, steps=8))
    report = last_report(model)
    assert report["reused"] == 0 and report["uncached_calls"] == 0 and report["stopped"] is None


def test_flux_reference_latent_tokens_after_the_image_are_left_out(comfy, pack):
    """Flux appends a reference image's tokens after the image's (method offset): the view reads the image's
    only, and threshold 0 stays bit-identical."""
    spec = tiny_comfy_models.SPECS["flux"]
    model = tiny_comfy_models.build("flux")
    positive = tiny_comfy_models.conditioning(spec, seed=1)
    positive[0][1]["reference_latents"] = [torch.randn(1, 16, 8, 8, generator=torch.Generator().manual_seed(5))]
    plain = sample(comfy, model, spec, steps=6, positive=positive)
    cached = seacache(comfy, model, gate="first block", threshold=0.0)
    assert torch.equal(sample(comfy, cached, spec, steps=6, positive=positive), plain)
    assert last_report(cached)["stopped"] is None and last_report(cached)["uncached_calls"] == 0


def test_the_memory_estimate_counts_the_first_block_view_of_each_item(comfy, pack, wan, asked):
    """Each item's view of the first block (tokens x width, fp32 here) on top of the residual history."""
    spec = tiny_comfy_models.SPECS["wan21_t2v"]
    sample(comfy, seacache(comfy, wan, residual_order="0", gate="sea"), spec, steps=1)
    sample(comfy, seacache(comfy, wan, residual_order="0", gate="first block"), spec, steps=1)
    tokens, width = 3 * 4 * 4, wan.model.diffusion_model.patch_embedding.out_channels
    assert asked[1] - asked[0] == pytest.approx(2 * tokens * width * 4)  # cond and uncond


def refused(comfy, model, spec, match, positive=None):
    """Sampling ``model`` raises a ValueError matching ``match`` before its first model call."""
    calls = []
    handle = model.model.diffusion_model.register_forward_pre_hook(lambda *args: calls.append(1))
    try:
        with pytest.raises(ValueError, match=match):
            sample(comfy, model, spec, steps=4, positive=positive)
    finally:
        handle.remove()
    assert not calls


@pytest.mark.parametrize("gate", GATES)
def test_a_model_whose_first_block_is_out_of_reach_is_refused_at_apply(comfy, pack, gate):
    """A Wan subclass (VACE) runs under the diffusion-model seam, which never sees the first block."""
    model = tiny_comfy_models.build("wan21_vace")
    with pytest.raises(ValueError, match=r"cannot reach on this model \(seam: diffusion-model call.*Use gate 'sea same-sigma'"):
        seacache(comfy, model, gate=gate)


def test_the_community_cosmos3_is_refused_at_apply(comfy, pack):
    from seacache_testing import community_cosmos3_standin as standin

    with pytest.raises(ValueError, match=r"cannot reach on this model \(seam: Cosmos3 decoder-layer stack"):
        seacache(comfy, standin.build(), gate="first block")


def test_moving_context_windows_are_refused_at_run_start(comfy, pack, wan):
    spec = dataclasses.replace(tiny_comfy_models.SPECS["wan21_t2v"], latent=(16, 21, 8, 8))
    model = cases.context_windows("standard_uniform")(comfy, seacache(comfy, wan, gate="first block"))
    refused(comfy, model, spec, r"moving context windows.*Use gate 'sea same-sigma'.*static context schedule")


def test_a_sequence_parallel_run_is_refused_at_run_start(comfy, pack, wan, monkeypatch):
    spec = tiny_comfy_models.SPECS["wan21_t2v"]
    model = seacache(comfy, wan, gate="first block")
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda *args: 2)
    refused(comfy, model, spec, r"sequence-parallel run \(2 ranks\).*Use gate 'sea same-sigma'")


def test_flux_references_with_index_timestep_zero_are_refused_at_run_start(comfy, pack):
    spec = tiny_comfy_models.SPECS["flux"]
    model = seacache(comfy, tiny_comfy_models.build("flux"), gate="first block same-sigma")
    positive = tiny_comfy_models.conditioning(spec, seed=1)
    positive[0][1].update(reference_latents=[torch.zeros(1, 16, 8, 8)], reference_latents_method="index_timestep_zero")
    refused(comfy, model, spec, r"index_timestep_zero.*Use gate 'sea same-sigma'.*another reference_latents_method",
            positive=positive)


def test_ltxv_keyframe_guides_are_refused_at_run_start(comfy, pack):
    spec = tiny_comfy_models.SPECS["ltxv"]
    model = seacache(comfy, tiny_comfy_models.build("ltxv"), gate="first block")
    positive = tiny_comfy_models.conditioning(spec, seed=1)
    positive[0][1]["keyframe_idxs"] = torch.zeros(1, 3, 16)
    refused(comfy, model, spec, r"keyframe guides.*Use gate 'sea same-sigma'", positive=positive)
