"""SeaCacheConfig validation."""

import ast

import pytest

from seacache_core import SeaCacheConfig
from seacache_testing import workflow_runner as wr


def test_defaults_are_seacache_applys():
    c = SeaCacheConfig()
    assert (c.threshold, c.order, c.max_consecutive, c.warmup_steps, c.end_steps, c.min_steps) == (0.13, 1, 2, 1, 1, 8)
    assert c.power is None and c.residual_storage == "compute"
    assert c.gate == "sea_same_sigma" and c.sound_weight == 1.0
    assert c.speedup == 0.0 and c.speed_target is None and c.speed_lifts_cap is True
    assert c.forecaster == "newton" and c.residuals_kept == 2
    assert c.quadratic_weight == 1.0  # SeaCache Apply's auto sets None (follow the shift) where it picks order 2
    assert c.warmup_steps == 1  # SeaCache Apply's auto (-1) sets None (follow the shift) on Wan, 1 elsewhere


def test_chebyshev_defaults_are_spectrums_published_setting():
    from seacache_testing.spectrum_forecast import SPECTRUM_DEGREE, SPECTRUM_RIDGE_LAMBDA

    c = SeaCacheConfig(forecaster="chebyshev")
    assert (c.chebyshev_degree, c.chebyshev_lambda) == (SPECTRUM_DEGREE, SPECTRUM_RIDGE_LAMBDA)
    assert c.chebyshev_capacity == c.residuals_kept == 12


def test_the_node_writes_no_default_of_its_own():
    """SeaCache Apply's widgets that mirror a config field take their default from ``DEFAULTS = SeaCacheConfig()``
    (one home), and read from the node's source they equal the config's defaults and labels; warmup_steps' default is
    its "auto" (-1), which no config field holds."""
    tree = ast.parse((wr.PACK_ROOT / "nodes" / "seacache" / "apply.py").read_text(encoding="utf-8"))
    mirrored = {"threshold": "threshold", "max_consecutive": "max_consecutive", "end_steps": "end_steps",
                "min_steps": "min_steps", "filter_exponent": "power", "residual_storage": "residual_storage", "gate": "gate"}
    seen = set()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and call.args and getattr(call.args[0], "value", None) in mirrored:
            default = next(k.value for k in call.keywords if k.arg == "default")
            assert f"DEFAULTS.{mirrored[call.args[0].value]}" in ast.unparse(default), ast.unparse(call)
            seen.add(call.args[0].value)
    assert seen == set(mirrored)
    widgets = {name: default for name, _, default in wr.literal_widget_defaults("SeaCacheApply")}
    c = SeaCacheConfig()
    assert [widgets[n] for n in ("threshold", "max_consecutive", "end_steps", "min_steps")] == [
        c.threshold, c.max_consecutive, c.end_steps, c.min_steps]
    assert widgets["warmup_steps"] == -1  # auto: the seam's (config None, or 1), as residual_order's "auto" is
    assert (widgets["filter_exponent"], widgets["residual_storage"], widgets["gate"]) == ("auto", "compute device", "sea same-sigma")


@pytest.mark.parametrize(
    "name, value",
    [
        ("threshold", -0.1),
        ("threshold", float("inf")),
        ("threshold", float("nan")),
        ("order", 3),
        ("order", -1),
        ("order", 1.5),
        ("power", 0.0),
        ("power", -2.0),
        ("power", float("nan")),
        ("warmup_steps", -1),
        ("end_steps", -1),
        ("min_steps", -1),
        ("min_steps", 8.0),
        ("max_consecutive", -2),
        ("residual_storage", "gpu"),
        ("gate", "none"),
        ("sound_weight", -0.5),
        ("sound_weight", float("nan")),
        ("speed_lifts_cap", 1),
        ("forecaster", "taylor"),
        ("chebyshev_degree", -1),
        ("chebyshev_degree", 2.0),
        ("chebyshev_lambda", -0.1),
        ("chebyshev_lambda", float("inf")),
        ("chebyshev_blend", 1.5),
        ("chebyshev_blend", True),
        ("chebyshev_capacity", 4),  # the fit of degree 4 needs 5
        ("chebyshev_capacity", 12.0),
        ("quadratic_weight", 1.5),
        ("quadratic_weight", -0.1),
        ("quadratic_weight", float("nan")),
        ("quadratic_weight", True),
    ],
)
def test_invalid_raises_naming_parameter(name, value):
    with pytest.raises(ValueError, match=name):
        SeaCacheConfig(**{name: value})


def test_validate_after_mutation():
    c = SeaCacheConfig()
    c.order = 5
    with pytest.raises(ValueError, match="order.*0..2"):
        c.validate()


@pytest.mark.parametrize("kwargs", [{"threshold": 0}, {"max_consecutive": -1}, {"max_consecutive": 0},
                                    {"power": 2.5}, {"residual_storage": "cpu"}, {"order": 0}, {"order": 2},
                                    {"gate": "sea"}, {"gate": "sea_same_sigma"}, {"sound_weight": 0},
                                    {"forecaster": "chebyshev", "chebyshev_degree": 0, "chebyshev_capacity": 3, "order": 2},
                                    {"chebyshev_blend": 0}, {"chebyshev_blend": 1}, {"chebyshev_lambda": 0},
                                    {"speed_lifts_cap": False}, {"quadratic_weight": None}, {"quadratic_weight": 0},
                                    {"quadratic_weight": 0.5}, {"warmup_steps": None}, {"warmup_steps": 0},
                                    {"min_steps": 0}, {"min_steps": 1}])
def test_valid_edges(kwargs):
    SeaCacheConfig(**kwargs)
