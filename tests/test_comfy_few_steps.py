"""SeaCache at its defaults on few-step sampling (4, 6 and 8 steps, CFG 1, euler) through ComfyUI (needs COMFYUI_PATH):
ComfyUI's tiny Wan 2.1 T2V (a lightx2v-style graph: BasicScheduler "simple") and this pack's Cosmos3 as a 4-step
checkpoint (its distilled sigmas through Cosmos3 Distilled Scheduler at 4 steps, Cosmos3 Scheduler at shift 5 for 6
and 8). Each run is exact at threshold 0; below ``min_steps`` (8) the defaults reuse nothing, are exact and say why in
one line of SeaCache Stats' summary; from 8 steps on they decide as ``min_steps`` 0 does, which reuses as before the
floor: output finite and near the uncached one, first and last step computed. The error numbers on trained proxies
and the gate's wall cost: ``python -m benchmarks.bench_few_steps``."""

import pytest
import torch

from seacache_testing import proxy_wan, tiny_comfy_models
from seacache_testing.anymodel_runs import last_report
from seacache_testing.composition_cases import with_defaults

STEPS = (4, 6, 8)
WAN = tiny_comfy_models.SPECS["wan21_t2v"]


@pytest.fixture(scope="module")
def wan(pack):
    return tiny_comfy_models.build("wan21_t2v")


@pytest.fixture(scope="module")
def four_step(comfy, pack, tmp_path_factory):
    """The tiny Cosmos3 4-step checkpoint (``tiny-t2i-4step``) loaded by the Cosmos3 Loader."""
    pytest.importorskip("diffusers")
    from seacache_testing.comfy_runs import load_tiny

    return load_tiny(comfy, tmp_path_factory, preset="tiny-t2i-4step")


