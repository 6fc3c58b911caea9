"""SeaCache Apply/Stats in a real ComfyUI (needs COMFYUI_PATH): skipping, exactness, run isolation, batching,
split cond/uncond, multi-evaluation samplers, failures, re-application, wrong models, torch.compile, the UI."""

import sys

import pytest
import torch

from seacache_testing.comfy_runs import LayerCalls, rel

STEPS = 12


def timeline(report):
    return [(r["step"], r["decision"], r["reason"]) for r in report["records"]]


def last_report(model):
    return model.model_options["transformer_options"]["seacache_settings"].last_run


def test_seacache_skips_the_generator_and_text_layers(tiny):
    patched = tiny.seacache()
    counter = LayerCalls(tiny.model.model.diffusion_model)
    try:
        cached = tiny.sample(patched, steps=STEPS)
    finally:
        counter.close()
    report = last_report(patched)
    layers = len(counter.layers)
    assert report["status"] == "completed" and report["calls"] == STEPS and report["steps"] == STEPS
    assert report["reused"] > 0 and report["ran"] + report["reused"] == report["calls"]
    assert counter.gen == report["ran"] * layers  # reused calls ran no generator layer
    assert counter.text == layers  # the text pathway ran once for the run, never on reused steps
    assert report["records"][0]["decision"] == "forced" and report["records"][-1]["reason"] == "end"
    assert report["speedup"] == pytest.approx(STEPS / report["ran"])
    plain = tiny.sample(tiny.model, steps=STEPS)
    assert torch.isfinite(cached).all() and 0 < rel(cached, plain) < 0.5


def test_threshold_zero_is_bit_identical(tiny):
    exact = tiny.seacache(threshold=0.0)
    assert torch.equal(tiny.sample(exact, steps=STEPS), tiny.sample(tiny.model, steps=STEPS))
    assert last_report(exact)["reused"] == 0


def test_input_model_is_unchanged_and_runs_uncached(tiny):
    before = tiny.sample(tiny.model, steps=STEPS)
    patched = tiny.seacache()
    assert "seacache_settings" not in tiny.model.model_options.get("transformer_options", {})
    assert torch.equal(tiny.sample(tiny.model, steps=STEPS), before)
    assert patched is not tiny.model


def test_two_runs_in_a_row_are_identical(tiny):
    patched = tiny.seacache()
    first = tiny.sample(patched, steps=STEPS)
    report1 = last_report(patched)
    second = tiny.sample(patched, steps=STEPS)
    assert torch.equal(first, second)
    assert report1 == last_report(patched)


def test_batch_of_two_keeps_a_state_per_item(tiny):
    patched = tiny.seacache()
    out = tiny.sample(patched, latent=tiny.empty(batch_size=2), steps=STEPS)
    assert out.shape[0] == 2 and torch.isfinite(out).all()
    record = last_report(patched)["records"][5]
    assert len(record["branches"]) == 4  # cond and uncond of each of the two items


def test_cond_and_uncond_in_separate_calls(tiny):
    """Forcing one call per conditioning (as low-VRAM mode or unbatchable conds do) keeps per-branch state."""
    import comfy.patcher_extension

    def one_call_per_cond(executor, model, conds, x_in, timestep, model_options):
        outs = []
        for cond in conds:
            outs += executor(model, [cond], x_in, timestep, model_options)
        return outs

    batched = tiny.seacache()
    split = tiny.seacache()
    split.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.CALC_COND_BATCH, "split", one_call_per_cond)
    a = tiny.sample(batched, steps=STEPS)
    b = tiny.sample(split, steps=STEPS)
    rb, rs = last_report(batched), last_report(split)
    assert rs["calls"] == 2 * rb["calls"]
    assert [r["decision"] for r in rs["records"][::2]] == [r["decision"] for r in rb["records"]]
    assert [r["decision"] for r in rs["records"][1::2]] == [r["decision"] for r in rb["records"]]
    assert rel(b, a) < 1e-4


def test_heun_extra_evaluations_compute_and_are_reported(tiny):
    patched = tiny.seacache()
    out = tiny.sample(patched, steps=8, sampler="heun")
    report = last_report(patched)
    reasons = [r["reason"] for r in report["records"]]
    assert torch.isfinite(out).all()
    assert report["calls"] == 2 * 8 - 1
    assert "repeat" in reasons
    assert all(r["decision"] == "forced" for r in report["records"] if r["reason"] in ("repeat", "off_schedule"))


def test_dpmpp_2s_midpoints_are_off_schedule(tiny):
    patched = tiny.seacache()
    tiny.sample(patched, steps=6, sampler="dpmpp_2s_ancestral")
    reasons = [r["reason"] for r in last_report(patched)["records"]]
    assert reasons.count("off_schedule") >= 5


