"""The example workflows in example_workflows/: their graph and recipe without ComfyUI, and a real end-to-end run of each
(converted like the frontend would, validated by ComfyUI, executed node by node) on a tiny checkpoint."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from seacache_testing import workflow_runner as wr
from seacache_testing.workflow_cases import (
    ALL, ANY_OVERRIDES, ANY_STEPS, ANYMODEL, EDGE_T2V, FAMILY, FLUX, FRAMES, I2V, LTX2, LTX2_OVERRIDES, SIZE, SIZE_NODES,
    SOUND_NAME, SOUND_T2V, STEPS, T2V, TEST_IMAGE, TINY_NAME, WAN, WORKFLOWS, anymodel_stand_ins, family_checkpoint,
    family_overrides, has_ltx2, ltx2_stand_ins, overrides,
)

APPLY_DEFAULTS = [0.13, "auto", 2, -1, 1, 0.0, 1.0, "auto", "compute device", "sea same-sigma", 0.0, 8]  # SeaCache Apply's documented defaults (SeaCacheConfig's)
TEXT_NODES = ("SeaCacheCosmos3PromptEncode", "SeaCacheCosmos3PromptEncodeNegative")
PY_TYPES = {"INT": (int,), "FLOAT": (int, float), "STRING": (str,), "BOOLEAN": (bool,), "COMBO": (str,)}


def load(name):
    return wr.load_workflow(wr.WORKFLOWS_DIR / name)


def only(workflow, node_type):
    found = wr.nodes_of_type(workflow, node_type)
    assert len(found) == 1, f"expected one {node_type}, found {len(found)}"
    return found[0]


def source_type(workflow, node, input_name):
    src = wr.upstream(workflow, node["id"], input_name)
    assert src is not None, f"{node['type']}.{input_name} is not linked"
    return src[0]["type"], src[1]


# ----------------------------------------------------------------------------- without ComfyUI


def test_workflow_files():
    assert sorted(p.name for p in wr.workflow_paths()) == sorted(ALL)


def test_pack_node_ids_scan():
    assert wr.pack_node_ids() == {
        "SeaCacheCosmos3Loader", "SeaCacheCosmos3PromptEncode", "SeaCacheCosmos3PromptEncodeNegative",
        "SeaCacheCosmos3EmptyLatentVideo", "SeaCacheCosmos3ImageToVideo", "SeaCacheCosmos3Scheduler",
        "SeaCacheCosmos3DistilledScheduler", "SeaCacheCosmos3CFGGuider", "SeaCacheApply", "SeaCacheStats",
        "SeaCacheCosmos3EmptyAVLatent", "SeaCacheCosmos3AddSound", "SeaCacheCosmos3SoundDecode",
    }


@pytest.mark.parametrize("name", ALL)
def test_structure(name):
    workflow = load(name)
    known = wr.pack_node_ids() | wr.CORE_NODE_TYPES | wr.VIRTUAL_NODE_TYPES
    assert wr.structure_problems(workflow, known) == []
    orders = sorted(n["order"] for n in workflow["nodes"])
    assert orders == list(range(len(orders)))
    by_order = {n["id"]: n["order"] for n in workflow["nodes"]}
    for _, src, _, dst, _, _ in workflow["links"]:
        assert by_order[src] < by_order[dst], "a node's 'order' must come after the nodes feeding it"
    assert all(n["mode"] == 0 for n in workflow["nodes"])


def test_structure_checker_finds_problems():
    workflow = load(T2V)
    broken = json.loads(json.dumps(workflow))
    broken["links"][0][5] = "LATENT"  # wrong type on the Loader -> Apply link
    broken["links"].append([999, 1, 7, 2, 0, "MODEL"])  # no such output slot
    guider = only(broken, "CFGGuider")
    guider["inputs"][1]["link"] = None  # dangling required input
    problems = wr.structure_problems(broken, wr.pack_node_ids() | wr.CORE_NODE_TYPES)
    text = "\n".join(problems)
    assert "type 'LATENT' but node 1 output 0 is 'MODEL'" in text
    assert "node 1 has no output slot 7" in text
    assert "'positive' is required but not linked" in text
    assert "MarkdownNote" in text  # unknown without the virtual types
    assert wr.structure_problems({"nodes": []}) == [f"missing top-level key {k!r}" for k in wr.TOP_LEVEL_KEYS if k != "nodes"]


@pytest.mark.parametrize("name", ALL)
def test_seacache_apply_at_defaults(name):
    apply = only(load(name), "SeaCacheApply")
    source_defaults = [default for _, _, default in wr.literal_widget_defaults("SeaCacheApply")]
    assert source_defaults == APPLY_DEFAULTS, "SeaCache Apply defaults changed in nodes/seacache/apply.py"
    expected = [("cpu" if value == "compute device" and name == WAN else value) for value in APPLY_DEFAULTS]  # 12 GB card: residuals on the CPU
    assert apply["widgets_values"] == expected


@pytest.mark.parametrize("name", ALL)
def test_pack_widget_values_match_schema(name):
    """Each pack node has one widgets_values entry per widget input (none has a control_after_generate)."""
    for node in load(name)["nodes"]:
        if node["type"] not in wr.pack_node_ids():
            continue
        widgets = wr.literal_widget_defaults(node["type"])
        assert widgets is not None, node["type"]
        values = node.get("widgets_values", [])
        assert len(values) == len(widgets), (node["type"], values, widgets)
        for value, (input_name, io_type, _) in zip(values, widgets):
            assert isinstance(value, PY_TYPES[io_type]), (node["type"], input_name, value)
            if io_type in ("INT", "FLOAT"):
                assert not isinstance(value, bool), (node["type"], input_name)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_recipe_for_24gb(name):
    workflow = load(name)
    assert only(workflow, "SeaCacheCosmos3Loader")["widgets_values"] == ["Cosmos3-Nano", "fp8_e4m3fn"]
    sizes = [n["widgets_values"] for n in workflow["nodes"] if n["type"] in SIZE_NODES]
    assert len(sizes) == 1  # set once per workflow: the prompt nodes follow the sampled latent
    w, h, length = sizes[0][0:3]
    assert (w, h, length) == (832, 480, 93) and length % 4 == 1 and w % 32 == 0 and h % 32 == 0
    pos, neg = (only(workflow, t)["widgets_values"] for t in TEXT_NODES)
    assert len(pos[0]) > 80 and neg[0] == ""  # a real prompt; empty negative = the checkpoint's negative prompt
    assert pos[1] == neg[1] == 24  # fps in the prompt templates...
    assert only(workflow, "CreateVideo")["widgets_values"] == [24]  # ...matches the saved video
    assert only(workflow, "SeaCacheCosmos3Scheduler")["widgets_values"] == [35, 5.0, 1.0]  # shift 5 for 480p
    assert only(workflow, "CFGGuider")["widgets_values"] == [6]
    assert only(workflow, "KSamplerSelect")["widgets_values"] == ["uni_pc_bh2"]
    seed, control = only(workflow, "RandomNoise")["widgets_values"]
    assert isinstance(seed, int) and control in ("fixed", "increment", "decrement", "randomize")
    save = only(workflow, "SaveVideo")["widgets_values"]
    assert save[0].startswith("video/") and save[1:] == ["auto", "auto"]
    note = only(workflow, "MarkdownNote")["widgets_values"][0]
    for fact in ("24 GB", "832x480", "93 frames", "shift 5", "fp8_e4m3fn", "80 GB", "1280x720", "189 frames", "shift 10", "`default`"):
        assert fact in note, fact
    assert "width / height / length" in note


@pytest.mark.parametrize("name", WORKFLOWS)
def test_wiring(name):
    workflow = load(name)
    apply, guider = only(workflow, "SeaCacheApply"), only(workflow, "CFGGuider")
    sampler, stats = only(workflow, "SamplerCustomAdvanced"), only(workflow, "SeaCacheStats")
    decode, preview = only(workflow, "VAEDecode"), only(workflow, "PreviewImage")
    assert source_type(workflow, apply, "model") == ("SeaCacheCosmos3Loader", 0)
    assert wr.upstream(workflow, guider["id"], "model")[0] is apply
    assert wr.upstream(workflow, stats["id"], "model")[0] is apply  # Stats reads the run of the sampled model
    assert wr.upstream(workflow, stats["id"], "samples") == (sampler, 0)
    assert wr.upstream(workflow, decode["id"], "samples") == (stats, 0)
    assert source_type(workflow, decode, "vae") == ("SeaCacheCosmos3Loader", 1)
    assert source_type(workflow, only(workflow, "CreateVideo"), "images") == ("VAEDecode", 0)
    assert source_type(workflow, only(workflow, "SaveVideo"), "video") == ("CreateVideo", 0)
    assert wr.upstream(workflow, preview["id"], "images") == (stats, 2)
    assert wr.upstream(workflow, only(workflow, "PreviewAny")["id"], "source") == (stats, 1)
    for input_name, node_type in (("noise", "RandomNoise"), ("sampler", "KSamplerSelect"), ("sigmas", "SeaCacheCosmos3Scheduler"), ("guider", "CFGGuider")):
        assert source_type(workflow, sampler, input_name) == (node_type, 0)
    for node_type in TEXT_NODES:
        assert source_type(workflow, only(workflow, node_type), "cosmos3_text") == ("SeaCacheCosmos3Loader", 2)
    if name == T2V:
        assert source_type(workflow, guider, "positive") == ("SeaCacheCosmos3PromptEncode", 0)
        assert source_type(workflow, guider, "negative") == ("SeaCacheCosmos3PromptEncodeNegative", 0)
        assert source_type(workflow, sampler, "latent_image") == ("SeaCacheCosmos3EmptyLatentVideo", 0)
        assert not wr.nodes_of_type(workflow, "LoadImage")
    else:
        i2v = only(workflow, "SeaCacheCosmos3ImageToVideo")
        assert source_type(workflow, guider, "positive") == ("SeaCacheCosmos3ImageToVideo", 0)
        assert source_type(workflow, guider, "negative") == ("SeaCacheCosmos3ImageToVideo", 1)
        assert source_type(workflow, sampler, "latent_image") == ("SeaCacheCosmos3ImageToVideo", 2)
        assert source_type(workflow, i2v, "positive") == ("SeaCacheCosmos3PromptEncode", 0)
        assert source_type(workflow, i2v, "negative") == ("SeaCacheCosmos3PromptEncodeNegative", 0)
        assert source_type(workflow, i2v, "vae") == ("SeaCacheCosmos3Loader", 1)
        assert source_type(workflow, i2v, "start_image") == ("LoadImage", 0)
        assert only(workflow, "LoadImage")["widgets_values"] == ["example.png", "image"]  # ships with ComfyUI
        assert not wr.nodes_of_type(workflow, "SeaCacheCosmos3EmptyLatentVideo")


def sampler_nodes(workflow):
    """The guider node (CFGGuider or Cosmos3 CFG Guider) and the sigma node of a workflow."""
    guiders = [n for n in workflow["nodes"] if n["type"] in ("CFGGuider", "SeaCacheCosmos3CFGGuider")]
    sigmas = [n for n in workflow["nodes"] if n["type"] in ("SeaCacheCosmos3Scheduler", "SeaCacheCosmos3DistilledScheduler")]
    assert len(guiders) == 1 and len(sigmas) == 1
    return guiders[0], sigmas[0]


@pytest.mark.parametrize("name", list(FAMILY))
def test_family_recipe(name):
    """Each family workflow follows its member's reference settings (cosmos3/presets.py) at the size it is
    sized for, with fp8 weights, and its note names the checkpoint and the card."""
    from cosmos3.presets import reference_settings

    spec = FAMILY[name]
    ref = reference_settings(spec["member"], spec["mode"])
    workflow = load(name)
    assert only(workflow, "SeaCacheCosmos3Loader")["widgets_values"] == [spec["member"], "fp8_e4m3fn"]
    sizes = [n["widgets_values"] for n in workflow["nodes"] if n["type"] in SIZE_NODES]
    assert len(sizes) == 1 and tuple(sizes[0][:3]) == spec["size"] and sizes[0][3] == 1  # set once, on the latent
    w, h, length = spec["size"]
    assert w % 16 == 0 and h % 16 == 0 and (length - 1) % 4 == 0
    if ref.mode == "t2i" or name == EDGE_T2V:
        assert (w, h, length) == (ref.width, ref.height, ref.frames)  # the reference size itself
    pos, neg = (only(workflow, t)["widgets_values"] for t in TEXT_NODES)
    assert len(pos[0]) > 80 and neg[0] == "" and pos[1] == neg[1] == ref.fps
    guider, sigmas = sampler_nodes(workflow)
    assert guider["widgets_values"][0] == ref.cfg
    assert only(workflow, "KSamplerSelect")["widgets_values"] == [ref.sampler]
    if ref.shift is None:  # 4-step: the checkpoint's own sigmas
        assert sigmas["type"] == "SeaCacheCosmos3DistilledScheduler" and "widgets_values" not in sigmas
    else:
        assert sigmas["type"] == "SeaCacheCosmos3Scheduler"
        shift = ref.shift if (w, h) == (ref.width, ref.height) else 5.0  # 480p tier of the 720p recipes
        assert sigmas["widgets_values"] == [ref.steps, shift, 1.0]
    if ref.guidance_interval is None:
        assert guider["type"] == "CFGGuider"
    else:
        assert guider["type"] == "SeaCacheCosmos3CFGGuider"
        assert tuple(guider["widgets_values"][1:]) == ref.guidance_interval
    if ref.mode == "t2i":
        assert only(workflow, "SaveImage")["widgets_values"][0] and not wr.nodes_of_type(workflow, "CreateVideo")
    else:
        assert only(workflow, "CreateVideo")["widgets_values"] == [ref.fps]
    note = only(workflow, "MarkdownNote")["widgets_values"][0]
    for fact in (spec["member"], spec["card"], "fp8_e4m3fn", f"{w}x{h}", "models/cosmos3/", "SeaCache Apply"):
        assert fact in note, fact


@pytest.mark.parametrize("name", list(FAMILY))
def test_family_wiring(name):
    workflow = load(name)
    apply, stats = only(workflow, "SeaCacheApply"), only(workflow, "SeaCacheStats")
    sampler, decode = only(workflow, "SamplerCustomAdvanced"), only(workflow, "VAEDecode")
    guider, sigmas = sampler_nodes(workflow)
    assert source_type(workflow, apply, "model") == ("SeaCacheCosmos3Loader", 0)
    assert wr.upstream(workflow, guider["id"], "model")[0] is apply
    assert wr.upstream(workflow, stats["id"], "model")[0] is apply
    assert wr.upstream(workflow, stats["id"], "samples") == (sampler, 0)
    assert wr.upstream(workflow, decode["id"], "samples") == (stats, 0)
    assert source_type(workflow, decode, "vae") == ("SeaCacheCosmos3Loader", 1)
    assert wr.upstream(workflow, only(workflow, "PreviewImage")["id"], "images") == (stats, 2)
    assert wr.upstream(workflow, only(workflow, "PreviewAny")["id"], "source") == (stats, 1)
    assert wr.upstream(workflow, sampler["id"], "guider") == (guider, 0)
    assert wr.upstream(workflow, sampler["id"], "sigmas") == (sigmas, 0)
    if sigmas["type"] == "SeaCacheCosmos3DistilledScheduler":
        assert source_type(workflow, sigmas, "model") == ("SeaCacheCosmos3Loader", 0)
    for node_type in TEXT_NODES:
        assert source_type(workflow, only(workflow, node_type), "cosmos3_text") == ("SeaCacheCosmos3Loader", 2)
    if FAMILY[name]["mode"] == "i2v":
        i2v = only(workflow, "SeaCacheCosmos3ImageToVideo")
        assert source_type(workflow, guider, "positive") == ("SeaCacheCosmos3ImageToVideo", 0)
        assert source_type(workflow, guider, "negative") == ("SeaCacheCosmos3ImageToVideo", 1)
        assert source_type(workflow, sampler, "latent_image") == ("SeaCacheCosmos3ImageToVideo", 2)
        assert source_type(workflow, i2v, "start_image") == ("LoadImage", 0)
    else:
        assert source_type(workflow, guider, "positive") == ("SeaCacheCosmos3PromptEncode", 0)
        assert source_type(workflow, guider, "negative") == ("SeaCacheCosmos3PromptEncodeNegative", 0)
        assert source_type(workflow, sampler, "latent_image") == ("SeaCacheCosmos3EmptyLatentVideo", 0)
    if FAMILY[name]["mode"] == "t2i":
        assert source_type(workflow, only(workflow, "SaveImage"), "images") == ("VAEDecode", 0)
    else:
        assert source_type(workflow, only(workflow, "CreateVideo"), "images") == ("VAEDecode", 0)
        assert source_type(workflow, only(workflow, "SaveVideo"), "video") == ("CreateVideo", 0)


def test_sound_workflow_recipe_and_wiring():
    """Cosmos3 T2V with sound: the T2V recipe at 24 GB, sizes and fps set once on the AV latent (the prompts and
    the saved video use the same fps), the sound decoded from the sampled AV latent into the saved video."""
    workflow = load(SOUND_T2V)
    assert only(workflow, "SeaCacheCosmos3Loader")["widgets_values"] == ["Cosmos3-Nano", "fp8_e4m3fn"]
    empty, decode = only(workflow, "SeaCacheCosmos3EmptyAVLatent"), only(workflow, "SeaCacheCosmos3SoundDecode")
    assert empty["widgets_values"] == [832, 480, 93, 24.0, 1] and not wr.nodes_of_type(workflow, "SeaCacheCosmos3EmptyLatentVideo")
    pos, neg = (only(workflow, t)["widgets_values"] for t in TEXT_NODES)
    assert pos[1] == neg[1] == 24 and only(workflow, "CreateVideo")["widgets_values"] == [24]
    assert only(workflow, "SeaCacheCosmos3Scheduler")["widgets_values"] == [35, 5.0, 1.0]
    stats, sampler = only(workflow, "SeaCacheStats"), only(workflow, "SamplerCustomAdvanced")
    assert source_type(workflow, sampler, "latent_image") == ("SeaCacheCosmos3EmptyAVLatent", 0)
    assert source_type(workflow, empty, "audio_vae") == ("SeaCacheCosmos3Loader", 3)
    assert source_type(workflow, decode, "audio_vae") == ("SeaCacheCosmos3Loader", 3)
    assert wr.upstream(workflow, decode["id"], "samples") == (stats, 0)
    assert wr.upstream(workflow, only(workflow, "VAEDecode")["id"], "samples") == (stats, 0)
    assert source_type(workflow, only(workflow, "CreateVideo"), "audio") == ("SeaCacheCosmos3SoundDecode", 0)
    note = only(workflow, "MarkdownNote")["widgets_values"][0]
    for fact in ("sound_gen", "sound_tokenizer/", "24 GB", "832x480", "93 frames", "fp8_e4m3fn", "0.33.0", "fps"):
        assert fact in note, fact


# ----------------------------------------------------------------------------- with ComfyUI

def test_comfyui_lists_the_templates(comfy, tmp_path, monkeypatch):
    """ComfyUI's own template route lists every shipped workflow under the pack's folder name and serves the folder
    (example_workflows/ is the name ComfyUI asks for; other names it accepts log a request to rename)."""
    import asyncio

    from aiohttp import web
    from app.custom_node_manager import CustomNodeManager

    custom_nodes = tmp_path / "custom_nodes"
    (custom_nodes / "ComfyUI-SeaCache").mkdir(parents=True)
    (custom_nodes / "ComfyUI-SeaCache" / wr.WORKFLOWS_DIR.name).symlink_to(wr.WORKFLOWS_DIR, target_is_directory=True)
    monkeypatch.setitem(comfy.folder_paths.folder_names_and_paths, "custom_nodes", ([str(custom_nodes)], set()))
    routes, app = web.RouteTableDef(), web.Application()
    CustomNodeManager().add_routes(routes, app, [("ComfyUI-SeaCache", str(custom_nodes / "ComfyUI-SeaCache"))])
    (listing,) = [r.handler for r in routes if getattr(r, "path", None) == "/workflow_templates"]
    listed = json.loads(asyncio.run(listing(None)).text)
    assert {k: sorted(v) for k, v in listed.items()} == {"ComfyUI-SeaCache": sorted(Path(n).stem for n in ALL)}
    served = [r.canonical for r in app.router.resources()]
    assert served == ["/api/workflow_templates/ComfyUI-SeaCache"]


@pytest.mark.parametrize("name", ALL)
def test_node_types_registered(session, name):
    if name == LTX2 and not has_ltx2(session):
        pytest.skip("this ComfyUI has no LTX-2 audio-video nodes")
    mappings = session.nodes.NODE_CLASS_MAPPINGS
    for node in load(name)["nodes"]:
        if node["type"] not in wr.VIRTUAL_NODE_TYPES:
            assert node["type"] in mappings, node["type"]


@pytest.mark.parametrize("name", WORKFLOWS)
def test_converted_prompt(session, name):
    """Widget values land on the right inputs (control_after_generate and upload values skipped) and ComfyUI's
    own validation accepts the prompt the frontend would queue, checkpoint choice aside."""
    workflow = load(name)
    prompt = wr.to_api_prompt(session, workflow, overrides())
    assert {entry["class_type"] for entry in prompt.values()} == {n["type"] for n in workflow["nodes"]} - {"MarkdownNote"}
    by_type = {entry["class_type"]: entry["inputs"] for entry in prompt.values()}
    types = session.node("SeaCacheApply").INPUT_TYPES()
    apply_defaults = {name: spec[1]["default"] for section in ("required", "optional") for name, spec in types[section].items() if name != "model"}
    assert {k: v for k, v in by_type["SeaCacheApply"].items() if k != "model"} == apply_defaults
    assert by_type["RandomNoise"] == {"noise_seed": only(workflow, "RandomNoise")["widgets_values"][0]}
    assert by_type["SamplerCustomAdvanced"]["latent_image"][1] == (0 if name == T2V else 2)
    assert by_type["SeaCacheCosmos3Scheduler"] == {"steps": STEPS, "shift": 5.0, "denoise": 1.0}
    if name == I2V:
        assert by_type["LoadImage"] == {"image": TEST_IMAGE}
    assert wr.validate_api_prompt(prompt) == []
    # The shipped values validate too, except the checkpoint, which is not installed here (and example.png where
    # this checkout lacks it: the session's input folder is a temp dir, given a copy of the checkout's).
    shipped_overrides = {("SeaCacheCosmos3Loader", "checkpoint"): TINY_NAME}
    if not (Path(session.folder_paths.get_input_directory()) / "example.png").is_file():
        shipped_overrides[("LoadImage", "image")] = TEST_IMAGE
    shipped = wr.to_api_prompt(session, workflow, shipped_overrides)
    assert wr.validate_api_prompt(shipped) == []
    bad = wr.to_api_prompt(session, workflow, overrides({("KSamplerSelect", "sampler_name"): "no_such_sampler"}))
    assert any("no_such_sampler" in message for message in wr.validate_api_prompt(bad))


def _check_run(session, workflow, result, messages, frames_expected=FRAMES, steps=STEPS):
    apply_id = only(workflow, "SeaCacheApply")["id"]
    stats = only(workflow, "SeaCacheStats")
    # VAEDecode: finite frames of 64x64 RGB.
    frames = result.outputs[only(workflow, "VAEDecode")["id"]][0]
    assert tuple(frames.shape) == (frames_expected, SIZE, SIZE, 3)
    assert bool(frames.isfinite().all()) and 0.0 <= float(frames.min()) and float(frames.max()) <= 1.0
    if wr.nodes_of_type(workflow, "SaveImage"):  # SaveImage wrote a png
        saved = result.ui[only(workflow, "SaveImage")["id"]]["images"][0]
    else:  # CreateVideo -> SaveVideo wrote an mp4.
        video = result.outputs[only(workflow, "CreateVideo")["id"]][0]
        assert tuple(video.get_dimensions()) == (SIZE, SIZE)
        saved = result.ui[only(workflow, "SaveVideo")["id"]]["images"][0]
    path = Path(session.folder_paths.get_output_directory()) / saved["subfolder"] / saved["filename"]
    assert path.is_file() and path.stat().st_size > 0 and saved["filename"].startswith("seacache_workflow_test")
    # SeaCache Stats: the run's report, summary string and timeline image.
    _, summary, timeline = result.outputs[stats["id"]]
    report = result.ui[stats["id"]]["seacache"][0]
    assert report["status"] == "completed" and report["steps"] == steps and report["threshold"] == APPLY_DEFAULTS[0]
    assert report["calls"] == len(report["records"]) == report["ran"] + report["reused"] >= steps
    assert summary.startswith(f"SeaCache run completed over {steps} steps (threshold {APPLY_DEFAULTS[0]:g})")
    assert f"{report['calls']} calls" in summary
    assert result.ui[only(workflow, "PreviewAny")["id"]]["text"][0] == summary
    assert timeline.ndim == 4 and timeline.shape[0] == 1 and timeline.shape[-1] == 3
    assert result.ui[only(workflow, "PreviewImage")["id"]]["images"]
    # The frontend's live line: progress events name the SeaCache Apply node of the UI graph.
    progress = [data for event, data, _ in messages if event == "seacache.progress"]
    assert len(progress) == report["calls"]
    assert {p["node"] for p in progress} == {str(apply_id)}
    assert progress[-1]["calls"] == report["calls"] and progress[-1]["reused"] == report["reused"]
    assert all(p["steps"] == steps and 0 <= p["step"] < steps for p in progress)
    json.dumps(report, allow_nan=False)  # what the server sends to the browser must be strict JSON
    return report


def test_t2v_workflow_runs(session):
    workflow = load(T2V)
    with session.fake_prompt_server() as server:
        result = wr.run_ui_workflow(session, workflow, overrides())
    report = _check_run(session, workflow, result, server.messages)
    latent = result.outputs[only(workflow, "SamplerCustomAdvanced")["id"]][0]["samples"]
    assert tuple(latent.shape) == (1, 48, (FRAMES - 1) // 4 + 1, SIZE // 16, SIZE // 16)
    assert report["records"][0]["decision"] == "forced"  # warmup step


def test_i2v_workflow_runs(session):
    workflow = load(I2V)
    with session.fake_prompt_server() as server:
        result = wr.run_ui_workflow(session, workflow, overrides())
    _check_run(session, workflow, result, server.messages)
    start = result.outputs[only(workflow, "SeaCacheCosmos3ImageToVideo")["id"]][2]["samples"]
    sampled = result.outputs[only(workflow, "SamplerCustomAdvanced")["id"]][0]["samples"]
    assert sampled.shape == start.shape
    assert float(start[:, :, :1].abs().max()) > 0.01  # the encoded image, not an empty frame
    assert float((sampled[:, :, :1] - start[:, :, :1]).abs().max()) <= 1e-5  # frame 0 stays the start image
    assert float((sampled[:, :, 1:] - start[:, :, 1:]).abs().max()) > 0.1  # the rest was generated


def test_sound_workflow_runs_and_saves_video_with_audio(session):
    """End to end on the tiny sound checkpoint: the saved mp4 holds the video and a 48 kHz stereo audio stream."""
    import importlib.util

    if importlib.util.find_spec("comfy.nested_tensor") is None:
        pytest.skip("this ComfyUI has no NestedTensor audio-video latents (Cosmos3 sound refuses to run there)")
    av = pytest.importorskip("av")
    workflow = load(SOUND_T2V)
    with session.fake_prompt_server() as server:
        result = wr.run_ui_workflow(session, workflow, overrides({("SeaCacheCosmos3Loader", "checkpoint"): SOUND_NAME}))
    report = _check_run(session, workflow, result, server.messages)
    print(f"sound workflow: reused {report['reused']} of {report['calls']} calls")
    sound = result.outputs[only(workflow, "SeaCacheCosmos3SoundDecode")["id"]][0]
    assert sound["sample_rate"] == 48000 and tuple(sound["waveform"].shape) == (1, 2, 10 * 1920)
    saved = result.ui[only(workflow, "SaveVideo")["id"]]["images"][0]
    path = Path(session.folder_paths.get_output_directory()) / saved["subfolder"] / saved["filename"]
    with av.open(str(path)) as container:
        assert len(container.streams.video) == 1 and len(container.streams.audio) == 1
        audio = container.streams.audio[0]
        assert audio.rate == 48000 and audio.channels == 2
        assert sum(frame.samples for frame in container.decode(audio=0)) >= 0.9 * FRAMES / 24 * 48000


def test_reuse_report_draws_in_the_frontend(session, tmp_path):
    """A run that reuses steps: its Stats report (as the browser receives it) laid out by web/seacache.js."""
    workflow = load(T2V)
    result = wr.run_ui_workflow(session, workflow, overrides({("SeaCacheApply", "threshold"): 2.0, ("SeaCacheCosmos3Scheduler", "steps"): 10}))
    report = result.ui[only(workflow, "SeaCacheStats")["id"]]["seacache"][0]
    assert report["reused"] > 0, report["summary"]
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: cannot check the frontend layout of the report")
    (tmp_path / "report.json").write_text(json.dumps(report, allow_nan=False), encoding="utf-8")
    module = (wr.PACK_ROOT / "web" / "seacache.js").as_uri()
    script = (
        f"import {{ timelineLayout, formatReport }} from {json.dumps(module)};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const report = JSON.parse(readFileSync(process.argv[1], 'utf8'));\n"
        "console.log(JSON.stringify({ layout: timelineLayout(report, 400, 80), caption: formatReport(report) }));\n"
    )
    proc = subprocess.run([node, "--input-type=module", "-e", script, str(tmp_path / "report.json")],
                          capture_output=True, text=True, timeout=60, env={**os.environ, "NODE_OPTIONS": ""})
    assert proc.returncode == 0, proc.stderr
    drawn = json.loads(proc.stdout)
    bars = drawn["layout"]["bars"]
    assert [b["decision"] for b in bars] == [r["decision"] for r in report["records"]]
    assert drawn["layout"]["thresholdY"] == 40
    colors = report["colors"]  # the chart's (nodes/seacache/chart.py), sent with the report
    assert (colors["reused"], drawn["layout"]["thresholdColor"]) == ("#2ecc71", "#e74c3c")
    for bar, record in zip(bars, report["records"]):
        assert bar["color"] == colors[record["decision"]]
        acc = record["accumulated"]
        expected = 0.0 if acc is None else min(acc / report["threshold"], 2.0) / 2.0 * 80
        assert math.isclose(bar["h"], max(expected, 2), rel_tol=1e-9, abs_tol=1e-9)
    assert drawn["caption"] == f"SeaCache: reused {report['reused']} / {report['calls']} calls · ~{report['speedup']:.2f}x"


@pytest.mark.parametrize("name", list(FAMILY))
def test_family_converted_prompt(session, name):
    """ComfyUI's validation accepts the queued prompt, with the tiny checkpoint and with the shipped values."""
    workflow = load(name)
    assert wr.validate_api_prompt(wr.to_api_prompt(session, workflow, family_overrides(name))) == []
    shipped = {("SeaCacheCosmos3Loader", "checkpoint"): family_checkpoint(name)}
    if not (Path(session.folder_paths.get_input_directory()) / "example.png").is_file():
        shipped[("LoadImage", "image")] = TEST_IMAGE
    assert wr.validate_api_prompt(wr.to_api_prompt(session, workflow, shipped)) == []


