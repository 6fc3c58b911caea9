"""Run pieces of a real ComfyUI checkout inside pytest, on the CPU.

``comfy_session(path)`` puts the checkout on ``sys.path``, forces CPU mode
before any module that reads the CLI args is imported, imports the core
modules and registers a few ``comfy_extras`` node files with ComfyUI's own
loader (``nodes.load_custom_node``, the function ComfyUI's startup uses), and
returns a ``SimpleNamespace`` of handles. It is idempotent per process.

The pack itself is imported the way ComfyUI imports a custom-node folder: a
package spec for ``<repo>/__init__.py`` with the repo root as its submodule
search location, so the pack's relative imports work (``import_pack``).
``import_pack_module("nodes.cosmos3.vae")`` imports one submodule of that package
without executing ``__init__.py`` (which may not exist yet, or may pull in
code that is still being written).

Of ComfyUI's requirements.txt this imports: torch, torchvision, torchsde,
numpy, einops, transformers + tokenizers (comfy.sd imports the text
encoders), safetensors, PyYAML, Pillow, scipy, tqdm, psutil, av (comfy_api
video types), pydantic + pydantic-settings (comfy_config, read by
``load_custom_node``). Not needed: the three comfyui-* frontend/template/docs
packages, aiohttp/yarl (only ``server``), alembic/SQLAlchemy, sentencepiece,
kornia, spandrel; torchaudio is optional (ComfyUI only logs a warning). No
server start, no GPU.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.machinery
import importlib.util
import inspect
import os
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ENV_VAR = "COMFYUI_PATH"
SKIP_REASON = "COMFYUI_PATH is not set: integration test needs a ComfyUI checkout"
PACK_ROOT = Path(__file__).resolve().parents[1]
PACK_MODULE_NAME = "seacache_pack"

# comfy_extras files registered by default: SamplerCustomAdvanced, CFGGuider,
# KSamplerSelect, RandomNoise, BasicScheduler (custom_sampler), CreateVideo,
# SaveVideo (video), ModelSamplingSD3 & co. (model_advanced).
DEFAULT_EXTRA_NODE_FILES = (
    "nodes_custom_sampler.py",
    "nodes_video.py",
    "nodes_model_advanced.py",
)

_SESSION: SimpleNamespace | None = None
_PLACEHOLDER_ATTR = "__seacache_placeholder__"


class ComfyUISetupError(RuntimeError):
    pass


def _run(coro):
    """Run a coroutine from sync code (pytest tests are sync)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    raise ComfyUISetupError("cannot run ComfyUI async helpers inside a running event loop")


