"""The family's reference settings: valid sizes, the reference defaults, and the guidance-interval gate."""

import pytest

from cosmos3.presets import FAMILY, guidance_active, reference_settings


def test_every_recipe_is_a_valid_cosmos3_size():
    for member in FAMILY.values():
        for row in member.settings:
            assert row.width % 16 == 0 and row.height % 16 == 0, (member.name, row)
            assert row.frames == 1 if row.mode == "t2i" else (row.frames - 1) % 4 == 0 and 5 <= row.frames <= 300
            assert row.fps in (10, 16, 24, 30)
            assert (row.shift is None) == (row.steps == 4) == (row.cfg == 1.0)


def test_nano_recipe_is_the_diffusers_pipeline_default():
    import inspect

    pipeline = pytest.importorskip("diffusers.pipelines.cosmos.pipeline_cosmos3_omni")
    defaults = inspect.signature(pipeline.Cosmos3OmniPipeline.__call__).parameters
    row = reference_settings("Cosmos3-Nano", "t2v")
    assert (row.steps, row.cfg, row.fps) == (defaults["num_inference_steps"].default,
                                             defaults["guidance_scale"].default, defaults["fps"].default)
    assert (row.width, row.height, row.frames) == (1280, 720, 189)  # the pipeline's None -> defaults


def test_guidance_interval_gate():
    t2i = reference_settings("Cosmos3-Super-Text2Image")
    assert t2i.guidance_interval == (400.0, 1000.0)
    assert guidance_active(1.0, t2i.guidance_interval) and guidance_active(0.4, t2i.guidance_interval)
    assert not guidance_active(0.399, t2i.guidance_interval) and not guidance_active(0.0, t2i.guidance_interval)
    assert all(guidance_active(s, None) for s in (0.0, 0.5, 1.0))
    # the reference compares its int64 timestep: 1000 * 0.5004 = 500.4 -> 500, inside [0, 500]
    assert guidance_active(0.5004, (0, 500)) and not guidance_active(0.501, (0, 500))


def test_lookup_errors_name_the_choices():
    assert reference_settings("Cosmos3-Edge").mode == "t2v"
    assert reference_settings("Cosmos3-Super-Image2Video").fps == 16
    with pytest.raises(KeyError, match="Cosmos3-Nano"):
        reference_settings("Cosmos3-Mega")
    with pytest.raises(KeyError, match="t2i"):
        reference_settings("Cosmos3-Super-Text2Image", "i2v")
