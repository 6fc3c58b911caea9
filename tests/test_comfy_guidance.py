"""Cosmos3 CFG Guider in a real ComfyUI (needs COMFYUI_PATH): CFG only inside a pipeline-timestep interval, the
rest of the steps cond-only with one model call, plain CFG bit for bit over [0, 1000], SeaCache on top."""

import pytest
import torch

from cosmos3.presets import pipeline_timestep

STEPS = 10
SHIFT = 3.0  # the Text2Image recipe's shift
T2I = (400, 1000)  # the Text2Image recipe's guidance interval


def guider(tiny, model, start=0, end=1000, cfg=7.0, positive=None, negative=None):
    positive = positive if positive is not None else tiny.encode()
    negative = negative if negative is not None else tiny.encode("", negative=True)
    return tiny.ns.run_node("SeaCacheCosmos3CFGGuider", model=model, positive=positive, negative=negative, cfg=cfg,
                            interval_start=start, interval_end=end).outputs[0]


def plain_guider(tiny, model, cfg=7.0):
    return tiny.ns.run_node("CFGGuider", model=model, positive=tiny.encode(), negative=tiny.encode("", negative=True), cfg=cfg).outputs[0]


def sample(tiny, guider_obj, steps=STEPS, sampler="uni_pc_bh2", latent=None):
    run = tiny.ns.run_node
    sampler_obj = run("KSamplerSelect", sampler_name=sampler).outputs[0]
    noise = run("RandomNoise", noise_seed=5).outputs[0]
    sigmas = run("SeaCacheCosmos3Scheduler", steps=steps, shift=SHIFT, denoise=1.0).outputs[0]
    latent = latent if latent is not None else tiny.empty(length=1)
    return run("SamplerCustomAdvanced", noise=noise, guider=guider_obj, sampler=sampler_obj, sigmas=sigmas, latent_image=latent).outputs[0]["samples"]


def reference_active(steps, interval):
    """Which steps the reference pipeline guides: its int64 scheduler timesteps tested with lo <= t <= hi."""
    diffusers = pytest.importorskip("diffusers")
    scheduler = diffusers.UniPCMultistepScheduler(use_flow_sigmas=True, flow_shift=SHIFT, prediction_type="flow_prediction")
    scheduler.set_timesteps(steps)
    return [interval[0] <= t <= interval[1] for t in scheduler.timesteps.tolist()]


class Recorder:
    """A clone of a model that logs each diffusion-model call's batch size and each step's CFG inputs/output."""

    def __init__(self, model):
        import comfy.patcher_extension

        self.batches, self.steps = [], []
        self.model = model.clone()
        self.model.set_model_sampler_post_cfg_function(self._post_cfg)
        self.model.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "count", self._count)

    def _count(self, executor, x, *args, **kwargs):
        self.batches.append(x.shape[0])
        return executor(x, *args, **kwargs)

    def _post_cfg(self, args):
        self.steps.append({
            "scale": args["cond_scale"], "guided": args["uncond"] is not None, "denoised": args["denoised"].clone(),
            "cond": args["cond_denoised"].clone(), "uncond": args["uncond_denoised"].clone(),
        })
        return args["denoised"]


def test_pipeline_timestep_matches_the_reference_scheduler(tiny):
    diffusers = pytest.importorskip("diffusers")
    for steps, shift in ((50, 3.0), (35, 10.0), (35, 5.0), (4, 1.0)):
        scheduler = diffusers.UniPCMultistepScheduler(use_flow_sigmas=True, flow_shift=shift, prediction_type="flow_prediction")
        scheduler.set_timesteps(steps)
        sigmas = tiny.ns.run_node("SeaCacheCosmos3Scheduler", steps=steps, shift=shift, denoise=1.0).outputs[0]
        assert [pipeline_timestep(s) for s in sigmas[:-1].tolist()] == scheduler.timesteps.tolist()
    assert pipeline_timestep(0.3999) == 399 and pipeline_timestep(0.4) == 400 and pipeline_timestep(0.4009) == 400


def test_full_interval_is_plain_cfg_bit_for_bit(tiny):
    expected = sample(tiny, plain_guider(tiny, tiny.model))
    assert torch.equal(sample(tiny, guider(tiny, tiny.model, 0, 1000)), expected)


