"""Each SeaCache Stats node shows the run of the sampler whose latent it receives, also when two samplers share one
SeaCache Apply and both ran before either Stats node (the order ComfyUI may choose), or the latent passes through
other nodes first. Runs a tiny Cosmos3 API prompt node by node in ComfyUI's executing-node context."""

from __future__ import annotations

import json

from seacache_testing import workflow_runner as wr
from seacache_testing.workflow_cases import FROZEN, T2V, tiny_run, version_folder


def two_sampler_prompt(steps_a: int, steps_b: int) -> dict:
    """The 1.0.0 T2V prompt up to its sampler (node 10, ``steps_a``), a second sampler (node 11, its own scheduler
    node 12 at ``steps_b``) on the same SeaCache Apply and guider, then a Stats node after each (13 after 10
    directly, 15 after 11 through a latent node 14): the runner's order runs both samplers before both Stats."""
    saved = json.loads((version_folder(FROZEN / "api") / T2V).read_text(encoding="utf-8"))
    overrides, _ = tiny_run(T2V)
    prompt = {k: v for k, v in wr.override_api_prompt(saved, overrides).items() if int(k) <= 10}
    prompt["9"]["inputs"]["steps"] = steps_a
    prompt["12"] = {"class_type": "SeaCacheCosmos3Scheduler", "inputs": {**prompt["9"]["inputs"], "steps": steps_b}}
    prompt["11"] = {"class_type": "SamplerCustomAdvanced", "inputs": {**prompt["10"]["inputs"], "sigmas": ["12", 0]}}
    prompt["13"] = {"class_type": "SeaCacheStats", "inputs": {"samples": ["10", 0], "model": ["2", 0]}}
    prompt["14"] = {"class_type": "LatentMultiply", "inputs": {"samples": ["11", 0], "multiplier": 1.0}}
    prompt["15"] = {"class_type": "SeaCacheStats", "inputs": {"samples": ["14", 0], "model": ["2", 0]}}
    return prompt


def test_two_samplers_on_one_apply_each_stats_shows_its_own_run(session):
    session.load_extra_nodes("nodes_latent.py")
    prompt = two_sampler_prompt(3, 5)
    result = wr.run_api_prompt(session, prompt)
    assert result.order.index(11) < result.order.index(13)  # both samplers ran before the first Stats node
    reports = {stats: result.ui[stats]["seacache"][0] for stats in (13, 15)}
    assert reports[13]["steps"] == 3 and reports[15]["steps"] == 5
    assert all(r["status"] == "completed" and r["calls"] >= r["steps"] for r in reports.values())
    assert result.outputs[13][1].startswith("SeaCache run completed over 3 steps")
    assert result.outputs[15][1].startswith("SeaCache run completed over 5 steps")
    # Outside ComfyUI's executor (no prompt to follow) Stats shows the model's latest run, the second sampler's.
    direct = session.run_node("SeaCacheStats", samples=result.outputs[10][0], model=result.outputs[2][0])
    assert direct.ui["seacache"][0]["steps"] == 5
