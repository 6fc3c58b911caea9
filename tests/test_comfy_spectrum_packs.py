"""The Spectrum ComfyUI packs of seacache_testing/spectrum_packs.py, run through ComfyUI on tiny random core models.

Needs COMFYUI_PATH and the packs (xmarre/ComfyUI-Spectrum-WAN-Proper, judian17/ComfyUI-Spectrum) in
$PEER_CACHES_PATH or ComfyUI's custom_nodes; a test whose pack is not registered skips, naming the node and the
folder to put it in. On a tiny Wan 2.1 T2V each pack, applied as the peer benchmark applies it, skips stack calls
along its flex_window grid (reaching 2x to 4x of 35 calls), gives a finite result that differs from uncached,
repeats itself, computes every step exactly as uncached at window 1 and alpha 0, and leaves the input MODEL as it
was; judian17's pack also skips on tiny Qwen-Image, and on Flux and HunyuanVideo where ComfyUI passes
``img_slice`` (0.33.0; on 0.3.64 its first forecast raises); neither touches this pack's Cosmos3, where the peer
benchmark's own Spectrum at the generator-stack seam runs instead (its ComfyUI test is here too; it needs no pack)."""

import pytest
import torch

from seacache_testing import peer_packs, spectrum_packs, spectrum_stack
from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import sample
from tests.test_comfy_peer_packs import full_calls, installed_or_skip

STEPS = 35
SPEC = tiny_comfy_models.SPECS["wan21_t2v"]


PEERS = spectrum_packs.SPECTRUM_PEERS


@pytest.mark.parametrize("peer", PEERS, ids=[peer.name for peer in PEERS])
def test_spectrum_skips_along_its_grid_and_leaves_the_input_model(peers, peer_wan, peer):
    installed_or_skip(peers, peer, spectrum_packs.installed)
    comfy, _ = peers
    model, plain = peer_wan
    assert peer_packs.supports(peer, model)

    never_calls, never = full_calls(comfy, model, spectrum_packs.apply(comfy, peer.never_skipping(), model, 0.0))
    assert never_calls == STEPS and torch.equal(never, plain)

    calls = {}
    for knob in peer.grid:
        patched = spectrum_packs.apply(comfy, peer, model, knob)
        assert patched is not model
        calls[knob], out = full_calls(comfy, model, patched)
        assert torch.isfinite(out).all() and not torch.equal(out, plain)
        assert torch.equal(sample(comfy, model, SPEC, steps=STEPS), plain)  # the input MODEL runs unchanged
    print(f"{peer.name} on tiny Wan 2.1 T2V, full calls of {STEPS} per {peer.knob}: {calls}")
    counts = list(calls.values())
    assert counts == sorted(counts, reverse=True), calls  # a larger alpha never computes more
    assert max(counts) >= 19 and min(counts) <= STEPS / 4, calls  # from under 2x to past 4x
    again_calls, again = full_calls(comfy, model, patched)  # a second run starts from a fresh forecaster
    assert again_calls == calls[peer.grid[-1]] and torch.equal(again, out)


def test_spectrum_wan_node_alone_runs_every_clone_of_the_model(peers, peer_wan):
    """Why spectrum_packs.apply clears the node's runtime from the shared BaseModel: without that, the input
    MODEL samples with Spectrum after the node ran."""
    peer = next(p for p in PEERS if p.node_id == "SpectrumApplyWAN")
    installed_or_skip(peers, peer, spectrum_packs.installed)
    comfy, _ = peers
    model, plain = peer_wan
    patched = comfy.run_node(peer.node_id, model=model, **peer.inputs(0.75)).outputs[0]
    try:
        leaked_calls, leaked = full_calls(comfy, model, model)
        patched_calls, out = full_calls(comfy, model, patched)
        assert leaked_calls == patched_calls < STEPS and torch.equal(leaked, out)
    finally:
        setattr(model.model, peer.shared_model_attribute, None)
    assert torch.equal(sample(comfy, model, SPEC, steps=STEPS), plain)


def sets_img_slice(model) -> bool:
    """Whether this ComfyUI's model tells its blocks where the image tokens sit (``transformer_options["img_slice"]``,
    set by Flux and HunyuanVideo in 0.33.0, not in 0.3.64), which judian17's Flux-like path needs."""
    import inspect

    return "img_slice" in inspect.getsource(type(model.model.diffusion_model))