def _purge_shadowing_modules(comfy_root: Path) -> None:
    """Drop already-imported top-level modules that are not ComfyUI's own.

    With the repo root on sys.path (pytest ``pythonpath = ["."]``) ``import
    nodes`` could resolve to this pack's ``nodes`` folder if something
    imported it first; and after nodes.py has put ``<ComfyUI>/comfy`` on
    sys.path a bare ``import utils`` finds ``comfy/utils.py``. ComfyUI needs
    its own ``nodes.py`` and ``utils`` package.
    """
    expected = {
        "nodes": comfy_root / "nodes.py",
        "folder_paths": comfy_root / "folder_paths.py",
        "node_helpers": comfy_root / "node_helpers.py",
        "latent_preview": comfy_root / "latent_preview.py",
        "server": comfy_root / "server.py",
        "comfy": comfy_root / "comfy",
        "comfy_extras": comfy_root / "comfy_extras",
        "comfy_api": comfy_root / "comfy_api",
        "comfy_execution": comfy_root / "comfy_execution",
        "utils": comfy_root / "utils",
    }
    for name, want in expected.items():
        mod = sys.modules.get(name)
        if mod is None:
            continue
        locations = list(getattr(mod, "__path__", None) or [])
        if not locations and getattr(mod, "__file__", None):
            locations = [mod.__file__]
        if any(Path(loc).resolve() == want.resolve() for loc in locations):
            continue
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def comfy_session(path: str | os.PathLike, output_root: str | os.PathLike | None = None,
                  extra_node_files=DEFAULT_EXTRA_NODE_FILES) -> SimpleNamespace:
    """Set up ComfyUI from ``path`` for CPU use (its GPU when ``COMFYUI_HARNESS_DEVICE=gpu``, for
    ``scripts/gpu_check.sh``) and return handles (cached per process).

    ``output_root``: where ComfyUI's output/temp/input/user folders are
    redirected (a fresh temp dir when None) so tests never write into the
    checkout.
    """
    global _SESSION
    comfy_root = Path(path).resolve()
    if _SESSION is not None:
        if _SESSION.path != comfy_root:
            raise ComfyUISetupError(f"ComfyUI already set up from {_SESSION.path}, not {comfy_root}")
        return _SESSION
    if not (comfy_root / "comfy" / "model_management.py").is_file() or not (comfy_root / "nodes.py").is_file():
        raise ComfyUISetupError(f"{ENV_VAR}={path} is not a ComfyUI checkout (no comfy/model_management.py or nodes.py)")

    _purge_shadowing_modules(comfy_root)
    if str(comfy_root) in sys.path:
        sys.path.remove(str(comfy_root))
    sys.path.insert(0, str(comfy_root))

    # comfy.cli_args parses sys.argv only when comfy.options.enable_args_parsing()
    # was called (main.py does that); left disabled it parses [] and so never
    # sees pytest's argv. Set the args before model_management reads them.
    import comfy.options  # noqa: F401
    import comfy.cli_args

    already = "comfy.model_management" in sys.modules
    args = comfy.cli_args.args
    args.cpu = os.environ.get("COMFYUI_HARNESS_DEVICE", "cpu") != "gpu"

    import comfy.model_management as mm

    if already and args.cpu and mm.cpu_state != mm.CPUState.CPU:
        raise ComfyUISetupError("comfy.model_management was imported before the harness set args.cpu=True")

    import comfy.latent_formats
    import comfy.model_base
    import comfy.model_patcher
    import comfy.model_sampling
    import comfy.patcher_extension
    import comfy.sample
    import comfy.samplers
    import comfy.sd
    import comfy.utils
    import folder_paths

    # nodes.py puts <ComfyUI>/comfy on sys.path[0], after which a bare
    # ``import utils`` would find comfy/utils.py; main.py imports the root
    # ``utils`` package first, so do the same (``import server`` needs it).
    import utils.extra_config  # noqa: F401
    import nodes

    root = Path(output_root) if output_root is not None else Path(tempfile.mkdtemp(prefix="comfyui-test-"))
    for sub, setter in (("output", folder_paths.set_output_directory), ("temp", folder_paths.set_temp_directory),
                        ("input", folder_paths.set_input_directory), ("user", folder_paths.set_user_directory)):
        (root / sub).mkdir(parents=True, exist_ok=True)
        setter(str(root / sub))

    _run(nodes.init_public_apis())
    version = getattr(importlib.import_module("comfyui_version"), "__version__", "unknown")

    ns = SimpleNamespace(
        path=comfy_root,
        version=version,
        args=args,
        mm=mm,
        model_management=mm,
        sd=comfy.sd,
        samplers=comfy.samplers,
        sample=comfy.sample,
        utils=comfy.utils,
        latent_formats=comfy.latent_formats,
        model_base=comfy.model_base,
        model_patcher=comfy.model_patcher,
        model_sampling=comfy.model_sampling,
        patcher_extension=comfy.patcher_extension,
        folder_paths=folder_paths,
        nodes=nodes,
        output_root=root,
        loaded_extra_files=[],
    )
    ns.load_extra_nodes = lambda *files: load_extra_nodes(ns, *files)
    ns.node = lambda name: node_class(ns, name)
    ns.run_node = lambda name, hidden=None, **inputs: run_node(ns, name, hidden=hidden, **inputs)
    ns.fake_prompt_server = lambda: fake_prompt_server()
    load_extra_nodes(ns, *extra_node_files)
    _SESSION = ns
    return ns