@pytest.mark.parametrize("name", list(FAMILY))
def test_family_workflow_runs(session, name):
    """Each family workflow end to end on a tiny checkpoint of its member's layout and architecture."""
    from cosmos3.presets import guidance_active, reference_settings

    spec = FAMILY[name]
    ref = reference_settings(spec["member"], spec["mode"])
    workflow = load(name)
    with session.fake_prompt_server() as server:
        result = wr.run_ui_workflow(session, workflow, family_overrides(name))
    four_step = ref.shift is None
    steps = 4 if four_step else STEPS
    report = _check_run(session, workflow, result, server.messages, 1 if spec["mode"] == "t2i" else FRAMES, steps)
    model = result.outputs[only(workflow, "SeaCacheCosmos3Loader")["id"]][0]
    config = model.model.diffusion_model.config
    assert config.hidden_act == ("relu2" if name == EDGE_T2V else "silu")
    branches = [set(r["branches"]) for r in report["records"]]
    _, sigmas_node = sampler_nodes(workflow)
    sigmas = result.outputs[sigmas_node["id"]][0]
    if ref.cfg == 1.0:  # distilled: the positive prompt alone, one call per step
        assert branches == [{"cond0/0"}] * steps
    else:  # uncond batched in exactly on the guided steps
        guided = [guidance_active(s, ref.guidance_interval) for s in sigmas[:-1].tolist()]
        assert branches == [{"cond0/0", "uncond0/0"} if on else {"cond0/0"} for on in guided]
        assert (not all(guided)) == (ref.guidance_interval is not None)
    if four_step:
        assert len(sigmas) == 5 and float(sigmas[-1]) == 0.0
    if spec["mode"] == "i2v":
        start = result.outputs[only(workflow, "SeaCacheCosmos3ImageToVideo")["id"]][2]["samples"]
        sampled = result.outputs[only(workflow, "SamplerCustomAdvanced")["id"]][0]["samples"]
        assert float((sampled[:, :, :1] - start[:, :, :1]).abs().max()) <= 1e-5  # frame 0 stays the start image
        prompt = result.inputs[only(workflow, "SeaCacheCosmos3PromptEncode")["id"]]
        assert prompt["fps"] == 16


