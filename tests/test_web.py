"""The frontend extension (web/): its node:test suite passes, and the files ComfyUI serves are in place."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "web"


def test_web_directory_is_served():
    init = (ROOT / "__init__.py").read_text(encoding="utf-8")
    assert re.search(r'^WEB_DIRECTORY\s*=\s*"\./web"', init, re.M)
    # ComfyUI serves every **/*.js under WEB_DIRECTORY as an extension; the tests are .mjs so they are not.
    served = sorted(p.name for p in WEB.rglob("*.js"))
    assert "seacache.js" in served
    assert not [n for n in served if ".test." in n or n.startswith("test")], served
    source = (WEB / "seacache.js").read_text(encoding="utf-8")
    assert 'import("../../scripts/app.js")' in source and 'import("../../scripts/api.js")' in source
    assert '"SeaCache.UI"' in source and '"seacache.progress"' in source
    assert 'typeof window !== "undefined"' in source


def test_icon_is_svg():
    root = ElementTree.parse(WEB / "icon.svg").getroot()
    assert root.tag.endswith("svg") and root.get("viewBox")
    assert (WEB / "icon.svg").stat().st_size < 4096


def test_node_tests_pass():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: the frontend tests (node --test web/) need Node.js >= 20")
    # `node --test web/` on Node 20; the files are named explicitly because Node >= 21 reads the arguments as glob
    # patterns, and TAP is asked for because newer Node versions default to the spec reporter off a terminal too.
    files = sorted(str(p.relative_to(ROOT)) for p in WEB.glob("*.test.mjs"))
    assert files, "no web/*.test.mjs files"
    proc = subprocess.run([node, "--test", "--test-reporter=tap", *files], cwd=ROOT, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    passed = re.search(r"^# pass (\d+)$", out, re.M)
    failed = re.search(r"^# fail (\d+)$", out, re.M)
    assert passed and int(passed.group(1)) > 0, f"no node tests ran:\n{out[-4000:]}"
    assert failed and int(failed.group(1)) == 0, out[-4000:]
