"""fp8 on the native Cosmos3 in a real ComfyUI (needs COMFYUI_PATH): ComfyUI's fp8 matrix multiplication applies.

The loader builds the model with the operations ComfyUI picks (``comfy.ops.pick_operations``), so ComfyUI's fp8
operations (``comfy.ops.fp8_ops``: weights and activations in e4m3, ``torch._scaled_mm``) come in where ComfyUI grants
them: weight dtype ``fp8_e4m3fn_fast`` (ComfyUI's own loader's name for it) or ComfyUI's ``--fast``, on a device that
computes in fp8. Here the CPU is declared capable (``supports_fp8_compute``); torch runs ``_scaled_mm`` on the CPU.

Measured (3 Euler steps on the tiny checkpoint, relative L2 of the final latent vs the same bf16 checkpoint weights
computed in fp32, both ComfyUI versions): fp8 storage 0.085, fp8 storage + fp8 matmul 0.150. Bounds: 0.12 and 0.2.
"""

from __future__ import annotations

import pytest
import torch

from seacache_testing import fp8_activations


def up_proj(model):
    return model.model.diffusion_model.layers[0].mlp_moe_gen.up_proj


def load(tiny, weight_dtype):
    return tiny.ns.run_node("SeaCacheCosmos3Loader", checkpoint=tiny.name, weight_dtype=weight_dtype).outputs[0]


@pytest.fixture()
def capable(tiny):
    """The CPU declared an fp8-computing device; ComfyUI's ``--fast`` flags restored afterwards."""
    import comfy.cli_args

    with fp8_activations.fp8_compute_device():
        yield comfy.cli_args


def test_fp8_fast_is_refused_by_comfyui_on_a_device_without_fp8_compute(tiny):
    import comfy.ops

    assert not isinstance(up_proj(load(tiny, "fp8_e4m3fn_fast")), comfy.ops.fp8_ops.Linear)


@pytest.mark.parametrize("weight_dtype, fast, expected", [
    ("fp8_e4m3fn_fast", False, True),
    ("fp8_e4m3fn", False, False),
    ("fp8_e4m3fn", True, True),  # ComfyUI's --fast fp8_matrix_mult
])
def test_comfyui_fp8_operations_chosen_on_a_capable_device(tiny, capable, weight_dtype, fast, expected):
    import comfy.ops

    if fast:
        capable.args.fast = {capable.PerformanceFeature.Fp8MatrixMultiplication}
    layer = up_proj(load(tiny, weight_dtype))
    assert layer.weight.dtype == torch.float8_e4m3fn
    assert isinstance(layer, comfy.ops.fp8_ops.Linear) == expected
    assert not layer.training  # ComfyUI's fp8 operations skip their fp8 path in training mode


def test_fp8_matmul_runs_and_stays_close_to_bf16(tiny, capable, monkeypatch):
    import comfy.ops

    results = []
    original = comfy.ops.fp8_linear

    def counted(*args, **kwargs):
        out = original(*args, **kwargs)
        results.append(out is not None)
        return out

    monkeypatch.setattr(comfy.ops, "fp8_linear", counted)
    reference = tiny.sample(load(tiny, "default"), steps=3, sampler="euler")
    stored = tiny.sample(load(tiny, "fp8_e4m3fn"), steps=3, sampler="euler")
    assert not results  # plain fp8 storage casts its weights: ComfyUI's fp8 matmul never ran
    fast = tiny.sample(load(tiny, "fp8_e4m3fn_fast"), steps=3, sampler="euler")
    assert sum(results) > 0  # ComfyUI's fp8 matmul produced the fp8 layers' outputs
    error = lambda out: ((out - reference).norm() / reference.norm()).item()  # noqa: E731
    assert 0 < error(stored) < 0.12
    assert error(stored) < error(fast) < 0.2  # activations in fp8 too: a little further, still close


def test_the_benchmarks_w8a8_helpers_run_comfyuis_own_fp8_code(tiny, capable):
    """What bench_fp8 measures with (seacache_testing/fp8_activations.py): with ComfyUI's fp8 matrix multiplication
    switched off, ``fp8_e4m3fn_fast`` computes exactly as fp8 weight storage does (W8A16); the per-call noise probe
    keeps the W8A8 run's result bit-identical and measures activation noise on every call; a re-rounded run differs
    a little."""
    fast, stored = load(tiny, "fp8_e4m3fn_fast"), load(tiny, "fp8_e4m3fn")
    assert fp8_activations.fp8_layers(fast) and not fp8_activations.fp8_layers(stored)
    run = lambda model: tiny.sample(model, steps=3, sampler="euler")  # noqa: E731
    w8a8 = run(fast)
    with fp8_activations.weight_only():
        assert torch.equal(run(fast), run(stored))
    assert not torch.equal(w8a8, run(stored))
    probe = fp8_activations.CallNoise()
    assert torch.equal(run(probe.attach(fast)), w8a8)
    assert len(probe.noise) == 3 and all(0.0 < n < 0.5 for n in probe.noise)
    assert probe.change[0] is None and all(c > 0 for c in probe.change[1:])
    assert 0.0 < fp8_activations.relative(run(fp8_activations.rerounded(fast)), w8a8) < 0.2
