"""SeaCache Apply on ComfyUI's core models (needs COMFYUI_PATH): tiny random-weight Wan 2.1 T2V/I2V, Wan 2.2 5B
TI2V, HunyuanVideo, LTX-Video, LTX-2 (audio-video NestedTensor latents, where the ComfyUI has them), Flux and
Qwen-Image built from ComfyUI's own model configs. On each: the block-stack
seam is chosen, threshold 0 is bit-identical to uncached, the default threshold reuses and then runs no block,
two runs agree, batch 2 and split cond/uncond keep per-branch state, the input MODEL is unchanged."""

import pytest
import torch

from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import counting_blocks, last_report, sample, seacache, stack_blocks

STEPS = 12
MODELS = list(tiny_comfy_models.SPECS)


@pytest.fixture(scope="module", params=MODELS)
def tiny_core(request, comfy, pack):
    spec = tiny_comfy_models.SPECS[request.param]
    if tiny_comfy_models.missing(request.param):
        pytest.skip(tiny_comfy_models.missing(request.param))
    model = tiny_comfy_models.build(request.param)
    plain = sample(comfy, model, spec, steps=STEPS)
    return request.param, spec, model, plain


def test_block_seam_exactness_reuse_and_repeatability(comfy, tiny_core):
    name, spec, model, plain = tiny_core
    exact = seacache(comfy, model, threshold=0.0)
    assert torch.equal(sample(comfy, exact, spec, steps=STEPS), plain)
    assert last_report(exact)["reused"] == 0
    assert last_report(exact)["seam"].startswith("block stack (")

    patched = seacache(comfy, model)
    with counting_blocks(model.model.diffusion_model) as blocks:
        first = sample(comfy, patched, spec, steps=STEPS)
    report = last_report(patched)
    print(f"SeaCache on {name} ({STEPS} steps, defaults): reused {report['reused']} of {report['calls']} calls")
    assert report["calls"] == STEPS and report["reused"] > 0, report["summary"]
    assert blocks["calls"] == report["ran"] * len(stack_blocks(model.model.diffusion_model))  # reused calls ran no block
    assert torch.isfinite(first).all() and not torch.equal(first, plain)
    second = sample(comfy, patched, spec, steps=STEPS)
    assert torch.equal(first, second) and last_report(patched) == report


def test_batch_of_two_and_split_cond_uncond_keep_per_branch_state(comfy, tiny_core):
    from comfy.patcher_extension import WrappersMP

    name, spec, model, _ = tiny_core
    patched = seacache(comfy, model)
    out = sample(comfy, patched, spec, steps=STEPS, batch=2)
    assert out.shape[0] == 2 and torch.isfinite(out).all()
    assert len(last_report(patched)["records"][5]["branches"]) == 4  # cond and uncond of each item

    def one_call_per_cond(executor, model, conds, x_in, timestep, model_options):
        outs = []
        for cond in conds:
            outs += executor(model, [cond], x_in, timestep, model_options)
        return outs

    batched = seacache(comfy, model)
    split = seacache(comfy, model)
    split.add_wrapper_with_key(WrappersMP.CALC_COND_BATCH, "split", one_call_per_cond)
    a = sample(comfy, batched, spec, steps=STEPS)
    b = sample(comfy, split, spec, steps=STEPS)
    rb, rs = last_report(batched), last_report(split)
    assert rs["calls"] == 2 * rb["calls"]
    assert [r["decision"] for r in rs["records"][::2]] == [r["decision"] for r in rb["records"]]
    assert [r["decision"] for r in rs["records"][1::2]] == [r["decision"] for r in rb["records"]]
    assert ((a - b).abs().max() / a.abs().max()).item() < 1e-4


def test_input_model_is_unchanged(comfy, tiny_core):
    name, spec, model, plain = tiny_core
    options_before = repr(model.model_options)
    patched = seacache(comfy, model)
    sample(comfy, patched, spec, steps=STEPS)
    assert repr(model.model_options) == options_before and not model.object_patches
    assert "seacache_settings" not in model.model_options.get("transformer_options", {})
    assert torch.equal(sample(comfy, model, spec, steps=STEPS), plain)