# ----------------------------------------------------------------------------- any-model workflows (Wan, Flux)


def test_anymodel_recipes_and_notes():
    wan, flux = load(WAN), load(FLUX)
    assert only(wan, "UNETLoader")["widgets_values"] == ["wan2.2_ti2v_5B_fp16.safetensors", "default"]
    assert only(wan, "Wan22ImageToVideoLatent")["widgets_values"] == [1280, 704, 121, 1]
    assert only(wan, "ModelSamplingSD3")["widgets_values"] == [8.0]
    assert only(wan, "KSampler")["widgets_values"][2:6] == [30, 5.0, "uni_pc", "simple"]
    assert only(flux, "UNETLoader")["widgets_values"] == ["flux1-dev.safetensors", "fp8_e4m3fn"]
    assert only(flux, "EmptySD3LatentImage")["widgets_values"] == [1024, 1024, 1]
    assert only(flux, "FluxGuidance")["widgets_values"] == [3.5]
    for workflow, facts in ((wan, ("12 GB", "wan2.2_ti2v_5B_fp16", "umt5_xxl", "wan2.2_vae", "1280x704", "121 frames", "cpu")),
                            (flux, ("16 GB", "12 GB", "flux1-dev", "clip_l", "t5xxl", "ae.safetensors", "2.22x"))):
        note = only(workflow, "MarkdownNote")["widgets_values"][0]
        for fact in facts:
            assert fact in note, fact
        apply = only(workflow, "SeaCacheApply")
        assert wr.upstream(workflow, only(workflow, "SeaCacheStats")["id"], "model")[0] is apply
    assert wr.upstream(wan, only(wan, "SeaCacheApply")["id"], "model")[0]["type"] == "ModelSamplingSD3"
    assert wr.upstream(wan, only(wan, "KSampler")["id"], "model")[0]["type"] == "SeaCacheApply"
    assert wr.upstream(flux, only(flux, "BasicGuider")["id"], "model")[0]["type"] == "SeaCacheApply"
    assert wr.upstream(flux, only(flux, "BasicScheduler")["id"], "model")[0]["type"] == "SeaCacheApply"