def load_extra_nodes(ns: SimpleNamespace, *files: str) -> None:
    """Register ``comfy_extras/<file>`` nodes via ComfyUI's loader (V1 and V3 alike)."""
    for fname in files:
        if fname in ns.loaded_extra_files:
            continue
        fpath = ns.path / "comfy_extras" / fname
        if not fpath.is_file():
            raise ComfyUISetupError(f"no such comfy_extras file: {fpath}")
        ok = _run(ns.nodes.load_custom_node(str(fpath), module_parent="comfy_extras"))
        if not ok:
            raise ComfyUISetupError(f"ComfyUI could not load {fpath} (see the log for the import error)")
        ns.loaded_extra_files.append(fname)


def node_class(ns: SimpleNamespace, name: str):
    try:
        return ns.nodes.NODE_CLASS_MAPPINGS[name]
    except KeyError:
        raise KeyError(f"node {name!r} is not registered; load its comfy_extras file with ns.load_extra_nodes(...)") from None


def _class_clone_argument(cls, hidden: dict):
    """What ``PREPARE_CLASS_CLONE`` takes in this ComfyUI: the hidden inputs themselves (0.3.x) or the V3 data
    dict that holds them under ``hidden_inputs`` (later versions), told apart by the parameter's name."""
    params = list(inspect.signature(cls.PREPARE_CLASS_CLONE).parameters)
    return {"hidden_inputs": hidden} if params and params[0] == "v3_data" else hidden


def run_node(ns: SimpleNamespace, name: str, hidden: dict | None = None, **inputs) -> SimpleNamespace:
    """Execute one node outside the executor, the way ``execution.py`` calls it.

    Returns ``SimpleNamespace(outputs=tuple, ui=dict|None, raw=...)``.
    ``hidden`` (V3 only) maps ``io.Hidden`` members to values, e.g.
    ``{io.Hidden.unique_id: "7"}``. Runs under ``torch.inference_mode`` like
    ComfyUI's executor.
    """
    import torch
    from comfy_api.internal import _ComfyNodeInternal, make_locked_method_func

    cls = node_class(ns, name)
    if isinstance(cls, type) and issubclass(cls, _ComfyNodeInternal):
        cls.VALIDATE_CLASS()
        clone = cls.PREPARE_CLASS_CLONE(_class_clone_argument(cls, hidden or {}))
        fn = make_locked_method_func(cls, cls.FUNCTION, clone)
    else:
        fn = getattr(cls(), cls.FUNCTION)
    with torch.inference_mode():
        raw = fn(**inputs)
        if inspect.isawaitable(raw):
            raw = _run(raw)
    ui = None
    if isinstance(raw, dict):
        outputs, ui = tuple(raw.get("result", ())), raw.get("ui")
    elif isinstance(raw, tuple):
        outputs = raw
    else:  # V3 NodeOutput
        outputs, ui = tuple(raw.args), getattr(raw, "ui", None)
    if ui is not None and hasattr(ui, "as_dict"):
        ui = ui.as_dict()
    return SimpleNamespace(outputs=outputs, ui=ui, raw=raw)


class _RecordingPromptServer:
    """Stands in for ``server.PromptServer.instance``: records ``send_sync`` calls."""

    def __init__(self):
        self.messages: list[tuple[str, Any, Any]] = []
        self.client_id = None
        self.last_node_id = None

    def send_sync(self, event, data, sid=None):
        self.messages.append((event, data, sid))

    async def send(self, event, data, sid=None):
        self.messages.append((event, data, sid))


class fake_prompt_server:
    """Context manager: ``PromptServer.instance`` is a recorder inside the block.

    Headless, ``server.PromptServer`` has no ``instance`` attribute (it is set
    in ``PromptServer.__init__``, which needs an event loop and aiohttp app).
    ``with ns.fake_prompt_server() as srv: ...; srv.messages``.
    """

    def __enter__(self):
        import server

        self._cls = server.PromptServer
        self._had = "instance" in vars(self._cls)
        self._old = vars(self._cls).get("instance")
        self.recorder = _RecordingPromptServer()
        self._cls.instance = self.recorder
        return self.recorder

    def __exit__(self, *exc):
        if self._had:
            self._cls.instance = self._old
        else:
            del self._cls.instance
        return False


