"""The first-block indicator (seacache_core.vision_tokens) against an independent float64 reference of diffusers'
``first_block`` indicator and gate (seacache_testing.first_block_reference), on this pack's tiny Cosmos3.

The tensor is captured by a forward hook the test places on the first generator layer's input norm
(``layers[0].input_layernorm_moe_gen``): the model knows nothing of the cache. Over an uncached Euler trajectory
the pack's indicators, distances and the run's reuse/compute decisions (``published_config``: the ``first_block``
gate, each call pending until it enters with the view) equal the reference's; with diffusers installed, the captured tensor also equals what diffusers'
Cosmos3 feeds its first layer's attention, and the filter diffusers ships agrees with the pack's.
"""

from __future__ import annotations

import pytest
import torch

from cosmos3 import Cosmos3Config
from cosmos3.schedule import reference_sigmas
from seacache_core import SeaCacheConfig, SeaCacheRun, item_distances
from seacache_core.vision_tokens import VisionTokens, first_block_view, noisy_frames_view
from seacache_testing.first_block_recipe import PUBLISHED_THRESHOLD, first_block_indicator, published_config
from seacache_testing.cosmos3_random_weights import random_model
from seacache_testing.first_block_reference import (
    ReferenceGate, reference_distance, reference_indicator, vision_indexes,
)
from seacache_testing.make_tiny_checkpoint import TINY_SIZES

TOLERANCE = 1e-5  # float32 pack vs float64 reference, relative to the largest magnitude
STEPS, SHIFT = 10, 3.0
LATENT = (48, 4, 6, 8)  # C, T, H, W: a (4, 3, 4) token grid
GRID = (4, 3, 4)
KEYS = ("cond", "uncond")
CASES = {"t2v": None, "i2v": (1, 2, 3)}  # noisy frames (None: all)


class FirstBlockInputs:
    """Forward hook on the first generator layer's input norm: keeps its output (the first block's modulated
    input, [B, N, D]) of every model call."""

    def __init__(self, layer: torch.nn.Module):
        self.calls: list[torch.Tensor] = []
        self.handle = layer.input_layernorm_moe_gen.register_forward_hook(self._keep)

    def _keep(self, module, args, output):
        self.calls.append(output.detach().clone())


def rel_err(got: torch.Tensor, expected: torch.Tensor) -> float:
    return float((got.double() - expected).abs().max() / expected.abs().max())


def prompts() -> torch.Tensor:
    """cond and uncond prompts of different lengths (-1 pads the shorter)."""
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(0, TINY_SIZES["vocab_size"], (2, 9), generator=g)
    ids[1, 5:] = -1
    return ids


@pytest.fixture(scope="module", params=sorted(CASES))
def run(request):
    """An uncached Euler run of the tiny model (cond and uncond batched, image-to-video with frame 0 given):
    (case, the schedule's sigmas, the first block's input at every step)."""
    noisy = CASES[request.param]
    model = random_model(Cosmos3Config(**TINY_SIZES), torch.float32, "cpu", seed=3)
    hook = FirstBlockInputs(model.layers[0])
    g = torch.Generator().manual_seed(11)
    latent = torch.randn(1, *LATENT, generator=g).expand(2, *LATENT).clone()
    cond = {}
    if noisy is not None:
        mask = torch.ones(1, GRID[0])
        mask[:, list(noisy)] = 0.0
        cond = dict(cond_latent=torch.randn(1, *LATENT, generator=g), cond_mask=mask)
    sigmas = reference_sigmas(STEPS, SHIFT).double()
    ids = prompts()
    with torch.no_grad():
        for step in range(STEPS):
            velocity = model(latent, sigmas[step].float().expand(2), ids, fps=24.0, **cond)
            latent = latent + (sigmas[step + 1] - sigmas[step]).float() * velocity
    hook.handle.remove()
    assert len(hook.calls) == STEPS
    assert hook.calls[0].shape == (2, GRID[0] * GRID[1] * GRID[2], TINY_SIZES["hidden_size"])
    return request.param, sigmas.tolist(), hook.calls


def tokens_of(case: str) -> VisionTokens:
    return VisionTokens(GRID, noisy_frames=CASES[case])