@pytest.mark.parametrize("name", ANYMODEL)
def test_anymodel_workflow_runs(anymodel_session, name):
    import torch

    workflow = load(name)
    assert wr.validate_api_prompt(wr.to_api_prompt(anymodel_session, workflow)) == []  # shipped values
    result = wr.run_ui_workflow(anymodel_session, workflow, ANY_OVERRIDES, stand_ins=anymodel_stand_ins(name))
    stats = only(workflow, "SeaCacheStats")
    report = result.ui[stats["id"]]["seacache"][0]
    assert report["status"] == "completed" and report["steps"] == ANY_STEPS and report["calls"] == ANY_STEPS
    assert report["seam"].startswith("block stack (WanModel" if name == WAN else "block stack (Flux")
    summary = result.outputs[stats["id"]][1]
    assert summary.endswith(f"residual boundary: {report['seam']}")
    assert result.ui[only(workflow, "PreviewAny")["id"]]["text"][0] == summary
    images = result.outputs[only(workflow, "VAEDecode")["id"]][0]
    assert torch.isfinite(images).all() and images.shape[1:] == (64, 64, 3)
    if name == WAN:
        assert images.shape[0] == 3  # 3 latent frames through the stand-in decoder
        saved = result.ui[only(workflow, "SaveVideo")["id"]]["images"][0]
    else:
        saved = result.ui[only(workflow, "SaveImage")["id"]]["images"][0]
    path = Path(anymodel_session.folder_paths.get_output_directory()) / saved["subfolder"] / saved["filename"]
    assert path.is_file() and path.stat().st_size > 0


