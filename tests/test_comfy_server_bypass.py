"""Bypass and removal leave no trace, on ONE running ComfyUI server (``main.py --cpu`` on a loopback port): the T2V
example workflow with SeaCache Apply active, then bypassed (mode 4, as the frontend queues it), then deleted, and
again after a run interrupted while sampling (POST /interrupt). Each prompt without SeaCache must sample bit for
bit what the graph that never had SeaCache samples, really sampled (not from ComfyUI's cache), Stats must pass the
latent through and say so, the interrupt must be logged as one, and once such a prompt ran the server must hold no
object of SeaCache's (no run, no settings, no patched MODEL) and exactly what the graph without SeaCache left.
Wall time is measured, not asserted: ``python -m benchmarks.bypass_cost``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from seacache_testing import server_bypass as sb
from seacache_testing.comfyui_server import retention
from seacache_testing.server_bypass import run

NOT_APPLIED = ("SeaCache: not applied (no SeaCache Apply on this MODEL: bypassed, removed or not connected); "
               "the latent passed through unchanged.")
SEACACHE_CLASSES = {"SamplingRun", "SeaCacheRun", "Call", "SeaCacheSettings", "BranchState", "Seam", "BlockScratch"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    comfyui = os.environ.get("COMFYUI_PATH", "").strip()
    if not comfyui or not (Path(comfyui) / "main.py").is_file():
        pytest.skip("COMFYUI_PATH is not set (or has no main.py): this test starts that ComfyUI's server")
    pytest.importorskip("diffusers")
    srv = sb.start_server(Path(comfyui), sys.executable, tmp_path_factory.mktemp("server"))  # ComfyUI's python
    yield srv
    srv.stop()


def check_no_trace(srv, prompt: dict, reference: torch.Tensor, clean: dict) -> None:
    """The prompt (SeaCache bypassed or deleted) ran its sampler, sampled ``reference`` bit for bit, its Stats
    said SeaCache was not applied, and the server holds what the graph without SeaCache left (``clean``)."""
    entry = run(srv, prompt)
    assert sb.ran_sampler(prompt, entry), "the sampler came from ComfyUI's cache: nothing was compared"
    assert torch.equal(sb.saved_latent(srv, entry), reference)
    (stats,) = [k for k, e in prompt.items() if e["class_type"] == "SeaCacheStats"]
    assert entry["outputs"][stats]["seacache"][0]["note"] == NOT_APPLIED
    probe = retention(srv)
    assert probe["seacache_models"] == 0 and not SEACACHE_CLASSES & set(probe["pack_objects"])
    assert probe["pack_objects"] == {**clean["pack_objects"], "SeaCacheStats": 1}  # the node, in ComfyUI's object cache
    assert probe["tensors"] == clean["tensors"] + 1  # Stats' chart IMAGE, cached with the prompt's outputs


def test_bypass_and_removal_leave_no_trace_also_after_an_interrupt(server):
    variants = sb.t2v_variants(server.object_info)
    assert "SeaCacheStats" in {e["class_type"] for e in variants["deleted"].values()}
    assert "model" not in next(e for e in variants["deleted"].values() if e["class_type"] == "SeaCacheStats")["inputs"]
    assert sb.bypass_node(variants["active"], next(k for k, e in variants["active"].items() if e["class_type"] == "SeaCacheApply"),
                          server.object_info) == variants["bypassed"]

    reference = sb.saved_latent(server, run(server, variants["never"]))
    clean = retention(server)
    active = run(server, variants["active"])
    (stats,) = [k for k, e in variants["active"].items() if e["class_type"] == "SeaCacheStats"]
    report = active["outputs"][stats]["seacache"][0]
    assert report["status"] == "completed" and report["reused"] > 0
    assert not torch.equal(sb.saved_latent(server, active), reference)  # SeaCache did change this run
    assert retention(server)["seacache_models"] >= 1  # Apply's MODEL, cached with the prompt's outputs

    check_no_trace(server, variants["bypassed"], reference, clean)
    run(server, sb.t2v_variants(server.object_info, threshold=0.81)["active"])  # samples something else in between
    check_no_trace(server, variants["deleted"], reference, clean)

    interrupted = sb.t2v_variants(server.object_info, steps=300, threshold=0.82)["active"]
    sb.interrupt_while_sampling(server, interrupted)
    assert retention(server)["pack_objects"].get("SamplingRun", 0) == 0  # the interrupted run freed its state
    log = sb.log_text(server)
    assert "SeaCache: interrupted run of Cosmos3" in log and "SeaCache: failed run" not in log
    check_no_trace(server, variants["bypassed"], reference, clean)