@pytest.mark.parametrize("name", ["flux", "qwen_image", "hunyuan_video"])
def test_judian17_spectrum_skips_on_other_core_models(peers, name):
    peer = next(p for p in PEERS if p.node_id == "Spectrum")
    installed_or_skip(peers, peer, spectrum_packs.installed)
    comfy, _ = peers
    spec = tiny_comfy_models.SPECS[name]
    model = tiny_comfy_models.build(name)
    assert peer_packs.supports(peer, model)
    plain = sample(comfy, model, spec, steps=12)
    patched = spectrum_packs.apply(comfy, peer, model, 0.75)
    if name != "qwen_image" and not sets_img_slice(model):
        # its last single block's output then holds the text tokens too: the first forecast does not fit
        with pytest.raises(RuntimeError, match="must match the existing size"):
            full_calls(comfy, model, patched, spec, steps=12)
        return
    calls, out = full_calls(comfy, model, patched, spec, steps=12)
    assert calls < 12 and torch.isfinite(out).all() and not torch.equal(out, plain)


@pytest.fixture(scope="module")
def cosmos3(peers, tmp_path_factory):
    """A tiny Cosmos3 of this module's own (xmarre's node wraps the BaseModel it is applied to for the session)."""
    pytest.importorskip("diffusers")
    from seacache_testing.comfy_runs import load_tiny

    return load_tiny(peers[0], tmp_path_factory)


def test_spectrum_packs_leave_this_packs_cosmos3_uncached(peers, cosmos3):
    """Neither pack supports Cosmos3: the benchmark does not apply them there, and applied anyway they sample it
    unchanged (judian17's node prints "Unsupported model"; xmarre's finds no Wan forward to replace)."""
    comfy, _ = peers
    found = spectrum_packs.installed(comfy)
    if not found:
        pytest.skip(f"no Spectrum node registered; put the packs in ${peer_packs.PEER_CACHES_ENV}")
    plain = cosmos3.sample(cosmos3.model, steps=4)
    for peer in found:
        assert not peer_packs.supports(peer, cosmos3.model)
        with pytest.raises(ValueError, match="does not support"):
            spectrum_packs.apply(comfy, peer, cosmos3.model, 0.75)
        patched = comfy.run_node(peer.node_id, model=cosmos3.model, **peer.inputs(0.75)).outputs[0]
        assert torch.equal(cosmos3.sample(patched, steps=4), plain), peer.name


def test_spectrum_stack_method_runs_spectrum_on_this_packs_cosmos3(peers, cosmos3):
    """Where no pack reaches, bench_peers runs Spectrum at the generator-stack seam (seacache_testing/spectrum_stack.py):
    through ComfyUI it computes exactly the calls of Spectrum's schedule, forecasts the rest, starts afresh each run,
    leaves the input MODEL uncached, and with a warm-up covering every step samples exactly as uncached."""
    from seacache_testing.comfy_runs import LayerCalls
    from seacache_testing.comfyui_harness import import_pack_module

    steps, alpha = 12, 1.0
    comfy, model = peers[0], cosmos3.model
    plain = cosmos3.sample(model, steps=steps, sampler="euler")
    layers = LayerCalls(model.model.diffusion_model)
    try:
        patched = spectrum_stack.spectrum_stack(1.0)(comfy, model, alpha)
        out = cosmos3.sample(patched, steps=steps, sampler="euler")
        calls = layers.gen // len(layers.layers)
        again = cosmos3.sample(patched, steps=steps, sampler="euler")
    finally:
        layers.close()
    assert calls == spectrum_stack.computed_calls(steps, alpha) == 7  # 0-4, 6, 9
    assert torch.isfinite(out).all() and not torch.equal(out, plain) and torch.equal(again, out)
    assert torch.equal(cosmos3.sample(model, steps=steps, sampler="euler"), plain)
    hook = import_pack_module("nodes.cosmos3.transformer").GEN_STACK_WRAPPER
    never = model.clone()
    never.add_wrapper_with_key(hook, spectrum_stack.WRAPPER_KEY, spectrum_stack.SpectrumStack(1.0, alpha, warmup=steps))
    assert torch.equal(cosmos3.sample(never, steps=steps, sampler="euler"), plain)