def reference_indicators(case: str, sigmas, calls) -> list[list[torch.Tensor]]:
    """Per step, per item, the reference indicator (T', H, W, D) in float64."""
    noisy = CASES[case]
    indexes = vision_indexes(GRID, noisy)
    shape = (GRID[0] if noisy is None else len(noisy), GRID[1], GRID[2])
    return [[reference_indicator(x[i], indexes, shape, sigma) for i in range(len(KEYS))]
            for sigma, x in zip(sigmas, calls)]


def test_indicator_matches_reference(run):
    case, sigmas, calls = run
    expected = reference_indicators(case, sigmas, calls)
    for step, (sigma, x) in enumerate(zip(sigmas, calls)):
        got = first_block_indicator(x, tokens_of(case), sigma)
        frames = expected[step][0].shape[0]
        assert got.dtype == torch.float32 and got.shape == (2, TINY_SIZES["hidden_size"], frames, *GRID[1:])
        for item in range(len(KEYS)):
            got_item = got[item].permute(1, 2, 3, 0)
            assert rel_err(got_item, expected[step][item]) < TOLERANCE, (case, step, item)
    # at sigma ~1 the filter keeps little of the tokens (a test that leaving them alone cannot pass)
    raw = first_block_view(calls[0], tokens_of(case)).permute(0, 2, 3, 4, 1)
    assert min(rel_err(raw[item], expected[0][item]) for item in range(len(KEYS))) > 0.1


def test_distances_match_reference(run):
    case, sigmas, calls = run
    expected = reference_indicators(case, sigmas, calls)
    previous = None
    measured = []
    for step, (sigma, x) in enumerate(zip(sigmas, calls)):
        current = first_block_indicator(x, tokens_of(case), sigma)
        if previous is not None:
            got = item_distances(current, previous)
            for item in range(len(KEYS)):
                want = reference_distance([expected[step][item]], [expected[step - 1][item]])
                assert abs(got[item].item() - want) <= TOLERANCE * want, (case, step, item)
                measured.append(want)
        previous = current
    assert min(measured) > 0 and max(measured) > 2 * min(measured)  # the distances move along the schedule


def _pack_decisions(case, sigmas, calls, threshold) -> dict[str, list[tuple[bool, float | None]]]:
    """Per branch, per step: (computes, distance) of the pack's run on the first-block view, one call per branch
    (diffusers gates each cache context on its own), each pending until it enters the stack with the view."""
    run = SeaCacheRun(published_config(threshold=threshold), sigmas)
    decisions = {key: [] for key in KEYS}
    for sigma, x in zip(sigmas[:STEPS], calls):
        view = first_block_view(x, tokens_of(case))
        for item, key in enumerate(KEYS):
            call = run.pending(sigma, [key])
            stack_in = torch.zeros(1, 1)
            reused = call.enter(stack_in, lambda: view[item : item + 1]) is not None
            if not reused:
                call.leave(stack_in + 1)
            assert call.verdict.committed and call.failure is None
            decisions[key].append((not reused, call.verdict.distance))
    return decisions


def _reference_decisions(case, sigmas, calls, threshold) -> dict[str, list[tuple[bool, float | None]]]:
    expected = reference_indicators(case, sigmas, calls)
    decisions = {}
    for item, key in enumerate(KEYS):
        gate = ReferenceGate(threshold)
        computes = [gate.computes(step, STEPS, [expected[step][item]]) for step in range(STEPS)]
        decisions[key] = list(zip(computes, gate.distances))
    return decisions


