"""The speedup input of SeaCache Apply in a real ComfyUI (needs COMFYUI_PATH): optional, off by default, and a run
with a target reaches it."""

from seacache_testing.comfy_runs import APPLY_DEFAULTS

STEPS = 12


def test_speedup_input_is_optional_and_off_by_default(tiny):
    schema = tiny.ns.node("SeaCacheApply").GET_SCHEMA()
    speedup = {i.id: i for i in schema.inputs}["speedup"]
    assert speedup.optional and speedup.default == 0.0 and speedup.min == 0.0
    assert "below 1 = off" in speedup.tooltip
    assert "speedup" in tiny.ns.node("SeaCacheApply").INPUT_TYPES()["optional"]
    without = tiny.seacache()  # a saved workflow without the input keeps the threshold rule
    settings = without.model_options["transformer_options"]["seacache_settings"]
    assert settings.config.speedup == 0.0 and settings.config.threshold == APPLY_DEFAULTS["threshold"]


def test_speedup_two_reaches_its_target(tiny):
    patched = tiny.seacache(speedup=2.0, threshold=0.0)  # threshold 0 alone would never reuse
    tiny.sample(patched, steps=STEPS)
    report = patched.model_options["transformer_options"]["seacache_settings"].last_run
    assert report["status"] == "completed" and report["calls"] == STEPS
    assert abs(report["speedup"] / 2.0 - 1) <= 0.1 and report["speedup_target"] == 2.0
    summary = tiny.stats(patched, tiny.empty()).outputs[1]
    assert "(speedup target 2x)" in summary and "speedup target 2.00x, reached" in summary


def test_unreachable_speedup_is_reported(tiny, caplog):
    patched = tiny.seacache(speedup=4.0)  # max_consecutive 2 leaves at most 12 / 5 = 2.4x
    tiny.sample(patched, steps=STEPS)
    report = patched.model_options["transformer_options"]["seacache_settings"].last_run
    assert report["speedup"] == STEPS / 5 and "out of reach" in report["summary"]
    assert any("out of reach" in r.getMessage() for r in caplog.records)