def test_empty_interval_is_cfg_1_with_one_call_per_step(tiny):
    """[0, 0] guides no step (every timestep here is >= 1): cond only, as CFGGuider at cfg 1."""
    recorder = Recorder(tiny.model)
    got = sample(tiny, guider(tiny, recorder.model, 0, 0))
    assert recorder.batches == [1] * STEPS
    assert torch.equal(got, sample(tiny, plain_guider(tiny, tiny.model, cfg=1.0)))


def test_text2image_interval_guides_only_the_early_steps(tiny):
    active = reference_active(STEPS, T2I)
    assert active[0] and not active[-1]  # the interval splits this schedule
    plain, interval = Recorder(tiny.model), Recorder(tiny.model)
    sample(tiny, plain_guider(tiny, plain.model))
    sample(tiny, guider(tiny, interval.model, *T2I))
    assert [s["guided"] for s in interval.steps] == active
    assert interval.batches == [2 if on else 1 for on in active]  # cond + uncond batched inside, cond alone outside
    switch = active.index(False)
    for mine, ref in zip(interval.steps[:switch], plain.steps[:switch]):  # same trajectory while guided
        assert mine["scale"] == ref["scale"] == 7.0 and torch.equal(mine["denoised"], ref["denoised"])
    for step in interval.steps[switch:]:
        assert step["scale"] == 1.0 and torch.equal(step["denoised"], step["cond"])
        assert not step["uncond"].any()  # no negative prediction was made
    assert not torch.equal(interval.steps[switch]["denoised"], plain.steps[switch]["denoised"])


def test_seacache_gates_each_branch_it_sees(tiny):
    from seacache_testing.comfy_runs import rel

    active = reference_active(STEPS, T2I)
    patched = tiny.seacache()
    cached = sample(tiny, guider(tiny, patched, *T2I))
    report = patched.model_options["transformer_options"]["seacache_settings"].last_run
    assert report["status"] == "completed" and report["calls"] == STEPS
    assert report["reused"] > 0 and report["ran"] + report["reused"] == report["calls"]
    for record, on in zip(report["records"], active):
        assert set(record["branches"]) == ({"cond0/0", "uncond0/0"} if on else {"cond0/0"})
    summary = tiny.stats(patched, cached).outputs[1]
    assert f"{report['calls']} calls, {report['ran']} ran the stack, {report['reused']} reused" in summary
    uncached = sample(tiny, guider(tiny, tiny.model, *T2I))
    assert torch.isfinite(cached).all() and 0 < rel(cached, uncached) < 0.5
    exact = tiny.seacache(threshold=0.0)
    assert torch.equal(sample(tiny, guider(tiny, exact, *T2I)), uncached)


def test_negative_branch_joining_mid_run_is_computed_first(tiny):
    """An interval in the middle of the schedule: the negative branch first appears at step 4, and SeaCache
    computes that call (no history to extrapolate from) instead of reusing the positive branch's verdict."""
    sigmas = tiny.ns.run_node("SeaCacheCosmos3Scheduler", steps=STEPS, shift=SHIFT, denoise=1.0).outputs[0]
    timesteps = [pipeline_timestep(s) for s in sigmas[:-1].tolist()]
    patched = tiny.seacache(threshold=5.0)  # reuse wherever the gate may
    recorder = Recorder(patched)
    sample(tiny, guider(tiny, recorder.model, timesteps[6], timesteps[4]))  # guided: steps 4..6
    assert recorder.batches == [2 if 4 <= i <= 6 else 1 for i in range(STEPS)]
    records = patched.model_options["transformer_options"]["seacache_settings"].last_run["records"]
    assert records[4]["decision"] == "forced" and records[4]["branches"]["uncond0/0"]["reason"] == "no_history"
    assert set(records[3]["branches"]) == set(records[7]["branches"]) == {"cond0/0"}
    assert any(r["decision"] == "reused" for r in records)


@pytest.mark.parametrize("start,end,match", [(600, 400, "swap them"), (-1, 1000, r"\[0, 1000\]"), (0, 1001, r"\[0, 1000\]")])
def test_bad_ranges_are_rejected(tiny, start, end, match):
    with pytest.raises(ValueError, match=match):
        guider(tiny, tiny.model, start, end)