def test_ltx2_workflow_recipe_and_wiring():
    """LTX-2 with SeaCache: ComfyUI's LTX-2 nodes, one frame rate and frame count across the video latent, the audio
    latent, the conditioning and the saved video; the sampled AV latent split for the two decoders."""
    workflow = load(LTX2)
    assert only(workflow, "CheckpointLoaderSimple")["widgets_values"] == ["ltx-2-19b-dev-fp8.safetensors"]
    video, audio = only(workflow, "EmptyLTXVLatentVideo"), only(workflow, "LTXVEmptyLatentAudio")
    assert video["widgets_values"][2] == audio["widgets_values"][0] == 97
    rate = audio["widgets_values"][1]
    assert only(workflow, "LTXVConditioning")["widgets_values"] == [rate] == only(workflow, "CreateVideo")["widgets_values"]
    concat, split = only(workflow, "LTXVConcatAVLatent"), only(workflow, "LTXVSeparateAVLatent")
    sampler, stats = only(workflow, "SamplerCustomAdvanced"), only(workflow, "SeaCacheStats")
    apply = only(workflow, "SeaCacheApply")
    assert source_type(workflow, apply, "model") == ("CheckpointLoaderSimple", 0)
    assert wr.upstream(workflow, only(workflow, "CFGGuider")["id"], "model")[0] is apply
    assert wr.upstream(workflow, stats["id"], "model")[0] is apply
    assert wr.upstream(workflow, sampler["id"], "latent_image") == (concat, 0)
    assert wr.upstream(workflow, split["id"], "av_latent") == (stats, 0)
    assert wr.upstream(workflow, only(workflow, "VAEDecode")["id"], "samples") == (split, 0)
    assert wr.upstream(workflow, only(workflow, "LTXVAudioVAEDecode")["id"], "samples") == (split, 1)
    assert source_type(workflow, only(workflow, "CreateVideo"), "audio") == ("LTXVAudioVAEDecode", 0)
    note = only(workflow, "MarkdownNote")["widgets_values"][0]
    for fact in ("ltx-2-19b-dev-fp8.safetensors", "gemma_3_12B_it_fp4_mixed.safetensors", "Card", "0.33.0", "SeaCache Apply"):
        assert fact in note, fact


