"""Two threads on one SeaCache-patched MODEL (needs COMFYUI_PATH): nothing of one thread's run or calls reaches the
other's. Each run keeps its own state; a guidance function's model calls are marked on the call itself, so they run
uncached in whichever thread executes them and never mark another thread's calls. Threads are made to overlap
inside the model (a barrier in the diffusion model or its stack's first block) at every model call. That lockstep is
also what ComfyUI needs: a run's end clears the model's one ``current_patcher`` slot, which the other thread's next
model call reads, so free-running threads fail without SeaCache too. Their noise is drawn one thread at a time
(:func:`noise_one_thread_at_a_time`): ComfyUI's seeded noise comes from torch's one process-wide generator."""

from __future__ import annotations

import sys
import threading

import pytest
import torch

from seacache_testing import community_cosmos3_standin as standin
from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import in_threads, last_report, sample, seacache

STEPS = 8
SPEC = tiny_comfy_models.SPECS["wan21_t2v"]


@pytest.fixture(scope="module")
def wan(pack):
    return tiny_comfy_models.build("wan21_t2v")


@pytest.fixture
def noise_one_thread_at_a_time(comfy, monkeypatch):
    """ComfyUI's seeded noise (``RandomNoise``: ``comfy.sample.prepare_noise``) seeds torch's process-wide generator
    (``torch.manual_seed``) and then draws from it. Two threads drawing at once can interleave as seed, seed, draw,
    draw: the second draw continues the first's stream, so that thread samples from other noise than its seed's and
    its output differs from the single-threaded run whatever SeaCache does (at threshold 0 too). That race is
    ComfyUI's, not SeaCache's nor the model's; holding each draw under one lock leaves the threads overlapping where
    the tests look, inside the model."""
    import importlib

    noise = importlib.import_module("comfy.sample")
    draw, lock = noise.prepare_noise, threading.Lock()

    def drawn_alone(*args, **kwargs):
        with lock:
            return draw(*args, **kwargs)

    monkeypatch.setattr(noise, "prepare_noise", drawn_alone)


def guided(model):
    """A clone whose post-CFG function calls the model again (as SAG and PAG do), through the run's options."""
    import comfy.samplers

    def post_cfg(args):
        (extra,) = comfy.samplers.calc_cond_batch(args["model"], [args["cond"]], args["input"], args["sigma"], args["model_options"])
        return args["denoised"] + 0.1 * (args["cond_denoised"] - extra)

    model = model.clone()
    model.set_model_sampler_post_cfg_function(post_cfg)
    return model


def in_other_thread(executor, *args, **kwargs):
    """``CALC_COND_BATCH`` wrapper: every model call runs in a fresh thread (ComfyUI's MultiGPU pool does this)."""
    result = {}

    def work():
        with torch.inference_mode():
            result["out"] = executor(*args, **kwargs)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return result["out"]


class RunReports:
    """Each run's report, by the thread that ran it (the settings' one report slot is shared by both threads)."""

    def __init__(self, pack, monkeypatch):
        hooks = sys.modules[f"{pack.__name__}.nodes.seacache.hooks"]
        self.by_thread = {}
        report = hooks.SamplingRun.report

        def recorded(run, status):
            out = report(run, status)
            self.by_thread[threading.get_ident()] = out
            return out

        monkeypatch.setattr(hooks.SamplingRun, "report", recorded)


def overlapping(module, threads=2):
    """A forward pre-hook on ``module`` that holds each thread until the other arrives (both inside the model)."""
    barrier = threading.Barrier(threads, timeout=30)

    def hold(*_):
        barrier.wait()

    return module.register_forward_pre_hook(hold)


def test_a_guidance_call_run_by_another_thread_stays_uncached(comfy, wan):
    from comfy.patcher_extension import WrappersMP

    patched = guided(seacache(comfy, wan, threshold=1.0))
    patched.add_wrapper_with_key(WrappersMP.CALC_COND_BATCH, "pool", in_other_thread)
    sample(comfy, patched, SPEC, steps=STEPS)
    report = last_report(patched)
    assert report["calls"] == STEPS and report["guidance_calls"] == STEPS and report["reused"] > 0


