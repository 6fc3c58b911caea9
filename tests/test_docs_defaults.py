"""The defaults the docs state for SeaCache Apply are the code's: each row of the input tables in the README
(``### SeaCache Apply``) and in docs/nodes.md states its widget's default, and those equal ``SeaCacheConfig()``'s
fields, the node's widget defaults as its source writes them and, with ComfyUI, as the running node declares them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seacache_core import SeaCacheConfig
from seacache_testing import workflow_runner as wr

ROOT = Path(__file__).resolve().parents[1]
README, NODE_REFERENCE = ROOT / "README.md", ROOT / "docs" / "nodes.md"
TABLES = {README: "### SeaCache Apply (`SeaCacheApply`)", NODE_REFERENCE: "## SeaCache Apply (`SeaCacheApply`)"}
HEADER = "| input | default | meaning |"
NUMERIC_FIELDS = ("threshold", "max_consecutive", "end_steps", "speedup", "min_steps")  # input = config field


def stated(path: Path, heading: str | None = None) -> dict[str, tuple[str, str]]:
    """``{input: (default, meaning)}`` of the first ``input | default | meaning`` table under ``heading`` (default
    ``TABLES[path]``); a row naming two inputs (``warmup_steps / end_steps``) states both defaults (``1 / 1``);
    ``(advanced)`` and ``(expert)`` marks are dropped from the names."""
    text = path.read_text(encoding="utf-8")
    lines = text[text.index(heading or TABLES[path]):].splitlines()
    start = lines.index(HEADER) + 2  # past the header and its rule
    rows = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        name, default, meaning = (cell.strip() for cell in line.strip()[1:-1].split("|", 2))
        names = re.sub(r"\s*\((advanced|expert)\)$", "", name).split(" / ")
        defaults = default.split(" / ") if len(names) > 1 else [default]
        assert len(defaults) == len(names), line
        rows.update({n: (d, meaning) for n, d in zip(names, defaults)})
    return rows


def value(text: str, io_type: str):
    """A stated default as the widget holds it: ``0 (off)`` -> 0.0 for a FLOAT, ``2`` -> 2 for an INT, a combo's
    option as written."""
    text = re.sub(r"\s*\(.*\)$", "", text)
    return {"FLOAT": float, "INT": int}.get(io_type, str)(text)


def test_the_parser_reads_a_two_input_row_and_drops_the_marks(tmp_path):
    page = tmp_path / "nodes.md"
    page.write_text("## SeaCache Apply (`SeaCacheApply`)\n\n" + HEADER + "\n| --- | --- | --- |\n"
                    "| model | | any MODEL |\n| warmup_steps / end_steps (expert) | 1 / 3 | first / last |\n"
                    "| speedup | 0 (off) | a target |\n\nafter the table\n")
    rows = stated(page, "## SeaCache Apply (`SeaCacheApply`)")
    assert rows == {"model": ("", "any MODEL"), "warmup_steps": ("1", "first / last"), "end_steps": ("3", "first / last"),
                    "speedup": ("0 (off)", "a target")}
    assert (value("0 (off)", "FLOAT"), value("3", "INT"), value("sea same-sigma", "COMBO")) == (0.0, 3, "sea same-sigma")


@pytest.mark.parametrize("path", list(TABLES), ids=lambda p: p.name)
def test_every_widget_default_is_stated_as_the_source_writes_it(path):
    """Each table names every widget input of SeaCache Apply (and the MODEL input, which has no default), and each
    stated default is the widget's, read from the node's source (``DEFAULTS = SeaCacheConfig()``, its labels)."""
    rows = stated(path)
    widgets = wr.literal_widget_defaults("SeaCacheApply")
    assert set(rows) == {"model"} | {name for name, _, _ in widgets}
    assert rows["model"][0] == ""
    for name, io_type, default in widgets:
        assert value(rows[name][0], io_type) == default, (path.name, name, rows[name][0], default)


@pytest.mark.parametrize("path", list(TABLES), ids=lambda p: p.name)
def test_stated_defaults_are_seacache_configs(path):
    """The stated threshold, max_consecutive, end_steps and speedup equal ``SeaCacheConfig()``'s; residual_order
    and warmup_steps are ``auto``, whose order away from Cosmos3 and warm-up away from Wan are the config's."""
    rows, config = stated(path), SeaCacheConfig()
    for field in NUMERIC_FIELDS:
        assert value(rows[field][0], "FLOAT") == getattr(config, field), (path.name, field, rows[field][0])
    default, meaning = rows["residual_order"]
    assert default == "auto"
    elsewhere = re.search(r"auto = 2 on Cosmos3\b.*?, (\d) (?:elsewhere|on other models)", meaning)
    assert elsewhere and int(elsewhere.group(1)) == config.order, meaning
    default, meaning = rows["warmup_steps"]
    assert default == "-1 (auto)"
    elsewhere = re.search(r"auto: 4 on Wan\b.*?, (\d) elsewhere", meaning)
    assert elsewhere and int(elsewhere.group(1)) == config.warmup_steps, meaning


def test_stated_labels_name_the_configs_values():
    """The gate, storage and filter labels the README states are the node's labels of ``SeaCacheConfig()``'s gate,
    residual_storage and power (the source's ``choice_label(<CHOICES>, DEFAULTS.<field>)``), and the README says
    which config value the default gate is."""
    rows, config = stated(README), SeaCacheConfig()
    widgets = {name: default for name, _, default in wr.literal_widget_defaults("SeaCacheApply")}
    assert (rows["gate"][0], rows["residual_storage"][0], rows["filter_exponent"][0]) == (
        widgets["gate"], widgets["residual_storage"], widgets["filter_exponent"])
    assert config.gate == rows["gate"][0].replace(" ", "_").replace("-", "_")  # "sea same-sigma" is sea_same_sigma
    assert config.power is None and rows["filter_exponent"][0] == "auto"


def test_the_running_nodes_defaults_are_the_stated_ones(comfy, pack):
    """Through ComfyUI: SeaCache Apply's declared inputs (``INPUT_TYPES``, required and optional) have the defaults
    both tables state."""
    types = comfy.node("SeaCacheApply").INPUT_TYPES()
    declared = {name: (spec[0], spec[1]) for section in ("required", "optional")
                for name, spec in (types.get(section) or {}).items()}
    kinds = {name: "COMBO" if isinstance(kind, (list, tuple)) or kind == "COMBO" else kind
             for name, (kind, _) in declared.items()}
    for path in TABLES:
        rows = stated(path)
        assert set(rows) == set(declared), path.name
        for name, (_, options) in declared.items():
            if name == "model":
                continue
            assert value(rows[name][0], kinds[name]) == options["default"], (path.name, name)