def test_failed_run_frees_state_and_next_run_is_clean(tiny):
    import comfy.patcher_extension

    reference = tiny.sample(tiny.seacache(), steps=STEPS)
    patched = tiny.seacache()
    calls = {"n": 0}

    def explode_on_fifth(executor, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise RuntimeError("boom mid-sampling")
        return executor(*args, **kwargs)

    failing = patched.clone()
    failing.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "explode", explode_on_fifth)
    with pytest.raises(RuntimeError, match="boom"):
        tiny.sample(failing, steps=STEPS)
    failed = last_report(patched)  # the settings object is shared by clones
    assert failed["status"] == "failed" and failed["calls"] == 4
    assert torch.equal(tiny.sample(patched, steps=STEPS), reference)
    assert last_report(patched)["status"] == "completed"


def test_applying_twice_replaces_the_first(tiny):
    twice = tiny.seacache(tiny.seacache(threshold=0.0), threshold=0.5)
    for wrapper_type in ("outer_sample", "apply_model"):  # the rest live in each run's private options
        assert len(twice.get_wrappers(wrapper_type, "seacache")) == 1
    once = tiny.seacache(threshold=0.5)
    assert torch.equal(tiny.sample(twice, steps=STEPS), tiny.sample(once, steps=STEPS))


def test_something_that_is_no_diffusion_model_is_rejected_when_the_node_runs(tiny):
    import comfy.model_patcher

    other = comfy.model_patcher.ModelPatcher(torch.nn.Linear(2, 2), load_device="cpu", offload_device="cpu")
    with pytest.raises(ValueError, match="needs a diffusion MODEL"):
        tiny.seacache(model=other)


def test_stats_name_the_generator_stack_seam(tiny):
    patched = tiny.seacache()
    tiny.sample(patched, steps=STEPS)
    assert last_report(patched)["seam"] == "Cosmos3 generator stack (this pack)"


def test_bad_settings_are_rejected_and_model_untouched(tiny):
    with pytest.raises(ValueError, match="start_percent"):
        tiny.seacache(start_percent=0.8, end_percent=0.2)
    assert tiny.model.get_wrappers("apply_model", "seacache") == []


def test_cpu_residual_storage_and_window(tiny):
    a = tiny.sample(tiny.seacache(), steps=STEPS)
    assert torch.equal(tiny.sample(tiny.seacache(residual_storage="cpu"), steps=STEPS), a)
    windowed = tiny.seacache(start_percent=0.5, end_percent=1.0)
    tiny.sample(windowed, steps=STEPS)
    start_sigma = windowed.get_model_object("model_sampling").percent_to_sigma(0.5)
    records = last_report(windowed)["records"]
    assert all(r["decision"] != "reused" for r in records if r["sigma"] > start_sigma)
    assert any(r["reason"] == "window" for r in records)
    assert any(r["decision"] == "reused" for r in records if r["sigma"] <= start_sigma)


def test_window_is_comfyui_sampling_percent(tiny):
    """start/end_percent are ComfyUI's sampling percents (percent_to_sigma, as its EasyCache reads them), turned
    into the run's steps at run start; the defaults 0 and 1 allow every step of any schedule."""
    patched = tiny.seacache(start_percent=0.3, end_percent=0.8)
    settings = patched.model_options["transformer_options"]["seacache_settings"]
    sampling = patched.get_model_object("model_sampling")
    shift = sampling.shift  # flow: percent p is the shifted time 1 - p
    high, low = (shift * t / (1 + (shift - 1) * t) for t in (0.7, 0.2))
    assert (sampling.percent_to_sigma(0.3), sampling.percent_to_sigma(0.8)) == pytest.approx((high, low))
    assert shift == 10.0 and 0.75 < high < 0.96 and 0.71 < low < 0.75
    sigmas = torch.tensor([1.0, 0.9, 0.75, 0.5, 0.3, 0.1, 0.0])
    assert settings.reuse_steps(sampling, sigmas) == range(1, 3)  # sigmas 0.9 and 0.75 lie in [low, high]
    default = tiny.seacache().model_options["transformer_options"]["seacache_settings"]
    assert default.reuse_steps(sampling, sigmas) == range(0, 6)
    assert default.reuse_steps(sampling, torch.tensor([14.6, 3.0, 0.03, 0.0])) == range(0, 3)  # not a flow range
    late = tiny.seacache(start_percent=0.6, end_percent=0.62).model_options["transformer_options"]["seacache_settings"]
    assert late.reuse_steps(sampling, sigmas) == range(0)  # sigmas 0.87 to 0.86: no step inside, nothing reused