def sample(ns, model, positive, latent, sigmas):
    """Final latent of a CFG-1 euler run (the negative is never called at CFG 1)."""
    guider = ns.run_node("CFGGuider", model=model, positive=positive, negative=positive, cfg=1.0).outputs[0]
    sampler = ns.run_node("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = ns.run_node("RandomNoise", noise_seed=3).outputs[0]
    return ns.run_node("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas,
                       latent_image=latent).outputs[0]["samples"]


def check_few_steps(ns, model, positive, latent, sigmas) -> tuple[dict, float]:
    """The checks every few-step run shares; returns the report and relative L2 error of ``min_steps`` 0."""
    steps = len(sigmas) - 1
    plain = sample(ns, model, positive, latent, sigmas)
    assert torch.isfinite(plain).all()
    exact = with_defaults(ns, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model, threshold=0.0)
    assert torch.equal(sample(ns, exact, positive, latent, sigmas), plain)
    patched = with_defaults(ns, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model)
    cached = sample(ns, patched, positive, latent, sigmas)
    report, reasons = last_report(patched), stats_lines(ns, patched, cached)
    floor_off = with_defaults(ns, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model, min_steps=0)
    reusing = sample(ns, floor_off, positive, latent, sigmas)
    off_report, off_reasons = last_report(floor_off), stats_lines(ns, floor_off, reusing)
    if steps < 8:
        assert torch.equal(cached, plain) and report["reused"] == 0
        assert {r["reason"] for r in report["records"]} == {"few_steps"} and reasons == [
            f"reused nothing: {steps} steps are fewer than min_steps 8 (few-step runs lose more than they gain; lower "
            "min_steps to reuse)"]
    else:
        assert torch.equal(cached, reusing) and report["records"] == off_report["records"] and reasons == off_reasons
    error = float((reusing - plain).norm() / plain.norm())
    decisions = [r["decision"] for r in off_report["records"]]
    assert off_report["calls"] == steps and off_report["status"] == "completed" and off_report["uncached_calls"] == 0
    assert decisions[0] == decisions[-1] == "forced" and torch.isfinite(reusing).all()
    assert len(off_reasons) == (off_report["reused"] == 0)
    assert (error == 0) == (off_report["reused"] == 0) and error < 0.1
    print(f"\n{steps} steps, min_steps 0: {' '.join(d[0].upper() for d in decisions)}, reused {off_report['reused']}, "
          f"relative L2 error {error:.4f}{(', ' + off_reasons[0]) if off_reasons else ''}")
    return off_report, error


@pytest.mark.parametrize("steps", STEPS)
def test_wan_few_steps(comfy, wan, steps):
    sigmas = comfy.run_node("BasicScheduler", model=wan, scheduler="simple", steps=steps, denoise=1.0).outputs[0]
    positive = tiny_comfy_models.conditioning(WAN, seed=1)
    check_few_steps(comfy, wan, positive, tiny_comfy_models.empty_latent(WAN), sigmas)


@pytest.mark.parametrize("steps", STEPS)
def test_cosmos3_four_step_checkpoint(comfy, four_step, steps):
    ns = comfy
    if steps == 4:  # the checkpoint's own schedule, as the 4-step workflow samples it
        sigmas = ns.run_node("SeaCacheCosmos3DistilledScheduler", model=four_step.model).outputs[0]
        assert torch.allclose(sigmas, torch.tensor([1.0, 0.9375, 0.8333, 0.625, 0.0]), atol=1e-4)
    else:
        sigmas = ns.run_node("SeaCacheCosmos3Scheduler", steps=steps, shift=5.0, denoise=1.0).outputs[0]
    check_few_steps(ns, four_step.model, four_step.encode(), four_step.empty(), sigmas)


def stats_lines(ns, patched, samples) -> list[str]:
    _, summary, _ = ns.run_node("SeaCacheStats", samples={"samples": samples}, model=patched).outputs
    return [line for line in summary.splitlines() if line.startswith("reused nothing: ")]


def test_trained_wan_at_four_steps_reuses_nothing_and_says_why(comfy, pack):
    """The trained Wan proxy at 4 steps, shift 5, CFG 1 (as ``bench_few_steps`` samples it): the defaults reuse nothing
    (4 steps are fewer than ``min_steps``); without the floor the distance at both free steps reaches the default
    threshold, so both runs are exact, and SeaCache Stats says why in one line."""
    model = comfy.run_node("ModelSamplingSD3", model=proxy_wan.load_model(), shift=5.0).outputs[0]
    sigmas = comfy.run_node("BasicScheduler", model=model, scheduler="simple", steps=4, denoise=1.0).outputs[0]
    positive = proxy_wan.conditioning(0, proxy_wan.word_table())
    latent = {"samples": proxy_wan.from_model_space(torch.zeros(1, *proxy_wan.LATENT_SHAPE))}
    plain = sample(comfy, model, positive, latent, sigmas)
    patched = with_defaults(comfy, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model)
    cached = sample(comfy, patched, positive, latent, sigmas)
    assert torch.equal(cached, plain) and [r["reason"] for r in last_report(patched)["records"]] == ["few_steps"] * 4
    assert stats_lines(comfy, patched, cached) == ["reused nothing: 4 steps are fewer than min_steps 8 (few-step runs "
                                                   "lose more than they gain; lower min_steps to reuse)"]
    floor_off = with_defaults(comfy, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model, min_steps=0)
    cached = sample(comfy, floor_off, positive, latent, sigmas)
    assert torch.equal(cached, plain)
    assert [r["decision"] for r in last_report(floor_off)["records"]] == ["forced", "computed", "computed", "forced"]
    assert stats_lines(comfy, floor_off, cached) == [
        "reused nothing: both steps free to reuse reached the threshold (a higher threshold reuses more)"]


def test_two_steps_leave_nothing_to_reuse(comfy, wan):
    sigmas = comfy.run_node("BasicScheduler", model=wan, scheduler="simple", steps=2, denoise=1.0).outputs[0]
    patched = with_defaults(comfy, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=wan, min_steps=0)
    cached = sample(comfy, patched, tiny_comfy_models.conditioning(WAN, seed=1), tiny_comfy_models.empty_latent(WAN), sigmas)
    assert stats_lines(comfy, patched, cached) == [
        "reused nothing: 2 steps leave no step between the warm-up and the final steps"]