# ----------------------------------------------------------------------------- pack import

def _pack_spec(name: str):
    init = PACK_ROOT / "__init__.py"
    return importlib.util.spec_from_file_location(name, str(init), submodule_search_locations=[str(PACK_ROOT)])


def _ensure_pack_package(name: str):
    """The pack's package module, executed or not (a placeholder keeps ``__init__`` unrun)."""
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(PACK_ROOT)]
    mod = importlib.util.module_from_spec(spec)
    setattr(mod, _PLACEHOLDER_ATTR, True)
    sys.modules[name] = mod
    return mod


def import_pack_module(relname: str, name: str = PACK_MODULE_NAME):
    """Import ``<name>.<relname>`` (e.g. ``nodes.cosmos3.vae``) from this repo as part of the pack package.

    Does not execute the pack's ``__init__.py``; relative imports between the
    pack's own modules work.
    """
    _ensure_pack_package(name)
    return importlib.import_module(f"{name}.{relname}")


def import_pack(name: str = PACK_MODULE_NAME, skip_if_missing: bool = True):
    """Import this repo as a package like ComfyUI loads a custom-node folder.

    Skips the calling test (``pytest.skip``) when ``__init__.py`` does not
    exist yet. If ``import_pack_module`` already created the package without
    running ``__init__``, ``__init__`` is executed into that same module
    object, so submodules imported earlier stay identical.
    """
    init = PACK_ROOT / "__init__.py"
    if not init.is_file():
        if skip_if_missing:
            import pytest

            pytest.skip(f"{init} does not exist yet (the pack's ComfyUI entry point)")
        raise FileNotFoundError(str(init))
    mod = sys.modules.get(name)
    if mod is not None and not getattr(mod, _PLACEHOLDER_ATTR, False):
        return mod
    spec = _pack_spec(name)
    if mod is None:
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
    else:
        mod.__spec__ = spec
        mod.__loader__ = spec.loader
        mod.__file__ = str(init)
        delattr(mod, _PLACEHOLDER_ATTR)
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def load_pack_with_comfyui_loader(ns: SimpleNamespace) -> Any:
    """Load the repo through ``nodes.load_custom_node`` exactly as ComfyUI's startup does.

    Registers the pack's nodes in ``nodes.NODE_CLASS_MAPPINGS`` (V1 mappings or
    V3 ``comfy_entrypoint``) and its web directory. ComfyUI names the module
    after the folder path, so this is a second module object, distinct from
    ``import_pack()``'s. Returns that module.
    """
    init = PACK_ROOT / "__init__.py"
    if not init.is_file():
        import pytest

        pytest.skip(f"{init} does not exist yet (the pack's ComfyUI entry point)")
    ok = _run(ns.nodes.load_custom_node(str(PACK_ROOT), module_parent="custom_nodes"))
    if not ok:
        raise ComfyUISetupError(f"ComfyUI failed to load {PACK_ROOT} as a custom node (see the log)")
    return sys.modules[str(PACK_ROOT).replace(".", "_x_")]


def load_custom_node_folders(ns: SimpleNamespace, root: str | os.PathLike) -> dict[str, bool]:
    """Load every custom-node folder under ``root`` with ``nodes.load_custom_node``, as ComfyUI's startup loads
    its custom_nodes (``__pycache__``, hidden and ``.disabled`` folders left out). Returns folder name -> loaded (a
    pack that fails to import is logged by ComfyUI and maps to False); each folder is loaded once per session."""
    root = Path(root)
    loaded = ns.__dict__.setdefault("custom_node_folders", {})
    names = {}
    for entry in sorted(root.iterdir()) if root.is_dir() else ():
        if not entry.is_dir() or entry.name.startswith((".", "__")) or entry.name.endswith(".disabled"):
            continue
        if str(entry) not in loaded:
            loaded[str(entry)] = _run(ns.nodes.load_custom_node(str(entry), module_parent="custom_nodes"))
        names[entry.name] = loaded[str(entry)]
    return names