@pytest.mark.parametrize("keys", [["diffusion_model"], ["diffusion_model.layers.0", "diffusion_model.layers.1"]], ids=["whole", "layers"])
def test_torch_compile_still_works(tiny, keys):
    from comfy_api.torch_helpers import set_torch_compile_wrapper

    torch._dynamo.reset()
    eager = tiny.seacache()
    expected = tiny.sample(eager, steps=STEPS)
    compiled = tiny.seacache()
    set_torch_compile_wrapper(compiled, backend="eager", keys=keys)
    got = tiny.sample(compiled, steps=STEPS)
    assert timeline(last_report(compiled)) == timeline(last_report(eager))
    assert rel(got, expected) < 1e-5


def test_stats_node_outputs_summary_chart_and_ui(tiny):
    patched = tiny.seacache()
    samples = tiny.sample(patched, steps=STEPS)
    res = tiny.stats(patched, samples)
    passed, summary, image = res.outputs
    report = last_report(patched)
    assert torch.equal(passed["samples"], samples)
    assert f"{report['calls']} calls, {report['ran']} ran the stack, {report['reused']} reused" in summary
    assert image.shape[0] == 1 and image.shape[-1] == 3 and image.shape[1] > 100
    sent = res.ui["seacache"][0]  # the report plus the chart's colors, which the frontend draws with
    assert {k: v for k, v in sent.items() if k != "colors"} == report
    assert sent["colors"] == {"computed": "#4287f5", "reused": "#2ecc71", "forced": "#8c8c96", "threshold": "#e74c3c"}
    assert "images" not in res.ui  # the chart shows once on the node: the extension draws it from the report


def test_stats_before_any_run_and_on_plain_model(tiny):
    patched = tiny.seacache()
    res = tiny.stats(patched, torch.zeros(1, 48, 3, 4, 4))
    assert "no run recorded" in res.outputs[1]
    samples = tiny.sample(tiny.model, steps=4)
    for model in (tiny.model, None):  # SeaCache Apply bypassed (Stats gets the loader's MODEL), or removed
        res = tiny.ns.run_node("SeaCacheStats", samples={"samples": samples},
                               **({} if model is None else {"model": model}))
        passed, summary, image = res.outputs
        assert passed["samples"] is samples  # passed through, the prompt goes on to decode and save
        assert summary == "SeaCache: not applied (no SeaCache Apply on this MODEL: bypassed, removed or not " \
                          "connected); the latent passed through unchanged."
        assert res.ui["seacache"][0]["note"] == summary and "records" not in res.ui["seacache"][0]
        assert image.shape[0] == 1 and image.shape[-1] == 3 and image.max() > image.min()  # the line is drawn


def test_a_run_that_reused_nothing_says_why_in_one_line(tiny):
    patched = tiny.seacache(threshold=0.0)
    res = tiny.stats(patched, tiny.sample(patched, steps=STEPS))
    note = f"SeaCache reused 0 of {STEPS} calls: all {STEPS - 2} steps free to reuse reached the threshold (a higher " \
           "threshold reuses more)."
    assert res.ui["seacache"][0]["note"] == note and "reused nothing: all" in res.outputs[1]
    few = tiny.seacache(warmup_steps=2, end_steps=1)
    res = tiny.stats(few, tiny.sample(few, steps=3))
    assert res.ui["seacache"][0]["note"] == ("SeaCache reused 0 of 3 calls: 3 steps leave no step between the warm-up "
                                             "and the final steps.")


def test_interrupted_run_is_reported_and_logged_as_interrupted(tiny, caplog):
    import comfy.model_management
    import comfy.patcher_extension

    patched = tiny.seacache()
    calls = {"n": 0}

    def interrupt_on_third(executor, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # what ComfyUI raises when the user presses Cancel (POST /interrupt)
            raise comfy.model_management.InterruptProcessingException()
        return executor(*args, **kwargs)

    interrupted = patched.clone()
    interrupted.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "interrupt", interrupt_on_third)
    with caplog.at_level("INFO"), pytest.raises(comfy.model_management.InterruptProcessingException):
        tiny.sample(interrupted, steps=STEPS)
    report = last_report(patched)
    assert report["status"] == "interrupted" and report["calls"] == 2
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("SeaCache:")]
    assert lines == [f"SeaCache: interrupted run of Cosmos3, seam {report['seam']}: 2 calls, {report['ran']} "
                     f"ran, {report['reused']} reused, estimated stack speedup {report['speedup']:.2f}x"]
    assert tiny.stats(patched, torch.zeros(1)).outputs[1].startswith("SeaCache run interrupted over 12 steps")


def test_progress_messages_reach_the_frontend(tiny):
    patched = tiny.seacache(node_id="42")
    with tiny.ns.fake_prompt_server() as server:
        tiny.sample(patched, steps=STEPS)
    progress = [data for event, data, _ in server.messages if event == "seacache.progress"]
    assert len(progress) == STEPS
    assert progress[-1] == {"node": "42", "reused": last_report(patched)["reused"], "calls": STEPS, "step": STEPS - 1, "steps": STEPS}