def test_auto_residual_order_stays_one_where_unmeasured(comfy, tiny_core):
    """auto keeps vLLM-Omni's linear extrapolation on core models: order 2 was measured on Cosmos3 only."""
    _, _, model, _ = tiny_core
    patched = seacache(comfy, model, residual_order="auto")
    assert patched.model_options["transformer_options"]["seacache_settings"].config.order == 1


def test_auto_warmup_follows_the_shift_on_wan_only(comfy, tiny_core):
    """warmup_steps -1 (auto) forces Wan's first 4 steps at shift 3 and 1 at shift 10 (the rule measured on Wan,
    docs/quality.md); the other core models keep 1; an explicit warmup_steps is honoured at any shift."""
    name, spec, model, _ = tiny_core

    def forced_warmup(shift, warmup_steps):
        shifted = comfy.run_node("ModelSamplingSD3", model=model, shift=shift).outputs[0]
        patched = seacache(comfy, shifted, warmup_steps=warmup_steps)
        sample(comfy, patched, spec, steps=STEPS)
        return sum(r["reason"] == "warmup" for r in last_report(patched)["records"])

    assert forced_warmup(3.0, -1) == (4 if name.startswith("wan") else 1)
    assert (forced_warmup(10.0, -1), forced_warmup(3.0, 2)) == (1, 2)


@pytest.mark.parametrize("where", ["before", "after"])
def test_a_block_patch_of_another_node_runs_on_computed_calls_and_is_skipped_on_reused_ones(comfy, pack, where):
    """A block-replace patch (an identity wrapper of a middle block here) added before or after SeaCache Apply is
    wrapped by SeaCache's block patch at run start: it runs on every computed call and is skipped with the stack on
    reused ones, so the output equals SeaCache alone; threshold 0 stays bit-identical."""
    spec = tiny_comfy_models.SPECS["wan21_t2v"]
    model = tiny_comfy_models.build("wan21_t2v")
    runs = {"calls": 0}

    def counting_block(args, extra):
        runs["calls"] += 1
        return extra["original_block"](args)

    def patched_block(m):
        m = m.clone()
        m.set_model_patch_replace(counting_block, "dit", "double_block", 1)
        return m

    def chain(**settings):
        return seacache(comfy, patched_block(model), **settings) if where == "before" else patched_block(seacache(comfy, model, **settings))

    plain = sample(comfy, patched_block(model), spec, steps=STEPS)
    assert torch.equal(sample(comfy, chain(threshold=0.0), spec, steps=STEPS), plain)
    alone = seacache(comfy, model)
    expected = sample(comfy, alone, spec, steps=STEPS)
    cached = chain()
    runs["calls"] = 0
    with counting_blocks(model.model.diffusion_model) as blocks:
        out = sample(comfy, cached, spec, steps=STEPS)
    report = last_report(cached)
    assert report["seam"] == "block stack (WanModel, 2 blocks)" and report["reused"] > 0
    assert runs["calls"] == report["ran"] and blocks["calls"] == report["ran"] * 2
    assert torch.equal(out, expected) and report["records"] == last_report(alone)["records"]
    assert cached.model_options["transformer_options"]["patches_replace"]["dit"] == {("double_block", 1): counting_block}


def test_epsilon_prediction_model_is_gated_in_the_flow_convention(comfy, pack):
    spec = tiny_comfy_models.SPECS["flux"]
    eps_model = comfy.run_node("ModelSamplingDiscrete", model=tiny_comfy_models.build("flux"), sampling="eps", zsnr=False).outputs[0]
    plain = sample(comfy, eps_model, spec, steps=STEPS, scheduler="karras")
    exact = seacache(comfy, eps_model, threshold=0.0)
    assert torch.equal(sample(comfy, exact, spec, steps=STEPS, scheduler="karras"), plain)
    patched = seacache(comfy, eps_model)
    out = sample(comfy, patched, spec, steps=STEPS, scheduler="karras")
    report = last_report(patched)
    assert torch.isfinite(out).all() and report["reused"] > 0
    assert report["records"][0]["sigma"] > 1.0  # the schedule's own (VE) sigma is reported, not the flow one


