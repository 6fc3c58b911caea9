"""ControlNets and block model patches with SeaCache (needs COMFYUI_PATH), on tiny core models with ComfyUI's own
control classes (seacache_testing/control_cases.py). For each case: the control changes the plain output; threshold 0 is
bit-identical to the same graph without SeaCache; the default threshold reuses and its error (relative L2 of the
final latent against the same graph without SeaCache) stays within 1.5x of SeaCache's error on the graph without
the control. Block patches run on every block of a computed call and only after the last block on a reused one
(the others are inside the skipped stack, their effect already in the extrapolated residual).

``pytest -s`` prints one row per case: the numbers of the README composition table."""

import pytest
import torch

from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import last_report, sample, seacache
from seacache_testing.composition_cases import rel_error
from seacache_testing.control_cases import CASES

STEPS = 20


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_control_counts_once_on_reused_steps(comfy, pack, case):
    spec = {**tiny_comfy_models.SPECS, **tiny_comfy_models.CONTROL_SPECS}[case.model]
    model = tiny_comfy_models.build(case.model)
    positive, negative = tiny_comfy_models.conditioning(spec, seed=1), tiny_comfy_models.conditioning(spec, seed=2)
    run = lambda m, pos=positive, neg=negative: sample(comfy, m, spec, steps=STEPS, positive=pos, negative=neg)  # noqa: E731

    plain = run(model)
    alone = seacache(comfy, model)
    error_alone, reused_alone = rel_error(run(alone), plain), last_report(alone)["reused"]

    controlled, pos, neg = case.attach(comfy, model, spec, positive, negative)
    plain_control = run(controlled, pos, neg)
    if case.patch_runs is not None and not case.patch_runs:
        pytest.skip(f"this ComfyUI's {case.model} runs no double_block patches")
    assert rel_error(plain_control, plain) > 0.02  # the control matters
    exact = seacache(comfy, controlled, threshold=0.0)
    assert torch.equal(run(exact, pos, neg), plain_control)

    if case.patch_runs is not None:
        case.patch_runs.clear()
    cached = seacache(comfy, controlled)
    error = rel_error(run(cached, pos, neg), plain_control)
    report = last_report(cached)
    print(f"\n| {case.name} | {case.model} | {report['seam']} | {error_alone:.4f} ({reused_alone}/{report['calls']}) "
          f"| {error:.4f} ({report['reused']}/{report['calls']}) | {error / error_alone:.2f} |")
    assert report["reused"] > 0, report["summary"]
    assert error <= 1.5 * error_alone
    if case.patch_runs is not None:
        last = max(case.patch_runs)
        assert case.patch_runs[last] == report["calls"]  # after the stack's last block: every call
        assert all(case.patch_runs[i] == report["ran"] for i in range(last))  # inside the stack: computed calls only


def test_a_first_block_that_changes_its_input_in_place_leaves_the_residual_exact(comfy, pack):
    """Newer ComfyUI's Flux/HunyuanVideo double blocks add to their input tensor in place; the stack input SeaCache
    records must be the value before the first block, so such a block gives the same result as one that does not."""
    spec = tiny_comfy_models.SPECS["flux"]
    model = tiny_comfy_models.build("flux")
    patched = seacache(comfy, model)
    expected = sample(comfy, patched, spec, steps=STEPS)
    block = model.model.diffusion_model.double_blocks[0]
    forward = block.forward

    def changes_its_input(**kwargs):
        out = forward(**{**kwargs, "img": kwargs["img"].clone()})
        kwargs["img"].mul_(0.5)
        return out

    block.forward = changes_its_input
    try:
        got = sample(comfy, patched, spec, steps=STEPS)
    finally:
        del block.forward
    assert last_report(patched)["reused"] > 0 and torch.equal(got, expected)