def test_decisions_match_reference(run):
    """At the published threshold and at two thresholds taken from the run's own distances, every branch reuses
    and computes at the same steps as the reference, and the gate measures the reference's distances."""
    case, sigmas, calls = run
    middle = sorted(d for key in KEYS for _, d in _reference_decisions(case, sigmas, calls, 0.0)[key] if d is not None)
    middle = middle[len(middle) // 2]
    mixed = 0
    for threshold in (PUBLISHED_THRESHOLD, 1.37 * middle, 2.91 * middle):
        got = _pack_decisions(case, sigmas, calls, threshold)
        want = _reference_decisions(case, sigmas, calls, threshold)
        for key in KEYS:
            assert [c for c, _ in got[key]] == [c for c, _ in want[key]], (case, threshold, key)
            for (_, d_got), (_, d_want) in zip(got[key], want[key]):
                if d_want is not None:  # the reference measures nothing on forced steps; the pack's gate may
                    assert abs(d_got - d_want) <= TOLERANCE * d_want
            flags = [c for c, _ in want[key]]
            mixed += any(flags[1:-1]) and not all(flags[1:-1])
            assert flags[0] and flags[-1]  # first and last step always compute
    assert mixed  # some run both reuses and computes between the forced ends


@pytest.mark.parametrize("noisy", [None, (1, 2, 3)], ids=["t2v", "i2v"])
def test_captured_tensor_is_diffusers_first_block_input(noisy):
    """What the hook captures on the pack's model equals what diffusers' Cosmos3 feeds its first layer's attention
    from the generator stream (same weights, fp32), and the indicators built from each agree; diffusers' own
    filter (``hooks.sea_cache._apply_sea_filter``, where the installed version has it) agrees with the pack's."""
    pytest.importorskip("diffusers")
    from seacache_testing.cosmos3_reference import native_from, reference_model, reference_velocity, sigma_and_t, tokens

    ref = reference_model(seed=0)
    ours = native_from(ref)
    theirs, mine = FirstBlockInputs(ref.layers[0]), FirstBlockInputs(ours.layers[0])
    g = torch.Generator().manual_seed(5)
    latent, clean = torch.randn(1, *LATENT, generator=g), torch.randn(1, *LATENT, generator=g)
    ids = tokens(11, 2)
    sigma, t = sigma_and_t(0.62)
    clean_frames = () if noisy is None else tuple(f for f in range(GRID[0]) if f not in noisy)
    ref_input = latent.clone()
    ref_input[:, :, list(clean_frames)] = clean[:, :, list(clean_frames)]
    reference_velocity(ref, ref_input, t, ids, clean_frames=clean_frames)
    cond = {}
    if clean_frames:
        mask = torch.zeros(1, GRID[0])
        mask[:, list(clean_frames)] = 1.0
        cond = dict(cond_latent=clean, cond_mask=mask)
    with torch.no_grad():
        ours(latent, sigma, torch.tensor([ids]), fps=24.0, **cond)
    stream = theirs.calls[0]  # diffusers' generator stream [N_gen, D]: the joint sequence after its text prefix
    assert rel_err(mine.calls[0][0], stream.double()) < 2e-5

    shape = (GRID[0] if noisy is None else len(noisy), *GRID[1:])
    expected = reference_indicator(stream, vision_indexes(GRID, noisy), shape, sigma.item())
    got = first_block_indicator(mine.calls[0], VisionTokens(GRID, noisy_frames=noisy), sigma.item())
    assert rel_err(got[0].permute(1, 2, 3, 0), expected) < 2e-5

    sea_cache = pytest.importorskip("diffusers.hooks.sea_cache")
    if not hasattr(sea_cache, "_apply_sea_filter"):
        pytest.skip("this diffusers has no SEA filter to compare with")
    tokens_thw = stream.index_select(0, vision_indexes(GRID, noisy)).reshape(*shape, -1)
    shipped = sea_cache._apply_sea_filter(tokens_thw, sigma=sigma.item(), power_exp=3.0)
    assert rel_err(got[0].permute(1, 2, 3, 0), shipped.double()) < 2e-5


def test_view_picks_the_vision_tokens_of_the_frames_read():
    """Tokens 1..12 of a 14-token sequence are a (3, 2, 2) grid; frames 0 and 2 are read, channels first."""
    modulated = torch.arange(2 * 14 * 5, dtype=torch.float32).reshape(2, 14, 5)
    view = first_block_view(modulated, VisionTokens((3, 2, 2), start=1, noisy_frames=(0, 2)))
    assert view.shape == (2, 5, 2, 2, 2)
    for item in range(2):
        for i, frame in enumerate((0, 2)):
            rows = modulated[item, 1 + frame * 4 : 1 + (frame + 1) * 4]  # the frame's 4 tokens, row by row
            assert torch.equal(view[item, :, i].reshape(5, 4), rows.T)


def test_the_noisy_frames_view_leaves_out_a_frame_conditioned_in_any_item():
    """Frame 0 given in item 0 only, frame 2 in none: both items read frames 1 and 2 (one grid for the batch)."""
    modulated = torch.randn(2, 3 * 2 * 2 + 4, 5)  # a (3, 2, 2) video grid, 4 sound tokens after it
    clean = torch.tensor([[True, False, False], [False, False, False]])
    view = noisy_frames_view(modulated, (3, 2, 2), clean)
    assert torch.equal(view, first_block_view(modulated, VisionTokens((3, 2, 2), noisy_frames=(1, 2))))
    with pytest.raises(ValueError, match="every frame is conditioned"):
        noisy_frames_view(modulated, (3, 2, 2), torch.ones(2, 3, dtype=torch.bool))


def test_bad_layouts_are_refused_before_any_filtering():
    with pytest.raises(ValueError, match="grid must be three positive integers"):
        VisionTokens((0, 2, 2))
    with pytest.raises(ValueError, match="noisy_frames must be distinct ascending frame indices in 0..2"):
        VisionTokens((3, 2, 2), noisy_frames=(1, 3))
    with pytest.raises(ValueError, match="noisy_frames"):
        VisionTokens((3, 2, 2), noisy_frames=(2, 1))
    with pytest.raises(ValueError, match=r"vision tokens 2..13 \(grid \(3, 2, 2\)\) do not fit a sequence of 12"):
        first_block_view(torch.zeros(1, 12, 4), VisionTokens((3, 2, 2), start=2))
    with pytest.raises(ValueError, match=r"tokens \[B, N, D\]"):
        first_block_view(torch.zeros(1, 4, 12, 4), VisionTokens((3, 2, 2)))


def _view(seed: int, dtype=torch.float32, frames: int = 3) -> torch.Tensor:
    """A first-block view [1, D, T, H, W] (16 channels on a (frames, 4, 6) grid)."""
    return torch.randn(1, 16, frames, 4, 6, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_a_pending_call_is_decided_when_it_enters_with_the_view():
    """Nothing is read or changed before the seam enters; a seam that hands over no view computes (the call
    records the failure, the stack runs) and leaves the run untouched."""
    run = SeaCacheRun(published_config(), [0.9, 0.6, 0.3, 0.0])
    call = run.pending(0.9, ["c"])
    assert call.verdict is None and not run.states and not run.stats.records
    assert call.enter(torch.zeros(1, 2)) is None
    assert isinstance(call.failure, ValueError) and "first block" in str(call.failure)
    assert call.verdict is None and not run.states and not run.stats.records

    call = run.pending(0.9, ["c"])
    assert call.enter(torch.zeros(1, 2), lambda: _view(0)) is None  # step 0: warm-up
    assert (call.verdict.step, call.verdict.reason, call.verdict.reuse) == (0, "warmup", False)
    call.leave(torch.ones(1, 2))
    assert call.verdict.committed and run.stats.records[-1].reason == "warmup" and "c" in run.states


@pytest.mark.parametrize("gate", ["first_block", "first_block_same_sigma"])
def test_first_block_gates_keep_the_view_in_its_dtype(gate):
    """A bf16 view is kept in bf16 (as diffusers keeps it: half the bytes); the latent gates keep float32."""
    for dtype in (torch.bfloat16, torch.float32):
        run = SeaCacheRun(published_config(gate=gate), [0.9, 0.6, 0.0])
        call = run.pending(0.9, ["c"])
        call.enter(torch.zeros(1, 2), lambda: _view(0, dtype))
        call.leave(torch.ones(1, 2))
        assert run.states["c"].indicator.dtype == dtype
    latent_gate = SeaCacheRun(SeaCacheConfig(gate="sea"), [0.9, 0.6, 0.0])
    latent_gate.commit(latent_gate.decide(_view(0, torch.bfloat16), 0.9, ["c"]), torch.ones(1, 2))
    assert latent_gate.states["c"].indicator.dtype == torch.float32


def test_first_block_gates_filter_images_with_exponent_3_by_default():
    """On a one-frame view the exponent "auto" (None) is the published 3, not the latent gates' 2 for images."""

    def distance(gate, power):
        run = SeaCacheRun(SeaCacheConfig(gate=gate, power=power, threshold=1.0), [0.9, 0.6, 0.0])
        first = run.pending(0.9, ["c"])
        first.enter(torch.zeros(1, 2), lambda: _view(0, frames=1))
        first.leave(torch.ones(1, 2))
        second = run.pending(0.6, ["c"])
        second.enter(torch.zeros(1, 2), lambda: _view(1, frames=1))
        return second.verdict.distance

    assert distance("first_block", None) == distance("first_block", 3.0) != distance("first_block", 2.0)
