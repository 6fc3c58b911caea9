"""Every ComfyUI symbol the pack touches that is no public surface is listed in nodes/comfy_internals.py (checked
here against the code, without ComfyUI), is still where the pack reads it (on the running ComfyUI: a test per
symbol that fails loudly when an update moves it), and when one is gone the node that needs it refuses before
anything runs, naming the symbol and the fix (update ComfyUI or SeaCache), instead of failing mid-run."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMFY_ROOTS = ("comfy", "comfy_execution", "comfy_extras", "server", "node_helpers", "folder_paths", "latent_preview",
               "nodes", "execution")
PUBLIC = ("comfy_api.", "comfy.patcher_extension.")  # the V3 API and the wrapper API


def load_internals():
    """nodes/comfy_internals.py on its own (it imports nothing of ComfyUI at module level)."""
    spec = importlib.util.spec_from_file_location("comfy_internals_under_test", ROOT / "nodes" / "comfy_internals.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


INTERNALS = load_internals()
ENTRIES = [entry for entries in INTERNALS.INTERNALS.values() for entry in entries]


def referenced_names(path: Path) -> set[str]:
    """The ComfyUI names a source file imports or reads off an imported ComfyUI module (longest dotted chains), and
    the ``("comfy.module", "Class")`` pairs its tables name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound, found = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in COMFY_ROOTS:
                    bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module.split(".")[0] in COMFY_ROOTS + ("comfy_api",):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and all(isinstance(e, ast.Constant) for e in node.elts):
            module, name = (e.value for e in node.elts)
            if isinstance(module, str) and module.startswith("comfy.") and isinstance(name, str) and name.isidentifier():
                found.add(f"{module}.{name}")
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if chain and isinstance(node, ast.Name) and node.id in bound:
            found.add(".".join([bound[node.id], *reversed(chain)]))
    return {name for name in found if not any(other.startswith(name + ".") for other in found)}


def uncovered(names) -> list[str]:
    """The names no entry covers: an entry, something under one, or a module holding one (passed as a module)."""
    listed = [entry.path.split("#")[0] for entry in ENTRIES]
    return sorted(name for name in names if not name.startswith(PUBLIC) and "." in name
                  and not any(name == path or name.startswith(path + ".") or path.startswith(name + ".") for path in listed))


def test_every_internal_symbol_the_code_touches_is_listed():
    names = set().union(*(referenced_names(path) for path in [ROOT / "__init__.py", *sorted((ROOT / "nodes").rglob("*.py"))]))
    assert len(names) > 40  # the scan sees the code
    assert uncovered(names) == []


def test_the_listing_check_finds_an_unlisted_symbol(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text("import comfy.model_management\nfrom comfy.samplers import KSAMPLER_NAMES\n"
                      "TABLE = {('comfy.ldm.chroma.model', 'Chroma'): 1}\n"
                      "x = comfy.model_management.get_torch_device()\ny = comfy.model_management.soft_empty_cache\n")
    assert uncovered(referenced_names(source)) == ["comfy.ldm.chroma.model.Chroma", "comfy.model_management.soft_empty_cache",
                                                   "comfy.samplers.KSAMPLER_NAMES"]


def test_every_entry_says_why():
    assert len({entry.path for entry in ENTRIES}) == len(ENTRIES)
    assert all(len(entry.why) > 10 for entry in ENTRIES)


# ----------------------------------------------------------------------------- with ComfyUI


def newer_than_0_3(comfy) -> bool:
    """ComfyUI 0.33.0 or later: where the optional symbols of newer features are expected too."""
    return tuple(int(x) for x in comfy.version.split(".")[:2]) >= (0, 33)


@pytest.fixture(scope="module")
def instances(comfy, tiny):
    """``class name -> (instance, its attribute names)`` for the ``#`` entries, as run start sees them: the tiny
    Cosmos3 MODEL, and the guider of a sampling run inside an extra run-start wrapper (ComfyUI sets ``conds`` for
    the run and removes it after)."""
    seen = {}

    def capture(executor, *args, **kwargs):
        seen["CFGGuider"] = (executor.class_obj, set(vars(executor.class_obj)))
        return executor(*args, **kwargs)

    model = tiny.model.clone()
    model.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, "capture", capture)
    tiny.sample(model, steps=2)
    return {**seen, "ModelPatcher": (tiny.model, set(vars(tiny.model)))}


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry.path for entry in ENTRIES])
def test_symbol_is_where_the_pack_reads_it(comfy, instances, entry):
    """Every symbol on every tested ComfyUI, but those of features newer than 0.3.x (detected where used) only from
    0.33.0 on."""
    if entry.newer and not newer_than_0_3(comfy):
        pytest.skip(f"{entry.path} belongs to a feature newer than ComfyUI {comfy.version} (detected where used)")
    obj = INTERNALS.resolve(entry.path)
    if "#" in entry.path:
        instance, attributes = instances[entry.path.split("#")[0].rsplit(".", 1)[1]]
        assert isinstance(instance, obj) and entry.path.split("#")[1] in attributes
    assert obj is not None


def test_nothing_required_is_missing_here(comfy):
    assert {feature: INTERNALS.missing(feature) for feature in INTERNALS.INTERNALS} == \
        {feature: () for feature in INTERNALS.INTERNALS}


def test_apply_refuses_a_comfyui_without_a_symbol_it_needs(tiny, monkeypatch):
    import comfy.model_patcher

    monkeypatch.delattr(comfy.model_patcher, "create_model_options_clone")
    with pytest.raises(ValueError) as refused:
        tiny.seacache()
    message = str(refused.value)
    assert message.startswith("SeaCache Apply cannot run on this ComfyUI: it needs "
                              "comfy.model_patcher.create_model_options_clone (the run's private copy")
    assert "Update ComfyUI and SeaCache to their newest versions" in message


def test_a_first_block_gate_refuses_without_its_symbols_and_the_others_run(tiny, monkeypatch):
    import comfy.ldm.common_dit

    monkeypatch.delattr(comfy.ldm.common_dit, "rms_norm")
    with pytest.raises(ValueError, match=r"SeaCache Apply's gate 'first_block' cannot run .* comfy\.ldm\.common_dit\.rms_norm"):
        tiny.seacache(gate="first block")
    assert tiny.seacache(gate="sea") is not None  # the latent gates need none of them


def test_cosmos3_loader_refuses_without_a_symbol_it_needs(tiny, monkeypatch):
    import comfy.sampler_helpers

    monkeypatch.delattr(comfy.sampler_helpers, "prepare_mask")
    with pytest.raises(ValueError, match=r"Cosmos3 Loader cannot run on this ComfyUI: it needs comfy\.sampler_helpers\.prepare_mask"):
        tiny.ns.run_node("SeaCacheCosmos3Loader", checkpoint=tiny.name, weight_dtype="default")