def test_flow_scale_and_sigma_maps_each_sampling_type(comfy, import_pack_module):
    import comfy.model_sampling as ms

    hooks = import_pack_module("nodes.seacache.hooks")

    def host(model_sampling, sigma):
        return tuple(float(v) for v in hooks.flow_scale_and_sigma(model_sampling, torch.tensor(sigma)))

    flow = type("Flow", (ms.ModelSamplingDiscreteFlow, ms.CONST), {})
    eps = type("Eps", (ms.ModelSamplingDiscrete, ms.EPS), {})
    vpred = type("V", (ms.ModelSamplingDiscrete, ms.V_PREDICTION), {})
    assert host(flow(), 0.3) == pytest.approx((1.0, 0.3))
    assert hooks.schedule_in_flow(flow(), torch.tensor([0.9, 0.3, 0.0])) == pytest.approx([0.9, 0.3, 0.0])
    for kind in (eps, vpred):
        assert host(kind(), 3.0) == pytest.approx((1 / 4.0, 3.0 / 4.0))
        assert hooks.schedule_in_flow(kind(), [3.0, 1.0]) == pytest.approx([3.0 / 4.0, 1.0 / 2.0])


def test_device_sigma_maps_and_scales_exactly_as_the_host_float(comfy, import_pack_module):
    import comfy.model_sampling as ms

    hooks = import_pack_module("nodes.seacache.hooks")
    x = torch.randn(2, 4, 3, 6, 8)
    for kind, sigmas in ((ms.CONST, (0.9991, 0.37, 0.0213)), (ms.EPS, (14.6, 0.37, 0.0213))):
        base_model = type("Base", (), {"model_sampling": type("Sampling", (ms.ModelSamplingDiscrete, kind), {})()})()
        for sigma in sigmas:
            t = torch.tensor([sigma, sigma], dtype=torch.float32)
            host_sigma = torch.tensor(float(t[0]), dtype=torch.float64)  # the host float, as MPS converts it
            scale, filter_sigma = (float(v) for v in hooks.flow_scale_and_sigma(base_model.model_sampling, host_sigma))
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                latent, sound, on_device, device_filter = hooks.gate_input(base_model, x.to(dtype), t)
                assert sound is None and float(on_device) == float(t[0]) and float(device_filter) == filter_sigma
                assert torch.equal(latent, x.to(dtype) * scale)  # the host float's rounding


def test_stats_node_names_the_seam(comfy, pack):
    spec = tiny_comfy_models.SPECS["flux"]
    patched = seacache(comfy, tiny_comfy_models.build("flux"))
    samples = sample(comfy, patched, spec, steps=STEPS)
    summary = comfy.run_node("SeaCacheStats", samples={"samples": samples}, model=patched).outputs[1]
    assert summary.splitlines()[-1] == "residual boundary: block stack (Flux, 4 blocks)"


def test_gate_sees_the_video_stream_of_a_packed_ltx2_av_latent(comfy, import_pack_module):
    """On a latent the sampler packed from video + audio with LTX-2's shapes, the gate gets the video stream alone
    (the joint gate is measured on Cosmos3's sound only); a Cosmos3 sound latent ``[B, C, T]`` reaches it too; a
    latent of one stream is the video alone."""
    if tiny_comfy_models.missing("ltxav"):
        pytest.skip(tiny_comfy_models.missing("ltxav"))
    import comfy.utils

    import comfy.model_sampling as ms

    gate_input = import_pack_module("nodes.seacache.hooks").gate_input
    flow = type("Flow", (ms.ModelSamplingDiscreteFlow, ms.CONST), {})()  # scale 1: the streams come back unscaled
    t = torch.tensor([0.5, 0.5])

    def base(shapes):
        return type("Base", (), {"latent_shapes": shapes, "model_sampling": flow})()

    video, audio = torch.randn(2, 128, 2, 4, 4), torch.randn(2, 8, 5, 16)
    packed, shapes = comfy.utils.pack_latents([video, audio])
    got_video, got_audio, _, _ = gate_input(base(shapes), packed, t)
    assert torch.equal(got_video, video) and got_audio is None
    sound = torch.randn(2, 64, 5)
    packed, shapes = comfy.utils.pack_latents([video, sound])
    got_video, got_sound, _, _ = gate_input(base(shapes), packed, t)
    assert torch.equal(got_video, video) and torch.equal(got_sound, sound)
    only, none, _, _ = gate_input(base([video.shape]), video, t)
    assert torch.equal(only, video) and none is None
