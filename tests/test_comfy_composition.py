"""SeaCache Apply in the graphs users build (needs COMFYUI_PATH): ComfyUI's own nodes chained before or after it on
ComfyUI's tiny random-weight Wan 2.1 (and the other core families for the memory estimate).

- Each case of ``composition_cases.CASES`` (block-replace patches, SkipLayerGuidanceDiT, context windows): threshold
  0 bit-identical to the graph without SeaCache; the default threshold reuses and stays within 1.5x of SeaCache
  alone's error (moving context windows: the whole windowed step is the stack, bounded separately); context
  windows reuse at least a third of the calls.
- Other step caches (EasyCache, LazyCache), before or after SeaCache Apply, with settings where they really skip:
  refused at Apply or at run start, before any model call, naming both nodes.
- Concurrent model calls from two threads (what ComfyUI's MultiGPU CFG Split does with one thread per device):
  the same decisions per branch as one batched call, threshold 0 bit-identical.
- The residual history is counted in ComfyUI's memory estimate for every core family's seam.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading

import pytest
import torch

from seacache_testing import composition_cases as cases
from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import counting_blocks, in_threads, last_report, sample, seacache

STEPS = 20
EXTRA_NODES = ("nodes_slg.py", "nodes_context_windows.py", "nodes_easycache.py")


@pytest.fixture(scope="module")
def pack(comfy):
    """The pack loaded as ComfyUI loads it, the core nodes these graphs use, one torch thread (tiny models)."""
    from seacache_testing import comfyui_harness

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    comfy.load_extra_nodes(*EXTRA_NODES)
    yield comfyui_harness.load_pack_with_comfyui_loader(comfy)
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def wan():
    return tiny_comfy_models.build(cases.MODEL)


@pytest.mark.parametrize("case", cases.CASES, ids=lambda c: c.name)
def test_composition_case(comfy, pack, wan, case):
    row = cases.measure(comfy, case, wan)
    print(cases.table([row]))
    assert row["exact"], "threshold 0 must be bit-identical to the same graph without SeaCache"
    assert row["reused"] > 0
    if case.frames is not None:  # context windows on a long latent: a third of the model calls reused at least
        assert 3 * row["reused"] >= row["calls"]
    assert row["error"] <= 1.5 * row["alone_error"]
    if "SkipLayerGuidance" in case.name:  # the skip-layer call of every step ran plain: it skips the tiny Wan's
        # last block, where the stack is left (DiTSimple: the skipped uncond has no main call to follow at all);
        # a skip pass that follows: test_skip_layer_pass_follows_the_main_call
        assert row["guidance_calls"] == case.steps and row["guidance_followed"] == 0


def test_two_ksampler_advanced_stages_each_with_seacache(comfy, pack, wan):
    """The Wan 2.2 A14B pattern: a high-noise model samples the first half of the steps and a low-noise model the
    rest (two KSamplerAdvanced), each with its own SeaCache Apply. Threshold 0 is bit-identical; both stages reuse;
    the error stays within 1.5x of SeaCache on one model over the whole schedule."""
    spec = tiny_comfy_models.SPECS[cases.MODEL]
    low = tiny_comfy_models.build(cases.MODEL, seed=1)
    positive, negative = tiny_comfy_models.conditioning(spec, seed=1), tiny_comfy_models.conditioning(spec, seed=2)

    def ksampler(model, latent, start, end):
        """KSamplerAdvanced over steps [start, end) of the schedule: noise added only at the start, leftover noise
        returned unless the schedule ends."""
        return comfy.run_node("KSamplerAdvanced", model=model, add_noise="enable" if start == 0 else "disable",
                              noise_seed=3, steps=STEPS, cfg=cases.CFG, sampler_name="euler", scheduler="simple",
                              positive=positive, negative=negative, latent_image=latent, start_at_step=start,
                              end_at_step=end, return_with_leftover_noise="enable" if end < STEPS else "disable").outputs[0]

    def two_stages(high_model, low_model):
        half = ksampler(high_model, tiny_comfy_models.empty_latent(spec), 0, STEPS // 2)
        return ksampler(low_model, half, STEPS // 2, STEPS)["samples"]

    def one_model(model):
        return ksampler(model, tiny_comfy_models.empty_latent(spec), 0, STEPS)["samples"]

    plain = two_stages(wan, low)
    assert torch.equal(two_stages(seacache(comfy, wan, threshold=0.0), seacache(comfy, low, threshold=0.0)), plain)
    high_cached, low_cached = seacache(comfy, wan), seacache(comfy, low)
    error = cases.rel_error(two_stages(high_cached, low_cached), plain)
    assert last_report(high_cached)["calls"] == last_report(low_cached)["calls"] == STEPS // 2
    assert last_report(high_cached)["reused"] > 0 and last_report(low_cached)["reused"] > 0
    alone = cases.rel_error(one_model(seacache(comfy, wan)), one_model(wan))
    print(f"two stages: error {error:.4f}, reused {last_report(high_cached)['reused']} + {last_report(low_cached)['reused']} of {STEPS}; "
          f"SeaCache alone on one model {alone:.4f}")
    assert error <= 1.5 * alone


def _other_cache(comfy, cache, model):
    """EasyCache or LazyCache over the whole schedule at a threshold where it skips on the tiny model."""
    return cases.with_defaults(comfy, cache, model=model, reuse_threshold=1.0, start_percent=0.0, end_percent=1.0,
                               verbose=False)


@pytest.mark.parametrize("cache", ["EasyCache", "LazyCache"])
def test_other_caches_are_refused_before_the_first_step(comfy, pack, wan, cache):
    spec = tiny_comfy_models.SPECS[cases.MODEL]
    blocks_per_call = 2
    with counting_blocks(wan.model.diffusion_model) as blocks:
        sample(comfy, _other_cache(comfy, cache, wan), spec, steps=STEPS)
    assert blocks["calls"] < STEPS * blocks_per_call, f"{cache} skipped nothing; the test needs settings where it skips"

    with pytest.raises(ValueError, match=f"SeaCache Apply and {cache}"):
        seacache(comfy, _other_cache(comfy, cache, wan))  # other cache first: refused by SeaCache Apply

    after = _other_cache(comfy, cache, seacache(comfy, wan))  # other cache last: refused at run start
    with counting_blocks(wan.model.diffusion_model) as blocks, pytest.raises(ValueError, match=f"SeaCache Apply and {cache}"):
        sample(comfy, after, spec, steps=STEPS)
    assert blocks["calls"] == 0


def answering(model):
    """A clone of ``model`` whose DIFFUSION_MODEL wrapper answers every third call itself (the model never runs)."""
    from comfy.patcher_extension import WrappersMP

    state = {"calls": 0, "last": None}

    def wrapper(executor, *args, **kwargs):
        state["calls"] += 1
        if state["calls"] % 3 == 0 and state["last"] is not None:
            return state["last"]
        state["last"] = executor(*args, **kwargs)
        return state["last"]

    model = model.clone()
    model.add_wrapper_with_key(WrappersMP.DIFFUSION_MODEL, "answers", wrapper)
    return model


def test_a_call_that_misses_the_seam_runs_whole_and_is_counted(comfy, pack, wan):
    """A node whose DIFFUSION_MODEL wrapper answers every third call itself (the model never runs, so no seam is
    passed): no error mid-run, the gate forgets those calls, the report counts them, threshold 0 stays exact."""
    spec = tiny_comfy_models.SPECS[cases.MODEL]
    plain = sample(comfy, answering(wan), spec, steps=STEPS)
    exact = answering(seacache(comfy, wan, threshold=0.0))
    assert torch.equal(sample(comfy, exact, spec, steps=STEPS), plain)
    report = last_report(exact)
    assert report["uncached_calls"] == STEPS // 3 and report["calls"] == STEPS - STEPS // 3
    cached = answering(seacache(comfy, wan))
    assert torch.isfinite(sample(comfy, cached, spec, steps=STEPS)).all() and last_report(cached)["status"] == "completed"


def test_each_run_logs_one_summary_line_and_warns_once_when_calls_ran_whole(comfy, pack, wan, caplog):
    """One INFO line per run (model, seam, calls, ran, reused, speedup); one warning per run only when calls
    missed the seam and ran whole."""
    spec = tiny_comfy_models.SPECS[cases.MODEL]
    for model, missed in ((seacache(comfy, wan), 0), (answering(seacache(comfy, wan)), STEPS // 3)):
        caplog.clear()
        with caplog.at_level(logging.INFO):
            sample(comfy, model, spec, steps=STEPS)
        lines = [r for r in caplog.records if r.getMessage().startswith("SeaCache:")]
        report = last_report(model)
        summary = (f"completed run of {type(wan.model).__name__}, seam {report['seam']}: {report['calls']} calls, "
                   f"{report['ran']} ran, {report['reused']} reused, estimated stack speedup {report['speedup']:.2f}x")
        assert [r.levelno for r in lines] == [logging.INFO] + [logging.WARNING] * (missed > 0)
        assert lines[0].getMessage() == f"SeaCache: {summary}"
        assert not missed or lines[1].getMessage().startswith(f"SeaCache: {missed} of {STEPS} model calls")


def _threaded_calls(executor, model, conds, x_in, timestep, model_options):
    """``CALC_COND_BATCH`` wrapper: each conditioning list in its own thread, all entering the model together."""
    barrier = threading.Barrier(len(conds))

    def work(cond):
        with torch.inference_mode():
            barrier.wait()
            return executor(model, [cond], x_in, timestep, model_options)[0]

    return in_threads([functools.partial(work, cond) for cond in conds])


def test_concurrent_calls_from_two_threads(comfy, pack, wan):
    """Cond and uncond enter the model at once from two threads (MultiGPU CFG Split runs one thread per device; on
    the CPU the threads share one device): each branch decides as in one batched call, threshold 0 stays
    bit-identical and the outputs agree with the batched run."""
    from comfy.patcher_extension import WrappersMP

    spec = tiny_comfy_models.SPECS[cases.MODEL]

    def threaded(model):
        model = model.clone()
        model.add_wrapper_with_key(WrappersMP.CALC_COND_BATCH, "threads", _threaded_calls)
        return model

    plain = sample(comfy, threaded(wan), spec, steps=STEPS)
    assert torch.equal(sample(comfy, threaded(seacache(comfy, wan, threshold=0.0)), spec, steps=STEPS), plain)
    batched = seacache(comfy, wan)
    split = seacache(comfy, wan)
    a = sample(comfy, batched, spec, steps=STEPS)
    b = sample(comfy, threaded(split), spec, steps=STEPS)
    rb, rs = last_report(batched), last_report(split)
    assert rs["calls"] == 2 * rb["calls"] and rs["reused"] == 2 * rb["reused"] > 0
    per_branch = {}
    for record in rs["records"]:
        (branch,) = record["branches"]
        per_branch.setdefault(branch.split("/")[0], []).append(record["decision"])
    assert len(per_branch) == 2  # one branch per thread (each thread's call holds one conditioning list)
    assert all(decisions == [r["decision"] for r in rb["records"]] for decisions in per_branch.values())
    assert ((a - b).abs().max() / a.abs().max()).item() < 1e-4


def test_multigpu_cfg_split_clones_emulated_on_the_cpu(comfy, pack, monkeypatch):
    """Core MultiGPU CFG Split with its real per-device clones, emulated on the CPU: ComfyUI is told of a second
    device, ``cpu:1`` (tensors placed there land on the CPU), and the tiny model gets the loader factory ComfyUI
    rebuilds a clone from. Cond and uncond then run concurrently on the two clones, each in its own thread:
    threshold 0 is bit-identical to the same split without SeaCache, and each branch reuses where one batched
    call does."""
    if not (comfy.path / "comfy_extras" / "nodes_multigpu.py").is_file():
        pytest.skip("this ComfyUI has no MultiGPU CFG Split")
    comfy.load_extra_nodes("nodes_multigpu.py")
    monkeypatch.setattr(comfy.mm, "get_all_torch_devices", lambda exclude_current=False: [torch.device("cpu"), torch.device("cpu", 1)])
    loaded = comfy.mm.loaded_models  # the node scans loaded models; patchers earlier tests dropped are None there
    monkeypatch.setattr(comfy.mm, "loaded_models", lambda *a, **k: [m for m in loaded(*a, **k) if m is not None])
    spec = tiny_comfy_models.SPECS[cases.MODEL]
    wan = tiny_comfy_models.build(cases.MODEL)
    wan.cached_patcher_init = (tiny_comfy_models.build, (cases.MODEL,))

    def split(model):
        split_model = comfy.run_node("MultiGPU_WorkUnits", model=model, max_gpus=2).outputs[0]
        assert [c.load_device for c in split_model.get_additional_models_with_key("multigpu")] == [torch.device("cpu", 1)]
        return split_model

    plain = sample(comfy, split(wan), spec, steps=STEPS)
    assert torch.equal(sample(comfy, split(seacache(comfy, wan, threshold=0.0)), spec, steps=STEPS), plain)
    batched = seacache(comfy, wan)
    sample(comfy, batched, spec, steps=STEPS)
    cached = split(seacache(comfy, wan))
    sample(comfy, cached, spec, steps=STEPS)
    report = last_report(cached)
    per_branch = {}
    for record in report["records"]:
        (branch,) = record["branches"]
        per_branch.setdefault(branch, []).append(record["decision"])
    assert sorted(per_branch) == ["cond0/0", "uncond0/0"] and report["reused"] > 0
    assert all(decisions == [r["decision"] for r in last_report(batched)["records"]] for decisions in per_branch.values())


# Residual elements per item of each tiny model's block-stack seam: image tokens x hidden width.
RESIDUAL_NUMEL = {
    "wan21_t2v": 3 * 4 * 4 * 128,  # latent 3x8x8, patch 1x2x2, dim 128
    "wan21_i2v": 3 * 4 * 4 * 128,
    "wan22_ti2v_5b": 3 * 4 * 4 * 128,
    "hunyuan_video": 3 * 4 * 4 * 128,  # patch 1x2x2, hidden 128
    "ltxv": 2 * 4 * 4 * 64,  # patch 1, inner dim 2 heads x 32
    "ltxav": (2 * 4 * 4 + 5) * 64,  # 32 video + 5 audio tokens (8 x 16 mel bins each), all at the video width
    "flux": 8 * 8 * 128,  # latent 16x16, patch 2, hidden 128
    "qwen_image": 8 * 8 * 64,  # patch 2, inner dim 2 heads x 32
}


@pytest.mark.parametrize("name", list(RESIDUAL_NUMEL))
def test_memory_estimate_counts_the_residual_history_for_every_seam(comfy, pack, asked, name):
    """What ComfyUI frees before sampling grows by the history at its fullest: 2 branches (cond, uncond) x
    (order + 1) residuals x tokens x width x 4 bytes (fp32); nothing with the history on the CPU."""
    if tiny_comfy_models.missing(name):
        pytest.skip(tiny_comfy_models.missing(name))
    spec = tiny_comfy_models.SPECS[name]
    model = tiny_comfy_models.build(name)
    sample(comfy, model, spec, steps=1)
    sample(comfy, seacache(comfy, model, residual_order="2"), spec, steps=1)
    sample(comfy, seacache(comfy, model, residual_storage="cpu"), spec, steps=1)
    assert asked[1] - asked[0] == pytest.approx(2 * 3 * RESIDUAL_NUMEL[name] * 4)
    assert asked[2] == asked[0]
    assert "memory_required" not in vars(model.model)


def test_a_failure_inside_a_moving_window_step_falls_back_to_whole_calls(comfy, pack, wan, monkeypatch, caplog):
    """SeaCache's own step raising inside a window's model call (moving context windows, where one decision covers
    the step's windows): that window runs its stack, the step is not committed, the rest of the run computes whole,
    the report says why and one warning is logged; nothing is raised into the model."""
    case = next(c for c in cases.CASES if "moving windows, default) after" in c.name)
    spec = cases.spec_for(case)
    plain = sample(comfy, case.build(comfy, wan, lambda m: m), spec, steps=case.steps, cfg=cases.CFG)
    windows = sys.modules[f"{pack.__name__}.nodes.seacache.seams.context_windows"]
    start = windows.WindowedStep.start

    def failing(self, stack_in, frames):
        if self.call.verdict.reuse:
            raise RuntimeError("injected window failure")
        return start(self, stack_in, frames)

    monkeypatch.setattr(windows.WindowedStep, "start", failing)
    slot = {}

    def apply(m):
        slot["model"] = seacache(comfy, m)
        return slot["model"]

    with caplog.at_level("WARNING"):
        out = sample(comfy, case.build(comfy, wan, apply), spec, steps=case.steps, cfg=cases.CFG)
    report = last_report(slot["model"])
    assert report["status"] == "completed" and report["reused"] == 0 and torch.isfinite(out).all()
    assert "RuntimeError: injected window failure" in report["stopped"] and report["uncached_calls"] > 0
    assert cases.rel_error(out, plain) < 1e-5  # every step computed (the failing one too), so the output is exact
    assert sum("SeaCache stopped caching" in r.getMessage() for r in caplog.records) == 1


def test_memory_estimate_counts_a_follower_per_item_under_guidance_functions(comfy, pack, asked):
    """With a guidance function on the run (SkipLayerGuidanceDiT), each item may get a follower with its own
    history: the estimate doubles the history of the plain run."""
    name = cases.MODEL
    spec, model = tiny_comfy_models.SPECS[name], tiny_comfy_models.build(name)
    sample(comfy, cases.skip_layer_guidance(comfy, model), spec, steps=1)
    sample(comfy, cases.skip_layer_guidance(comfy, seacache(comfy, model, residual_order="2")), spec, steps=1)
    assert asked[1] - asked[0] == pytest.approx(2 * 2 * 3 * RESIDUAL_NUMEL[name] * 4)


FOLLOW_SEEDS = (0, 1, 2, 3)


def test_skip_layer_pass_follows_the_main_call(comfy, pack, monkeypatch):
    """SkipLayerGuidanceDiT (scale 3, a middle block of a 6-block Wan) after SeaCache Apply (gate sea, 0.25): the
    skip pass follows its cond's decision with its own history. Threshold 0 stays bit-identical; with reuse the
    skip pass reuses too (fewer stack runs than when it ran plain), and on every fixed seed the error against the
    graph without SeaCache is lower than with the skip pass run plain (docs/quality.md measures both ways)."""
    hooks = sys.modules[f"{pack.__name__}.nodes.seacache.hooks"]
    wan = tiny_comfy_models.build(cases.MODEL, medium=True)
    spec, steps = tiny_comfy_models.MEDIUM[cases.MODEL], 20

    def run(graph, seed):
        return sample(comfy, cases.skip_layer_guidance(comfy, graph), spec, steps=steps, cfg=5.0, seed=seed)

    def cached(seed):
        model = seacache(comfy, wan, threshold=0.25, gate="sea")
        out = run(model, seed)
        report = last_report(model)  # stack runs counted per item: cond and uncond batched, one skip pass
        return out, report, 2 * report["ran"] + report["guidance_calls"] - report["guidance_reused"]

    assert torch.equal(run(seacache(comfy, wan, threshold=0.0), 0), run(wan, 0))
    for seed in FOLLOW_SEEDS:
        reference = run(wan, seed)
        follow, report, follow_work = cached(seed)
        assert report["guidance_calls"] == report["guidance_followed"] == steps
        assert 0 < report["guidance_reused"] <= report["reused"] and report["uncached_calls"] == 0
        with monkeypatch.context() as plain_pass:
            plain_pass.setattr(hooks.SamplingRun, "start_follower", lambda self, options, x, t: None)
            plain, plain_report, plain_work = cached(seed)
        assert plain_report["guidance_followed"] == plain_report["guidance_reused"] == 0
        follow_error, plain_error = cases.rel_error(follow, reference), cases.rel_error(plain, reference)
        print(f"seed {seed}: follow {follow_error:.4f} ({follow_work} stack item runs), "
              f"plain {plain_error:.4f} ({plain_work})")
        assert follow_error < plain_error and follow_work < plain_work
