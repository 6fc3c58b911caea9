"""Shared pytest fixtures: a CPU ComfyUI session and ComfyUI-style imports of this pack."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from seacache_testing import comfyui_harness, tiny_vae, workflow_cases


@pytest.fixture(scope="session")
def comfy(tmp_path_factory):
    """ComfyUI from ``$COMFYUI_PATH`` in CPU mode (see ``comfyui_harness.comfy_session``).

    Skips when the variable is unset or empty. Output/temp/input/user
    folders point into a session temp dir.
    """
    path = os.environ.get(comfyui_harness.ENV_VAR, "").strip()
    if not path:
        pytest.skip(comfyui_harness.SKIP_REASON)
    return comfyui_harness.comfy_session(path, output_root=tmp_path_factory.mktemp("comfyui"))


@pytest.fixture(scope="session")
def import_pack_module():
    """Callable: ``import_pack_module("nodes.cosmos3.vae")`` -> ``seacache_pack.nodes.cosmos3.vae`` (``__init__`` not run)."""
    return comfyui_harness.import_pack_module


@pytest.fixture(scope="session")
def seacache_pack(comfy):
    """This repo imported as the ``seacache_pack`` package, as ComfyUI would (skips without ``__init__.py``)."""
    return comfyui_harness.import_pack()


@pytest.fixture(scope="session")
def tiny_vae_dir(tmp_path_factory):
    """A tiny random Wan2.2-layout diffusers VAE folder (seed 0), written once per session."""
    return Path(tiny_vae.write_tiny_vae(tmp_path_factory.mktemp("tiny_vae"), seed=0))


@pytest.fixture(scope="session")
def tiny(comfy, tmp_path_factory):
    """The tiny Cosmos3 checkpoint loaded through this pack's Cosmos3 Loader in the ComfyUI session."""
    pytest.importorskip("diffusers")
    from seacache_testing.comfy_runs import load_tiny

    return load_tiny(comfy, tmp_path_factory)


@pytest.fixture(scope="module")
def session(comfy, tmp_path_factory):
    """ComfyUI with the pack, the core nodes the example workflows use, their tiny checkpoints and a test image
    (``workflow_cases.prepare_workflow_session``)."""
    return workflow_cases.prepare_workflow_session(comfy, tmp_path_factory)


@pytest.fixture(scope="module")
def anymodel_session(session, tmp_path_factory):
    """The workflow session plus empty files named like the any-model workflows' checkpoints
    (``workflow_cases.add_anymodel_files``)."""
    return workflow_cases.add_anymodel_files(session, tmp_path_factory)


@pytest.fixture(scope="module")
def pack(comfy):
    """This pack loaded as ComfyUI loads it (its V3 extension), one torch thread while a module's tiny models run
    (thread start-up and contention cost more than they save at this size)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield comfyui_harness.load_pack_with_comfyui_loader(comfy)
    torch.set_num_threads(threads)


@pytest.fixture
def asked(comfy, monkeypatch):
    """The memory each sampling run asks ComfyUI to free (``load_models_gpu``), in run order."""
    asked = []
    load = comfy.mm.load_models_gpu

    def recording(models, memory_required=0, **kwargs):
        asked.append(memory_required)
        return load(models, memory_required=memory_required, **kwargs)

    monkeypatch.setattr(comfy.mm, "load_models_gpu", recording)
    return asked


@pytest.fixture(scope="module")
def peers(comfy):
    """ComfyUI with the third-party cache packs of ``$PEER_CACHES_PATH`` loaded (``peer_packs.load_peer_packs``) and
    the names of the pack folders loaded; one torch thread while the tiny models run."""
    from seacache_testing import peer_packs

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    loaded = peer_packs.load_peer_packs(comfy)
    yield comfy, loaded
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def peer_wan(peers):
    """ComfyUI's tiny Wan 2.1 T2V and its uncached result over the peer tests' 35 steps."""
    from seacache_testing import tiny_comfy_models
    from seacache_testing.anymodel_runs import sample

    comfy, _ = peers
    model = tiny_comfy_models.build("wan21_t2v")
    return model, sample(comfy, model, tiny_comfy_models.SPECS["wan21_t2v"], steps=35)
