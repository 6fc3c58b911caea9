"""Third-party node packs that sit in most video graphs beside SeaCache, for the tests that run SeaCache against
their real code: where they live, the commit they were tested at, and loading them into a harness session with
ComfyUI's own loader. Their code is never part of this repository.

- city96/ComfyUI-GGUF (``UnetLoaderGGUF``): GGML-quantized weights, dequantized inside its own ops, LoRAs patched
  onto the dequantized weights at each forward.
- pollockjj/ComfyUI-MultiGPU (``UNETLoaderDisTorch2MultiGPU`` and its GGUF twins): DisTorch 2 spreads a model's
  layers over devices and CPU memory. Importing it replaces ``comfy.model_management``'s device getters,
  ``current_stream``, ``comfy.sample.sample`` / ``sample_custom``, and its loaders then replace ``load_models_gpu``
  and ``ModelPatcher.partially_load`` process-wide (:data:`MULTIGPU_PATCH_POINTS`); :func:`restored` puts them back
  so that later tests run on ComfyUI's own. It expects every core node file ComfyUI loads before custom nodes (it
  wraps ``TripleCLIPLoader`` and ``QuadrupleCLIPLoader``), registers its GGUF loaders only where ComfyUI-GGUF is
  in a ``custom_nodes`` folder, and imports ``comfy.memory_management`` (ComfyUI 0.33; 0.3.64 has none).
- kijai/ComfyUI-KJNodes: the model-patch nodes users chain with a step cache (attention overrides, torch.compile,
  Enhance-A-Video ...). Its LTXV module reads ``server.PromptServer.instance`` at import (a running server has one,
  a headless session none) and its ``__init__`` adds a static route when the server's router is not frozen: it is
  loaded with :func:`headless_server` in place, so those nodes register as on a real server and no route is added.

Torch and ComfyUI are imported only when a function runs.
"""

from __future__ import annotations

import contextlib
import os
import types
from dataclasses import dataclass
from pathlib import Path

ECOSYSTEM_PACKS_ENV = "ECOSYSTEM_PACKS_PATH"
"""A custom_nodes-like folder holding the packs' folders (default: ComfyUI's own custom_nodes)."""


@dataclass(frozen=True)
class EcosystemPack:
    """One pack: its folder name, repository and the commit tested, a node id it registers (to tell it loaded), the
    comfy_extras files it needs loaded first, the packs it builds on, the ComfyUI modules it imports that older
    ComfyUI lacks, and whether it reads ComfyUI's server at import (loaded with :func:`headless_server` then)."""

    folder: str
    repo: str
    commit: str
    node_id: str
    core_node_files: tuple[str, ...] = ()
    needs: tuple[EcosystemPack, ...] = ()
    comfy_modules: tuple[str, ...] = ()
    reads_server: bool = False

    @property
    def label(self) -> str:
        return f"{self.repo} at {self.commit[:7]}"


GGUF = EcosystemPack("ComfyUI-GGUF", "city96/ComfyUI-GGUF", "795e45156ece99afbc3efef911e63fcb46e6a20d",
                     "UnetLoaderGGUF")
MULTIGPU = EcosystemPack("ComfyUI-MultiGPU", "pollockjj/ComfyUI-MultiGPU", "a38cbda5fb64232bfa67867d55ae473d2c44d54e",
                         "UnetLoaderGGUFDisTorch2MultiGPU", ("nodes_sd3.py", "nodes_hidream.py"), (GGUF,),
                         ("comfy.memory_management",))
KJNODES = EcosystemPack("ComfyUI-KJNodes", "kijai/ComfyUI-KJNodes", "3f20054214fec9f9234fd3841ae6f1e4287948f6",
                        "PathchSageAttentionKJ", reads_server=True)

MULTIGPU_PATCH_POINTS = (
    ("comfy.model_management", "get_torch_device"),
    ("comfy.model_management", "text_encoder_device"),
    ("comfy.model_management", "unet_offload_device"),
    ("comfy.model_management", "current_stream"),
    ("comfy.model_management", "load_models_gpu"),
    ("comfy.sample", "sample"),
    ("comfy.sample", "sample_custom"),
    ("comfy.model_patcher", "ModelPatcher.partially_load"),
    ("comfy.model_patcher", "ModelPatcher._distorch_patched"),
    ("comfy.model_management", "soft_empty_cache"),
    ("comfy.model_patcher", "ModelPatcherDynamic._load_list"),
    ("comfy.sd", "load_state_dict_guess_config"),
)
"""What ComfyUI-MultiGPU a38cbda replaces in ComfyUI (module, attribute path): at import the first four, the two
samplers, ``soft_empty_cache`` (its replacement reads ``PromptServer.instance``, which a headless session lacks),
``ModelPatcherDynamic._load_list`` (ComfyUI 0.33) and ``load_state_dict_guess_config``; at its first DisTorch load
``load_models_gpu`` and ``partially_load`` (marked by ``_distorch_patched``)."""


