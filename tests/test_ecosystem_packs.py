"""``seacache_testing.ecosystem_packs.restored``: what a third-party pack replaces in ComfyUI inside the block holds
its own value again afterwards, so later tests run on ComfyUI's own functions (ComfyUI-MultiGPU's replacements stay
process-wide otherwise: its ``soft_empty_cache`` failed an unrelated later test in a headless session)."""

from __future__ import annotations

import os
import re
import sys
import types
from pathlib import Path

import pytest

from seacache_testing import ecosystem_packs


def test_restored_puts_back_replaced_added_and_class_attributes_and_skips_absent_classes(monkeypatch):
    module = types.ModuleType("fake_comfy_module")
    own = lambda: "own"  # noqa: E731
    module.soft_empty_cache = own
    module.Patcher = type("Patcher", (), {"load": own})
    monkeypatch.setitem(sys.modules, module.__name__, module)
    points = ((module.__name__, "soft_empty_cache"), (module.__name__, "Patcher.load"),
              (module.__name__, "Patcher._patched"), (module.__name__, "Dynamic._load_list"))
    with ecosystem_packs.restored(points):
        module.soft_empty_cache = lambda: "pack's"
        module.Patcher.load = lambda self: "pack's"
        module.Patcher._patched = True
    assert module.soft_empty_cache is own and vars(module.Patcher)["load"] is own
    assert "_patched" not in vars(module.Patcher) and not hasattr(module, "Dynamic")


def test_every_comfyui_attribute_multigpu_assigns_is_a_restored_point():
    """Every ComfyUI attribute ComfyUI-MultiGPU assigns (``mm.X = ...``, ``comfy.module.X = ...`` in its source, ``mm``
    being ``comfy.model_management``) is one of the points restored after its tests."""
    folder = Path(os.environ.get(ecosystem_packs.ECOSYSTEM_PACKS_ENV, "")) / ecosystem_packs.MULTIGPU.folder
    if not os.environ.get(ecosystem_packs.ECOSYSTEM_PACKS_ENV) or not folder.is_dir():
        pytest.skip(f"{ecosystem_packs.MULTIGPU.label} not found: set {ecosystem_packs.ECOSYSTEM_PACKS_ENV}")
    assignment = re.compile(r"^\s*(mm|comfy\.[a-z_.]+?)\.([A-Za-z_]+(?:\.[A-Za-z_]+)?) = ", re.M)
    assigned = set()
    for source in folder.glob("*.py"):
        for module, path in assignment.findall(source.read_text(encoding="utf-8")):
            module = "comfy.model_management" if module == "mm" else module
            if module.count(".") == 2 and module.split(".")[-1][:1].isupper():  # comfy.model_patcher.Class.attr
                module, path = module.rsplit(".", 1)[0], f"{module.rsplit('.', 1)[1]}.{path}"
            assigned.add((module, path))
    assert len(assigned) >= 10 and assigned <= set(ecosystem_packs.MULTIGPU_PATCH_POINTS), assigned
