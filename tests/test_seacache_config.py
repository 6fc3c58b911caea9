"""SeaCacheConfig validation."""

import pytest

from seacache_core import SeaCacheConfig


def test_defaults():
    c = SeaCacheConfig()
    assert (c.threshold, c.order, c.max_consecutive, c.warmup_steps, c.end_steps) == (0.25, 1, 2, 1, 1)
    assert c.power is None and c.residual_device == "compute"
    assert c.gate == "sea" and c.sound_weight == 1.0
    assert (c.resolve_power(48), c.resolve_power(1)) == (3.0, 2.0)


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
        ("max_consecutive", -2),
        ("residual_device", "gpu"),
        ("gate", "none"),
        ("sound_weight", -0.5),
        ("sound_weight", float("nan")),
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
                                    {"power": 2.5}, {"residual_device": "cpu"}, {"order": 0}, {"order": 2},
                                    {"gate": "sea"}, {"gate": "sea_same_sigma"}, {"sound_weight": 0}])
def test_valid_edges(kwargs):
    SeaCacheConfig(**kwargs)