def packs_root(ns) -> Path:
    """``$ECOSYSTEM_PACKS_PATH``, else the session ComfyUI's custom_nodes folder."""
    return Path(os.environ.get(ECOSYSTEM_PACKS_ENV) or ns.path / "custom_nodes")


@contextlib.contextmanager
def headless_server():
    """A stand-in ``PromptServer.instance`` with a frozen router (no route is added) that drops messages, in place
    inside the block only when ComfyUI has none."""
    import server

    if "instance" in vars(server.PromptServer):
        yield server.PromptServer.instance
        return
    router = types.SimpleNamespace(frozen=True)
    server.PromptServer.instance = types.SimpleNamespace(
        app=types.SimpleNamespace(router=router), client_id=None, last_node_id=None,
        send_sync=lambda *args, **kwargs: None, send_progress_text=lambda *args, **kwargs: None)
    try:
        yield server.PromptServer.instance
    finally:
        del server.PromptServer.instance


def load(ns, pack: EcosystemPack) -> str | None:
    """Load ``pack`` (after the packs it needs and its core node files) with ``nodes.load_custom_node``, once per
    session. Returns None when its node is registered, else why not (a test's skip reason, naming pack and commit)."""
    import importlib.util

    from seacache_testing.comfyui_harness import _run

    for module in pack.comfy_modules:
        if importlib.util.find_spec(module) is None:
            return f"{pack.label} imports {module}, which ComfyUI {ns.version} does not have"
    for needed in pack.needs:
        missing = load(ns, needed)
        if missing:
            return missing
    folder = packs_root(ns) / pack.folder
    if not folder.is_dir():
        return (f"{pack.label} is not installed: put its folder {pack.folder} in ${ECOSYSTEM_PACKS_ENV} or in "
                f"ComfyUI's custom_nodes")
    if str(folder.parent) not in ns.folder_paths.get_folder_paths("custom_nodes"):
        ns.folder_paths.add_model_folder_path("custom_nodes", str(folder.parent))  # where packs look for each other
    ns.load_extra_nodes(*pack.core_node_files)
    loaded = ns.__dict__.setdefault("custom_node_folders", {})
    if str(folder) not in loaded:
        with headless_server() if pack.reads_server else contextlib.nullcontext():
            loaded[str(folder)] = _run(ns.nodes.load_custom_node(str(folder), module_parent="custom_nodes"))
    if pack.node_id not in ns.nodes.NODE_CLASS_MAPPINGS:
        return f"{pack.label} did not load in ComfyUI {ns.version} (its import error is in the log above)"
    return None


def _owner(dotted: str, path: str):
    import importlib

    owner = importlib.import_module(dotted)
    for name in path.split(".")[:-1]:
        owner = getattr(owner, name)
    return owner, path.split(".")[-1]


@contextlib.contextmanager
def restored(points=MULTIGPU_PATCH_POINTS):
    """Inside the block a pack may replace the ``points``; afterwards each holds what it held before (an attribute
    that was absent is removed again; a point whose class this ComfyUI lacks is skipped)."""
    missing = object()
    saved = []
    for dotted, path in points:
        try:
            owner, name = _owner(dotted, path)
        except AttributeError:
            continue
        saved.append((owner, name, vars(owner).get(name, missing) if isinstance(owner, type) else getattr(owner, name, missing)))
    try:
        yield
    finally:
        for owner, name, value in saved:
            if value is missing:
                if name in vars(owner):
                    delattr(owner, name)
            else:
                setattr(owner, name, value)


def distorch_model(ns, node: str, unet_name: str, compute: str, donor: str, donor_share: int = 50):
    """A MODEL loaded by a DisTorch 2 loader of ComfyUI-MultiGPU (``UNETLoaderDisTorch2MultiGPU``, its GGUF twin)
    with ``donor_share`` percent of the model's bytes assigned to ``donor`` and the rest to ``compute``, where it
    runs (expert allocation "<donor>,<share>%;<compute>,<rest>%"). DisTorch places the layers when ComfyUI loads the
    model for sampling: a donor layer is moved to ``donor`` and marked ``comfy_cast_weights``, so ComfyUI's ops copy
    its weights to the compute device at each forward."""
    inputs = {"unet_name": unet_name, "compute_device": compute, "virtual_vram_gb": 0.0, "donor_device": donor,
              "expert_mode_allocations": f"{donor},{donor_share}%;{compute},{100 - donor_share}%", "eject_models": False}
    if node == "UNETLoaderDisTorch2MultiGPU":
        inputs["weight_dtype"] = "default"
    return ns.run_node(node, **inputs).outputs[0]


def distorch_placement(model) -> dict[str, str]:
    """Where DisTorch put each layer of a loaded MODEL (module name -> device name); empty before its first load."""
    return dict(getattr(model, "_distorch_cached_assignments", {}).get("block_assignments", {}))
