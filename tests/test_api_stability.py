"""1.x keeps 1.0.0's prompts working: node ids and input names never change, and inputs added after 1.0.0 are
optional (CHANGELOG.md). Without ComfyUI: the node schemas in nodes/ (read with ``ast``) against the input lists
frozen at the 1.0.0 release. With ComfyUI: every example's 1.0.0 API prompt and UI workflow (tests/fixtures/
api_1_0_0/) validates and runs on the current code with tiny checkpoints, and so does an API prompt saved before
SeaCache Apply had its ``gate`` input."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from seacache_testing import workflow_runner as wr
from seacache_testing.workflow_cases import FIXTURES, FROZEN, LTX2, runnable_tiny_run, tiny_run, version_folder

PRE_GATE = FIXTURES / "api_pre_gate"
EXAMPLES = sorted(p.name for p in (FROZEN / "ui").glob("*.json"))


def frozen_inputs() -> dict:
    """``{node id: {"required": [...], "optional": [...]}}`` as ComfyUI listed them at the 1.0.0 release."""
    return json.loads((FROZEN / "node_inputs.json").read_text(encoding="utf-8"))


def schema_inputs(root: Path = wr.PACK_ROOT) -> dict:
    """``{node id: {input name: optional?}}`` of every ``io.Schema`` under ``root/nodes`` (any depth), read from
    the source: ``inputs=`` a literal list or a module-level helper returning one, items ``X.Input("name", ...)`` or
    helpers returning one."""
    found = {}
    for path in sorted((root / "nodes").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        helpers = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}

        def resolve(node):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in helpers:
                (returned,) = [r.value for r in ast.walk(helpers[node.func.id]) if isinstance(r, ast.Return)]
                return returned
            return node

        for call in ast.walk(tree):
            if not (isinstance(call, ast.Call) and getattr(call.func, "attr", None) == "Schema"):
                continue
            keywords = {k.arg: k.value for k in call.keywords}
            inputs = resolve(keywords.get("inputs", ast.List(elts=[])))
            assert isinstance(inputs, ast.List), f"{path}: inputs of {ast.unparse(keywords['node_id'])} not a literal list"
            items = {}
            for item in map(resolve, inputs.elts):
                assert isinstance(item, ast.Call) and getattr(item.func, "attr", None) == "Input", ast.unparse(item)
                optional = next((k.value for k in item.keywords if k.arg == "optional"), ast.Constant(False))
                items[ast.literal_eval(item.args[0])] = ast.literal_eval(optional)
            found[ast.literal_eval(keywords["node_id"])] = items
    return found


def compatibility_problems(frozen: dict, current: dict) -> list[str]:
    """What breaks a 1.0.0 prompt: a node id gone, a 1.0.0 input gone (removed or renamed) or made required when it
    was optional, an input added since 1.0.0 that is required. ``current``: ``{node: {input: optional?}}``."""
    problems = []
    for node, sections in frozen.items():
        if node not in current:
            problems.append(f"{node}: node id gone")
            continue
        for name in sections["required"] + sections["optional"]:
            if name not in current[node]:
                problems.append(f"{node}.{name}: 1.0.0 input removed or renamed")
        for name in sections["optional"]:
            if current[node].get(name) is False:
                problems.append(f"{node}.{name}: optional in 1.0.0, required now")
        for name, optional in current[node].items():
            if name not in sections["required"] + sections["optional"] and not optional:
                problems.append(f"{node}.{name}: added after 1.0.0 but required (saved prompts lack it)")
    return problems


# ----------------------------------------------------------------------------- without ComfyUI


def test_schemas_keep_the_1_0_0_inputs():
    assert compatibility_problems(frozen_inputs(), schema_inputs()) == []


def test_gate_is_optional_since_prompts_before_it_lack_it():
    assert schema_inputs()["SeaCacheApply"]["gate"] is True


def test_compatibility_check_finds_breaks():
    frozen = {"A": {"required": ["x", "y"], "optional": ["z"]}, "B": {"required": [], "optional": []}}
    current = {"A": {"x": True, "y2": False, "z": False, "w": True}}
    assert compatibility_problems(frozen, current) == [
        "A.y: 1.0.0 input removed or renamed", "A.z: optional in 1.0.0, required now",
        "A.y2: added after 1.0.0 but required (saved prompts lack it)", "B: node id gone"]


def test_schema_reader_sees_every_node_and_helper_input():
    current = schema_inputs()
    assert set(current) == wr.pack_node_ids()
    assert list(current["SeaCacheCosmos3PromptEncode"]) == frozen_inputs()["SeaCacheCosmos3PromptEncode"]["required"]
    assert list(current["SeaCacheCosmos3AddSound"]) == ["latent", "fps", "audio_vae"]  # audio_vae from a helper


def test_frozen_fixtures_cover_every_example():
    assert len(EXAMPLES) == 10
    assert EXAMPLES == sorted(p.name for p in (FROZEN / "api" / "0.33.0").glob("*.json"))
    assert sorted(p.name for p in (FROZEN / "api" / "0.3.64").glob("*.json")) == [n for n in EXAMPLES if n != LTX2]


# ----------------------------------------------------------------------------- with ComfyUI


def live_inputs(ns) -> dict:
    """``{node id: {input name: optional?}}`` of the pack's nodes as ComfyUI lists them."""
    out = {}
    for node in wr.pack_node_ids():
        types = ns.node(node).INPUT_TYPES()
        out[node] = {name: section == "optional" for section in ("required", "optional") for name in types.get(section) or {}}
    return out