def test_ltx2_workflow_runs_and_saves_video_with_audio(anymodel_session):
    """End to end with a tiny random LTX-2 (ComfyUI's LTXAVModel) standing in for the checkpoint: the block-stack
    seam reuses steps and the saved mp4 has its audio stream (PyAV)."""
    import torch

    if not has_ltx2(anymodel_session):
        pytest.skip("this ComfyUI has no LTX-2 audio-video nodes")
    av = pytest.importorskip("av")
    workflow = load(LTX2)
    assert wr.validate_api_prompt(wr.to_api_prompt(anymodel_session, workflow)) == []  # shipped values
    result = wr.run_ui_workflow(anymodel_session, workflow, LTX2_OVERRIDES, stand_ins=ltx2_stand_ins())
    report = result.ui[only(workflow, "SeaCacheStats")["id"]]["seacache"][0]
    print(f"LTX-2 workflow: reused {report['reused']} of {report['calls']} calls, seam {report['seam']}")
    assert report["status"] == "completed" and report["calls"] == ANY_STEPS and report["reused"] > 0
    assert report["seam"] == "block stack (LTXAVModel, 2 blocks)"
    images = result.outputs[only(workflow, "VAEDecode")["id"]][0]
    assert torch.isfinite(images).all() and tuple(images.shape) == (2, 128, 128, 3)
    saved = result.ui[only(workflow, "SaveVideo")["id"]]["images"][0]
    path = Path(anymodel_session.folder_paths.get_output_directory()) / saved["subfolder"] / saved["filename"]
    with av.open(str(path)) as container:
        assert len(container.streams.video) == 1 and len(container.streams.audio) == 1
        assert container.streams.audio[0].rate == 24000
        assert sum(frame.samples for frame in container.decode(audio=0)) > 0
