"""Every file the repository names exists: paths cited in docstrings, comments and markdown, markdown links, and
the files pyproject.toml points at (a reader or a packager must be able to follow each of them)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP_FOLDERS = "docs|scripts|benchmarks|tests|seacache_testing|nodes|seacache_core|cosmos3|web|example_workflows|workflows|\\.ci"
CITED_PATH = re.compile(
    rf"(?<![\w./-])((?:{TOP_FOLDERS})/[\w./-]*[\w-]\.(?:md|py|js|mjs|json|png|svg|safetensors|txt|toml))\b"
)
MD_LINK = re.compile(r"\]\(([^)\s]+)\)")
TEXT_SUFFIXES = {".py", ".md", ".js", ".mjs", ".toml", ".txt", ".json", ""}


def tracked_text_files() -> list[Path]:
    """The repository's files (tracked or new, not ignored) that hold prose or code; without git (a source
    archive), every file outside hidden folders, virtual environments and node_modules."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT, capture_output=True, text=True, check=True,
        ).stdout.split()
        files = [ROOT / name for name in listed]
    except (OSError, subprocess.CalledProcessError):
        skipped = {"node_modules", "__pycache__"}
        files = [
            f for f in ROOT.rglob("*")
            if not any(part.startswith(".") or part in skipped for part in f.relative_to(ROOT).parts[:-1])
        ]
    return [f for f in files if f.is_file() and f.suffix in TEXT_SUFFIXES and f.stat().st_size < 2_000_000]


def missing_references(path: Path, text: str) -> list[str]:
    """Repo paths cited in `text` (and, in markdown, relative link targets) that do not exist."""
    missing = [m for m in CITED_PATH.findall(text) if not (ROOT / m).exists()]
    if path.suffix == ".md":
        for target in MD_LINK.findall(text):
            target = target.split("#", 1)[0]
            if target and "://" not in target and not target.startswith("mailto:"):
                if not (path.parent / target).exists():
                    missing.append(target)
    return missing


def test_every_cited_repo_file_exists():
    problems = {}
    this = Path(__file__).resolve()  # cites missing files on purpose, to test the checker
    for path in tracked_text_files():
        if path == this:
            continue
        missing = missing_references(path, path.read_text(errors="replace"))
        if missing:
            problems[str(path.relative_to(ROOT))] = sorted(set(missing))
    assert problems == {}


def test_no_citation_of_an_unshipped_spec():
    """Docstrings cite sections of docs/algorithm.md, not a specification the repository does not contain."""
    pattern = re.compile(r"spec(ification)? section|seacache-spec", re.IGNORECASE)
    this = Path(__file__).resolve()
    citing = [
        str(p.relative_to(ROOT))
        for p in tracked_text_files()
        if p != this and pattern.search(p.read_text(errors="replace"))
    ]
    assert citing == []


def test_the_checker_finds_a_missing_file():
    text = "See docs/no-such-page.md and [here](no-such.md); docs/algorithm.md exists."
    assert missing_references(ROOT / "docs" / "x.md", text) == ["docs/no-such-page.md", "no-such.md"]


def test_pyproject_names_only_existing_files():
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project, comfy = data["project"], data["tool"]["comfy"]
    named = [project["readme"], *comfy.get("includes", [])]
    if "file" in project.get("license", {}):
        named.append(project["license"]["file"])
    for key in ("Icon", "Banner"):
        if comfy.get(key) and "://" not in comfy[key]:
            named.append(comfy[key])
    assert [name for name in named if not (ROOT / name).exists()] == []
    released = re.findall(r"^## (\d+\.\d+\.\d+)", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert project["version"] == released[0]  # the registry's version is the CHANGELOG's newest release