def test_comfyui_lists_the_1_0_0_inputs(session):
    assert compatibility_problems(frozen_inputs(), live_inputs(session)) == []


def check_report(result, prompt):
    """The run finished with a SeaCache report on its Stats node, at the prompt's SeaCache settings."""
    (stats,) = [int(k) for k, e in prompt.items() if e["class_type"] == "SeaCacheStats"]
    (apply,) = [e["inputs"] for e in prompt.values() if e["class_type"] == "SeaCacheApply"]
    report = result.ui[stats]["seacache"][0]
    assert report["status"] == "completed" and report["calls"] >= report["steps"] > 0
    assert report["threshold"] == apply["threshold"]
    return report


@pytest.mark.parametrize("name", EXAMPLES)
def test_1_0_0_api_prompt_runs(anymodel_session, name):
    """The API prompt 1.0.0 queued for each example (shipped values) validates as saved, and runs with tiny sizes."""
    overrides, stand_ins = runnable_tiny_run(anymodel_session, name)
    saved = json.loads((version_folder(FROZEN / "api") / name).read_text(encoding="utf-8"))
    prompt = wr.override_api_prompt(saved, overrides)
    checkpoint = overrides.get(("SeaCacheCosmos3Loader", "checkpoint"))
    shipped = wr.override_api_prompt(saved, {("SeaCacheCosmos3Loader", "checkpoint"): checkpoint} if checkpoint else {})
    if any(e["class_type"] == "LoadImage" for e in saved.values()):  # example.png is not in every checkout
        shipped = wr.override_api_prompt(shipped, {("LoadImage", "image"): overrides[("LoadImage", "image")]})
    assert wr.validate_api_prompt(shipped) == []
    result = wr.run_api_prompt(anymodel_session, prompt, stand_ins=stand_ins)
    check_report(result, prompt)


@pytest.mark.parametrize("name", EXAMPLES)
def test_1_0_0_ui_workflow_converts_to_its_api_prompt(anymodel_session, name):
    """The saved UI workflow still converts (as the frontend does) to what 1.0.0 queued: every input the 1.0.0
    prompt had keeps its value; inputs added since come at their defaults. ComfyUI accepts the result."""
    runnable_tiny_run(anymodel_session, name)
    workflow = json.loads((FROZEN / "ui" / name).read_text(encoding="utf-8"))
    saved = json.loads((version_folder(FROZEN / "api") / name).read_text(encoding="utf-8"))
    converted = wr.to_api_prompt(anymodel_session, workflow)
    assert set(converted) == set(saved)
    for nid, entry in saved.items():
        assert converted[nid]["class_type"] == entry["class_type"]
        assert {k: converted[nid]["inputs"].get(k) for k in entry["inputs"]} == entry["inputs"], nid
    overrides, _ = tiny_run(name)
    assert wr.validate_api_prompt(wr.to_api_prompt(anymodel_session, workflow, overrides)) == []


@pytest.mark.parametrize("name", ["cosmos3_t2v_seacache.json", "flux_t2i_seacache.json"])
def test_1_0_0_ui_workflow_runs(anymodel_session, name):
    """A saved 1.0.0 UI workflow end to end on the current code (Cosmos3 and a core model; the others run as their
    API prompts above, to which their UI workflows convert)."""
    overrides, stand_ins = runnable_tiny_run(anymodel_session, name)
    workflow = json.loads((FROZEN / "ui" / name).read_text(encoding="utf-8"))
    result = wr.run_ui_workflow(anymodel_session, workflow, overrides, stand_ins=stand_ins)
    check_report(result, result.prompt)


def test_api_prompt_from_before_the_gate_input_runs_with_the_paper_gate(session):
    """An API prompt saved before SeaCache Apply had ``gate`` (no such key) passes validation and runs with the gate
    those builds had (sea), at its own threshold (0.25 then), and without the few-steps floor (no ``min_steps``)."""
    saved = json.loads((version_folder(PRE_GATE) / "cosmos3_t2v_seacache.json").read_text(encoding="utf-8"))
    (apply_id,) = [k for k, e in saved.items() if e["class_type"] == "SeaCacheApply"]
    assert "gate" not in saved[apply_id]["inputs"] and saved[apply_id]["inputs"]["threshold"] == 0.25
    overrides, _ = tiny_run("cosmos3_t2v_seacache.json")
    prompt = wr.override_api_prompt(saved, overrides)
    assert wr.validate_api_prompt(prompt) == []
    result = wr.run_api_prompt(session, prompt)
    settings = result.outputs[int(apply_id)][0].model_options["transformer_options"]["seacache_settings"]
    assert settings.config.gate == "sea" and settings.config.threshold == 0.25 and settings.config.min_steps == 0
    assert check_report(result, prompt)["threshold"] == 0.25
