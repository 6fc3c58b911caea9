"""Bypassing or removing SeaCache Apply leaves no trace, in every shipped workflow. All 10 wire SeaCache Stats on the
latent path (sampler -> Stats -> decode) with its ``model`` from Apply, so with Apply bypassed (Ctrl+B, mode 4: the
frontend feeds each consumer of Apply's MODEL from Apply's own input) Stats gets the loader's MODEL. Stats must pass
the latent through and say so, and the output must be bit-identical to the graph that never had SeaCache (Apply and
Stats bypassed). Runs each workflow in-process on its tiny checkpoint or stand-in models (fresh nodes, no cache);
tests/test_comfy_server_bypass.py does the same on a running server."""

from __future__ import annotations

import json

import pytest
import torch

from seacache_testing import workflow_runner as wr
from seacache_testing.api_prompts import object_info_of, prune_unfed
from seacache_testing.workflow_cases import ALL, runnable_tiny_run

NOT_APPLIED = ("SeaCache: not applied (no SeaCache Apply on this MODEL: bypassed, removed or not connected); "
               "the latent passed through unchanged.")
LATENT_CONSUMERS = {"VAEDecode", "LTXVSeparateAVLatent", "SeaCacheCosmos3SoundDecode"}


def load(name: str) -> dict:
    return wr.load_workflow(wr.WORKFLOWS_DIR / name)


def with_mode(workflow: dict, node_type: str, mode: int) -> dict:
    out = json.loads(json.dumps(workflow))
    for node in out["nodes"]:
        if node["type"] == node_type:
            node["mode"] = mode
    return out


def only_id(workflow: dict, node_type: str) -> int:
    (node,) = [n["id"] for n in workflow["nodes"] if n["type"] == node_type]
    return node


def test_bypass_resolution_follows_the_frontend_rule():
    """The converted prompt of a bypassed Apply: every consumer of Apply's MODEL reads Apply's input (the loader),
    and a bypassed Stats feeds its latent consumers from its ``samples`` input while its STRING and IMAGE outputs,
    which no input of Stats matches, reach nothing."""
    workflow = with_mode(with_mode(load(ALL[0]), "SeaCacheApply", wr.BYPASS), "SeaCacheStats", wr.BYPASS)
    nodes, links = wr.nodes_by_id(workflow), {link[0]: link for link in workflow["links"]}
    apply, stats = only_id(workflow, "SeaCacheApply"), only_id(workflow, "SeaCacheStats")
    loader = wr.link_source(nodes, links, nodes[apply]["inputs"][0]["link"])
    sampled = wr.link_source(nodes, links, nodes[stats]["inputs"][0]["link"])
    for link in workflow["links"]:
        if link[1] == apply:
            assert wr.link_source(nodes, links, link[0]) == loader
        if link[1] == stats:
            assert wr.link_source(nodes, links, link[0]) == (sampled if link[2] == 0 else None)


@pytest.mark.parametrize("name", ALL)
def test_every_shipped_workflow_wires_stats_on_the_latent_path(name):
    """What makes a bypassed Apply reach Stats: Stats' ``samples`` come from the sampler, its latent output feeds the
    decode path, and its ``model`` comes from Apply; bypassed, that becomes the MODEL feeding Apply."""
    workflow = load(name)
    nodes, links = wr.nodes_by_id(workflow), {link[0]: link for link in workflow["links"]}
    stats, apply = only_id(workflow, "SeaCacheStats"), only_id(workflow, "SeaCacheApply")
    inputs = {inp["name"]: inp["link"] for inp in nodes[stats]["inputs"]}
    assert nodes[links[inputs["samples"]][1]]["type"] in ("SamplerCustomAdvanced", "KSampler")
    assert links[inputs["model"]][1] == apply
    assert {nodes[link[3]]["type"] for link in workflow["links"] if link[1] == stats and link[2] == 0} <= LATENT_CONSUMERS
    bypassed = with_mode(workflow, "SeaCacheApply", wr.BYPASS)
    source = wr.link_source(wr.nodes_by_id(bypassed), links, inputs["model"])
    assert source == [str(links[nodes[apply]["inputs"][0]["link"]][1]), 0]


@pytest.mark.parametrize("name", ALL)
def test_bypassed_apply_runs_as_if_seacache_never_was_there(anymodel_session, name):
    ns = anymodel_session
    overrides, stand_ins = runnable_tiny_run(ns, name)
    workflow = load(name)
    bypassed = wr.to_api_prompt(ns, with_mode(workflow, "SeaCacheApply", wr.BYPASS), overrides)
    never = wr.to_api_prompt(ns, with_mode(with_mode(workflow, "SeaCacheApply", wr.BYPASS), "SeaCacheStats", wr.BYPASS), overrides)
    never = prune_unfed(never, object_info_of(ns, {e["class_type"] for e in never.values()}))
    assert {e["class_type"] for e in never.values()} >= LATENT_CONSUMERS & {e["class_type"] for e in bypassed.values()}
    ran = wr.run_api_prompt(ns, bypassed, stand_ins=stand_ins, workflow=workflow)
    reference = wr.run_api_prompt(ns, never, stand_ins=stand_ins, workflow=workflow)
    stats = only_id(workflow, "SeaCacheStats")
    assert ran.outputs[stats][1] == NOT_APPLIED and ran.ui[stats]["seacache"][0]["note"] == NOT_APPLIED
    compared = [int(k) for k, e in never.items() if e["class_type"] in LATENT_CONSUMERS | {"SamplerCustomAdvanced", "KSampler"}]
    assert len(compared) >= 2
    for node in compared:  # the sampled latent and what decodes it, bit for bit
        assert tensors_of(ran.outputs[node]) and tensors_of(ran.outputs[node]) == tensors_of(reference.outputs[node])


def tensors_of(value) -> list:
    """Every tensor in a node's outputs (in dicts, lists, nested latents), as exact bytes with dtype and shape."""
    if isinstance(value, torch.Tensor):
        return [(str(value.dtype), tuple(value.shape), value.contiguous().view(torch.uint8).flatten().numpy().tobytes()
                 if value.numel() else b"")]
    if hasattr(value, "unbind") and getattr(value, "is_nested", False):  # comfy.nested_tensor.NestedTensor
        return tensors_of(list(value.unbind()))
    if isinstance(value, dict):
        return [t for key in sorted(value) for t in tensors_of(value[key])]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensors_of(item)]
    return []