@pytest.mark.usefixtures("noise_one_thread_at_a_time")
def test_two_threads_on_one_patched_model_decide_as_one_thread(comfy, pack, wan, monkeypatch):
    patched = guided(seacache(comfy, wan, threshold=1.0))
    alone = sample(comfy, patched, SPEC, steps=STEPS)
    alone_report = last_report(patched)
    assert alone_report["reused"] > 0 and alone_report["guidance_calls"] == STEPS
    reports = RunReports(pack, monkeypatch)
    # held at the diffusion model, which every call passes (guidance calls too): neither thread runs ahead and ends
    # its run (ComfyUI then clears the shared current_patcher) while the other is still mid-call
    handle = overlapping(wan.model.diffusion_model)
    try:
        outs = in_threads([lambda: sample(comfy, patched, SPEC, steps=STEPS)] * 2)
    finally:
        handle.remove()
    assert all(torch.equal(out, alone) for out in outs)
    assert len(reports.by_thread) == 2 and all(r == alone_report for r in reports.by_thread.values())


def community_run(ns, model):
    guider = ns.run_node("CFGGuider", model=model, positive=standin.conditioning([5, 9, 11, 3]), negative=standin.conditioning([7, 2]), cfg=5.0).outputs[0]
    sampler = ns.run_node("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = ns.run_node("RandomNoise", noise_seed=4).outputs[0]
    sigmas = ns.run_node("BasicScheduler", model=model, scheduler="simple", steps=STEPS, denoise=1.0).outputs[0]
    latent = {"samples": torch.zeros(1, 16, 3, 4, 4)}
    return ns.run_node("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent).outputs[0]["samples"]


@pytest.mark.usefixtures("noise_one_thread_at_a_time")
@pytest.mark.parametrize("threshold", [0.0, 0.25])
def test_two_threads_on_one_community_model_decide_as_one_thread(comfy, pack, monkeypatch, threshold):
    """The barrier is on the diffusion model, not a layer: the community model calls its layers' methods directly
    (no module hooks run). It holds both threads with their calls bound to the shared layer list, then both run
    the stack. The model's own per-prompt text K/V cache is already filled by the single-threaded runs (the real
    pack's is shared by threads the same way), so what the threads share is SeaCache's layer-stack patch."""
    model = standin.build()
    patched = seacache(comfy, model, threshold=threshold)
    alone = community_run(comfy, patched)
    alone_report = last_report(patched)
    if threshold == 0.0:
        assert torch.equal(alone, community_run(comfy, model)) and alone_report["reused"] == 0
    else:
        assert alone_report["reused"] > 0
    reports = RunReports(pack, monkeypatch)
    handle = overlapping(model.model.diffusion_model)
    try:
        outs = in_threads([lambda: community_run(comfy, patched)] * 2)
    finally:
        handle.remove()
    assert all(torch.equal(out, alone) for out in outs)
    assert len(reports.by_thread) == 2 and all(r == alone_report for r in reports.by_thread.values())


def test_two_threads_estimating_memory_of_one_model_each_count_their_own_history(pack):
    """ComfyUI's memory estimate of a run is shadowed on the shared model instance while the run prepares: a second
    thread preparing meanwhile waits, then counts its own history (not the first run's), and nothing is left behind."""
    from types import SimpleNamespace

    estimate = sys.modules[f"{pack.__name__}.nodes.seacache.estimate"]

    class Base:
        def memory_required(self, input_shape):
            return 1000

    base = Base()
    model = SimpleNamespace(model=base)
    holding, release, seen = threading.Event(), threading.Event(), {}

    def first(model, *args, **kwargs):
        seen["first"] = model.model.memory_required((1,))
        holding.set()
        assert release.wait(10)

    def second(model, *args, **kwargs):
        seen["second"] = model.model.memory_required((1,))

    def prepare(executor, history):
        estimate.counting_kept_memory(lambda base, input_shape: history)(executor, model)  # each run's own

    a = threading.Thread(target=prepare, args=(first, 10))
    a.start()
    assert holding.wait(10)
    b = threading.Thread(target=prepare, args=(second, 20))
    b.start()
    b.join(0.5)  # time for the second thread to reach the model while the first holds it
    release.set()
    a.join()
    b.join()
    assert seen == {"first": 1010, "second": 1020} and "memory_required" not in vars(base)
