"""Run inputs SeaCache cannot serve are refused at run start, through ComfyUI's own sampler nodes (needs
COMFYUI_PATH): a latent that is neither 4-D nor 5-D, NaN/Inf in the latent or the sigmas, a rising schedule. Each is
a ValueError naming problem and fix before the model is called once, and the patched MODEL samples normally
afterwards. And the trap that is no error: another step count and size on the second run of one SeaCache Apply
start clean (decisions and output of a fresh Apply)."""

import math

import pytest
import torch

from seacache_testing import community_cosmos3_standin as standin
from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import last_report, seacache

SPEC = tiny_comfy_models.SPECS["wan21_t2v"]


@pytest.fixture(scope="module")
def wan(comfy):
    from seacache_testing import comfyui_harness

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    comfyui_harness.load_pack_with_comfyui_loader(comfy)
    yield tiny_comfy_models.build("wan21_t2v")
    torch.set_num_threads(threads)


def schedule(ns, model, steps):
    return ns.run_node("BasicScheduler", model=model, scheduler="simple", steps=steps, denoise=1.0).outputs[0]


def sample(ns, model, latent, sigmas, positive=None, negative=None):
    """SamplerCustomAdvanced (euler, CFG 4) of ``model`` from ``latent`` along ``sigmas``."""
    run = ns.run_node
    positive = positive if positive is not None else tiny_comfy_models.conditioning(SPEC, seed=1)
    negative = negative if negative is not None else tiny_comfy_models.conditioning(SPEC, seed=2)
    guider = run("CFGGuider", model=model, positive=positive, negative=negative, cfg=4.0).outputs[0]
    sampler = run("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = run("RandomNoise", noise_seed=3).outputs[0]
    return run("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas,
               latent_image={"samples": latent}).outputs[0]["samples"]


class ModelCalls:
    """Counts calls of a diffusion model's forward."""

    def __init__(self, diffusion_model):
        self.calls = 0
        self.handle = diffusion_model.register_forward_pre_hook(self.hook)

    def hook(self, *_):
        self.calls += 1

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.handle.remove()


def refused_before_any_call(ns, model, latent, sigmas, match, **conds):
    with ModelCalls(model.model.diffusion_model) as counter, pytest.raises(ValueError, match=match):
        sample(ns, model, latent, sigmas, **conds)
    assert counter.calls == 0
    assert last_report(model) is None  # no run was started, so no report


def test_nan_or_inf_in_the_latent_is_refused_at_run_start(comfy, wan):
    patched = seacache(comfy, wan)
    for value in (math.nan, math.inf):
        latent = torch.zeros(1, *SPEC.latent)
        latent[0, 0, 1, 2, 3] = value
        refused_before_any_call(comfy, patched, latent, schedule(comfy, wan, 6), r"input latent .*NaN or Inf.*finite")
    out = sample(comfy, patched, torch.zeros(1, *SPEC.latent), schedule(comfy, wan, 6))
    assert torch.isfinite(out).all() and last_report(patched)["status"] == "completed"


def test_nan_or_inf_in_the_sigmas_is_refused_at_run_start(comfy, wan):
    patched = seacache(comfy, wan)
    for value in (math.nan, math.inf):
        sigmas = schedule(comfy, wan, 6).clone()
        sigmas[2] = value
        refused_before_any_call(comfy, patched, torch.zeros(1, *SPEC.latent), sigmas, "sigma schedule holds NaN or Inf")


def test_a_rising_schedule_is_refused_at_run_start(comfy, wan):
    patched = seacache(comfy, wan)
    sigmas = schedule(comfy, wan, 6)
    flipped = comfy.run_node("FlipSigmas", sigmas=sigmas).outputs[0]
    refused_before_any_call(comfy, patched, torch.zeros(1, *SPEC.latent), flipped, r"rises.*FlipSigmas")
    joined = torch.cat([sigmas[:4], sigmas[1:]])  # two schedules joined: falls, jumps back up, falls
    refused_before_any_call(comfy, patched, torch.zeros(1, *SPEC.latent), joined, r"rises from .* at step 4")
    assert sample(comfy, wan, torch.zeros(1, *SPEC.latent), flipped).shape == (1, *SPEC.latent)  # the plain MODEL runs it


def test_a_latent_that_is_neither_image_nor_video_is_refused_at_run_start(comfy, wan):
    """A model that samples [B, C, L] latents (the community stand-in loops over tokens, so it takes one; here with an
    audio latent format, one latent dimension) samples without SeaCache and is refused with SeaCache before its first
    call (the gate used to raise at the first call)."""
    from comfy.latent_formats import LatentFormat

    class Audio16(LatentFormat):
        latent_channels = standin.LATENT_CHANNELS
        latent_dimensions = 1

    model = standin.build(latent_format=Audio16)
    latent = torch.zeros(1, standin.LATENT_CHANNELS, 24)
    conds = dict(positive=standin.conditioning([5, 9, 11]), negative=standin.conditioning([7, 2]))
    plain = sample(comfy, model, latent, schedule(comfy, model, 6), **conds)
    assert plain.shape == latent.shape and torch.isfinite(plain).all()
    patched = seacache(comfy, model)
    refused_before_any_call(comfy, patched, latent, schedule(comfy, model, 6), r"\(1, 16, 24\).*without SeaCache Apply", **conds)


def test_other_steps_and_size_on_a_second_run_start_clean(comfy, wan):
    """10 steps at one size, then 6 steps at another with the same patched MODEL: the second run's decisions and
    output are a fresh Apply's."""
    patched = seacache(comfy, wan, threshold=1.0)  # reuses on both runs
    first = sample(comfy, patched, torch.zeros(1, *SPEC.latent), schedule(comfy, wan, 10))
    first_report = last_report(patched)
    assert first.shape == (1, *SPEC.latent) and first_report["steps"] == 10 and first_report["reused"] > 0
    small = torch.zeros(1, 16, 2, 6, 6)
    second = sample(comfy, patched, small, schedule(comfy, wan, 6))
    second_report = last_report(patched)
    fresh = seacache(comfy, wan, threshold=1.0)
    expected = sample(comfy, fresh, small, schedule(comfy, wan, 6))
    assert torch.equal(second, expected)
    assert second_report == last_report(fresh)
    assert second_report["steps"] == 6 and second_report["calls"] == 6 and second_report["reused"] > 0


def test_other_steps_and_size_on_a_second_cosmos3_run_start_clean(tiny):
    """The same on this pack's Cosmos3 (its generator-stack seam, its per-run text cache)."""
    patched = tiny.seacache(threshold=1.0)
    tiny.sample(patched, steps=10)
    assert last_report(patched)["steps"] == 10 and last_report(patched)["reused"] > 0
    small = tiny.empty(width=48, height=32, length=5)
    second = tiny.sample(patched, latent=small, steps=6)
    second_report = last_report(patched)
    fresh = tiny.seacache(threshold=1.0)
    assert torch.equal(second, tiny.sample(fresh, latent=small, steps=6))
    assert second_report == last_report(fresh) and second_report["calls"] == 6 and second_report["reused"] > 0


def test_every_core_scheduler_gives_a_schedule_that_passes(wan):
    """No false refusal: the schedules of every ComfyUI scheduler, 1 to 50 steps, pass the run-start schedule check,
    except kl_optimal at 1 step, whose schedule holds NaN (the run would be NaN anyway)."""
    from comfy.samplers import SCHEDULER_NAMES, calculate_sigmas

    from seacache_testing.comfyui_harness import import_pack_module

    refuse_bad_schedule = import_pack_module("nodes.seacache.run_inputs").refuse_bad_schedule

    model_sampling = wan.get_model_object("model_sampling")
    refused = []
    for scheduler in SCHEDULER_NAMES:
        for steps in (1, 2, 3, 4, 6, 10, 20, 30, 50):
            sigmas = calculate_sigmas(model_sampling, scheduler, steps)
            try:
                refuse_bad_schedule(sigmas.tolist())
            except ValueError as error:
                refused.append((scheduler, steps, "NaN" in str(error)))
    assert len(SCHEDULER_NAMES) >= 9 and refused in ([], [("kl_optimal", 1, True)])