def test_auto_residual_order_is_two_on_cosmos3(tiny):
    """auto picks the order measured best on the Cosmos3 architecture (README, Quality), its quadratic term following
    the schedule's shift: the plain order 2 from shift 5 (bit for bit), less of the term past 2 reuses in a row at
    shift 3 (here no cap, so chains run longer); explicit orders stay plain."""
    config = lambda m: m.model_options["transformer_options"]["seacache_settings"].config  # noqa: E731
    auto, two = (tiny.seacache(residual_order=order, threshold=0.6, max_consecutive=-1) for order in ("auto", "2"))
    assert (config(auto).order, config(auto).quadratic_weight) == (2, None)
    assert (config(two).quadratic_weight, config(tiny.seacache(residual_order="1")).order) == (1.0, 1)
    assert torch.equal(tiny.sample(auto, steps=STEPS), tiny.sample(two, steps=STEPS))  # shift 10
    assert last_report(auto)["reused"] > 0
    assert not torch.equal(tiny.sample(auto, steps=STEPS, shift=3.0), tiny.sample(two, steps=STEPS, shift=3.0))


def test_auto_warmup_is_one_on_cosmos3_at_every_shift(tiny):
    """warmup_steps -1 (auto) keeps warm-up 1 on Cosmos3, whose order-2 seam had it lowest at every shift; at shift 3
    the run equals an explicit warm-up 1 bit for bit."""
    config = lambda m: m.model_options["transformer_options"]["seacache_settings"].config  # noqa: E731
    auto, one = (tiny.seacache(residual_order="auto", warmup_steps=w) for w in (-1, 1))
    assert config(auto).warmup_steps == 1
    assert torch.equal(tiny.sample(auto, steps=STEPS, shift=3.0), tiny.sample(one, steps=STEPS, shift=3.0))
    assert [r["reason"] for r in last_report(auto)["records"]].count("warmup") == 1


def test_chebyshev_residual_order_forecasts_every_reused_call(tiny, monkeypatch):
    """residual_order "chebyshev" blends the Chebyshev fit with the seam's Newton order (2 on Cosmos3), and every
    reused call's residual comes from a Chebyshev history whose time map spans the run; here under a speed target
    whose cap gave way (12 steps at 3x: cap 3)."""
    forecast = sys.modules[f"{tiny.pack.__name__}.seacache_core.forecast"]
    spans, predict = [], forecast.ChebyshevHistory.predict
    monkeypatch.setattr(forecast.ChebyshevHistory, "predict",
                        lambda self, *args: spans.append(self.step_span) or predict(self, *args))
    patched = tiny.seacache(residual_order="chebyshev", speedup=3.0, gate="sea same-sigma")
    config = patched.model_options["transformer_options"]["seacache_settings"].config
    assert (config.forecaster, config.order) == ("chebyshev", 2)
    tiny.sample(patched, steps=STEPS)
    report = last_report(patched)
    assert report["speedup"] == 3.0 and "max_consecutive lifted from 2 to 3" in report["summary"]
    assert spans and len(spans) % report["reused"] == 0 and set(spans) == {STEPS}


def test_gate_input_selects_the_same_sigma_gate(tiny):
    """gate = "sea same-sigma" reaches the run: its distances are below the paper's near sigma 1 (shift 10), and at
    threshold 0 it is exact."""
    paper, same = tiny.seacache(threshold=0.0), tiny.seacache(threshold=0.0, gate="sea same-sigma")
    plain = tiny.sample(tiny.model, steps=STEPS)
    assert torch.equal(tiny.sample(same, steps=STEPS), plain)
    tiny.sample(paper, steps=STEPS)
    first = lambda model: last_report(model)["records"][1]["distance"]  # noqa: E731
    assert 0 < first(same) < first(paper)
    assert last_report(same)["reused"] == 0


def test_expert_inputs_are_folded_and_tooltips_fit_the_canvas(tiny):
    """Only model, threshold, residual_storage and speedup show by default where the running ComfyUI knows `advanced`;
    every tooltip is one short sentence (the README carries the detail)."""
    import inspect

    from comfy_api.latest import io

    inputs = {i.id: i for i in tiny.ns.node("SeaCacheApply").GET_SCHEMA().inputs}
    assert all(i.tooltip and len(i.tooltip) <= 120 and i.tooltip.count(". ") == 0 for i in inputs.values())
    assert "0 = never reuse" in inputs["max_consecutive"].tooltip and "Sampling percent" in inputs["start_percent"].tooltip
    if "advanced" in inspect.signature(io.Input.__init__).parameters:
        assert {name for name, i in inputs.items() if not i.advanced} == {"model", "threshold", "residual_storage", "speedup"}
        assert "advanced" in inputs["end_percent"].as_dict() and inputs["end_percent"].as_dict()["advanced"] is True
