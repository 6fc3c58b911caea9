"""The third-party cache packs of seacache_testing/peer_packs.py and cachedit_packs.py on a tiny random Wan 2.1 T2V
(needs COMFYUI_PATH and the packs in $PEER_CACHES_PATH or ComfyUI's custom_nodes; each pack that is not there
skips): each supported pack, applied through its node, computes fewer full stack calls at a high knob than uncached,
its grid reaches past 13 and 22 of 35 (Cache-DiT's Wan node: exactly its schedule's calls), a second run repeats the
first, and it returns a clone (the input MODEL still samples as before)."""

import pytest
import torch

from seacache_testing import cachedit_packs, peer_packs, tiny_comfy_models
from seacache_testing.anymodel_runs import counting_blocks, sample, stack_blocks

pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")  # MagCache's numpy use, per step

STEPS = 35
SPEC = tiny_comfy_models.SPECS["wan21_t2v"]


def installed_or_skip(peers, peer, installed=peer_packs.installed):
    comfy, loaded = peers
    if peer not in installed(comfy):
        pytest.skip(f"node {peer.node_id!r} of {peer.source} is not registered (pack folders loaded: {loaded}); "
                    f"put the pack in ${peer_packs.PEER_CACHES_ENV} or ComfyUI's custom_nodes")


def full_calls(comfy, model, patched, spec=SPEC, steps=STEPS) -> tuple[float, torch.Tensor]:
    """Full stack runs of one sampling of ``patched`` (block calls / blocks) and its result."""
    diffusion_model = model.model.diffusion_model
    with counting_blocks(diffusion_model) as blocks:
        out = sample(comfy, patched, spec, steps=steps)
    return blocks["calls"] / len(stack_blocks(diffusion_model)), out


WAN_PEERS = [peer for peer in peer_packs.PEER_CACHES if "WAN21_T2V" in peer.supported_configs]


@pytest.mark.parametrize("peer", WAN_PEERS, ids=[peer.name for peer in WAN_PEERS])
def test_supported_peer_trades_full_calls_and_returns_a_clone(peers, peer_wan, peer):
    installed_or_skip(peers, peer)
    comfy, _ = peers
    model, plain = peer_wan
    assert peer_packs.supports(peer, model)

    uncached_calls, uncached = full_calls(comfy, model, peer_packs.apply(comfy, peer, model, peer.grid[0]))
    assert uncached_calls == STEPS and torch.equal(uncached, plain)

    calls = {}
    for knob in peer.grid[1:]:
        patched = peer_packs.apply(comfy, peer, model, knob)
        assert patched is not model
        calls[knob], out = full_calls(comfy, model, patched)
        assert torch.isfinite(out).all()
    print(f"{peer.name} on tiny Wan 2.1 T2V, full calls of {STEPS} per {peer.knob}: {calls}")
    high = peer.grid[-1]
    assert calls[high] < uncached_calls and not torch.equal(out, plain)
    again_calls, again = full_calls(comfy, model, patched)  # a second run starts from fresh cache state
    assert again_calls == calls[high] and torch.equal(again, out)
    assert max(calls.values()) >= 22 and min(calls.values()) <= 13, calls
    assert torch.equal(sample(comfy, model, SPEC, steps=STEPS), plain)  # the input MODEL runs unchanged


def test_first_block_cache_refuses_wan(peers, peer_wan):
    fbcache = next(peer for peer in peer_packs.PEER_CACHES if peer.node_id == "ApplyFBCacheOnModel")
    installed_or_skip(peers, fbcache)
    comfy, _ = peers
    model, _ = peer_wan
    assert not peer_packs.supports(fbcache, model)
    with pytest.raises(ValueError, match="does not support WAN21_T2V"):
        peer_packs.apply(comfy, fbcache, model, 0.1)
    with pytest.raises(ValueError, match="No double blocks found for WanModel"):  # the pack's own check
        comfy.run_node(fbcache.node_id, model=model, **fbcache.inputs(0.1))


CACHEDIT_WAN = cachedit_packs.CACHEDIT_PEERS[0]


def relative_error(out, plain) -> float:
    return float((out - plain).norm() / plain.norm())


def test_cachedit_wan_computes_its_schedule_and_apply_keeps_the_input_model_plain(peers, peer_wan):
    installed_or_skip(peers, CACHEDIT_WAN, cachedit_packs.installed)
    comfy, _ = peers
    model, plain = peer_wan
    calls, errors = {}, {}
    for interval in (2, 3, 7):
        patched = cachedit_packs.apply(comfy, CACHEDIT_WAN, model, interval)
        assert patched is not model
        calls[interval], out = full_calls(comfy, model, patched)
        errors[interval] = relative_error(out, plain)
        assert torch.equal(sample(comfy, model, SPEC, steps=STEPS), plain)  # the input MODEL runs unchanged
    print(f"CacheDiT Wan on tiny Wan 2.1 T2V, full calls of {STEPS} and error per skip_interval: {calls} {errors}")
    assert calls == {2: 19, 3: 14, 7: 8}  # 4 warm-up calls, then every interval-th
    assert calls == {i: CACHEDIT_WAN.computed_calls(STEPS, i) for i in calls}
    assert all(0.01 < error < 0.3 for error in errors.values()), errors  # whole-output reuse: a bounded change
    again_calls, again = full_calls(comfy, model, patched)  # a second run starts from fresh cache state
    assert again_calls == 8 and relative_error(again, plain) == errors[7]
    same = cachedit_packs.apply(comfy, CACHEDIT_WAN, model, 7)  # the node would return its input MODEL here
    assert same is not model and full_calls(comfy, model, same)[0] == 8


def test_cachedit_wan_node_as_published_leaves_its_cache_on_the_input_model(peers, peer_wan):
    """Why cachedit_packs.apply removes the node's forward patch: applied as published, the input MODEL keeps the
    schedule after the node's MODEL sampled, continuing its call count (calls 36 to 70 of the node's count)."""
    installed_or_skip(peers, CACHEDIT_WAN, cachedit_packs.installed)
    comfy, _ = peers
    model, plain = peer_wan
    patched = peer_packs.apply(comfy, CACHEDIT_WAN, model, 2)
    diffusion_model = model.model.diffusion_model
    try:
        assert full_calls(comfy, model, patched)[0] == 19
        leaked_calls, leaked = full_calls(comfy, model, model)
        assert leaked_calls == 18 and not torch.equal(leaked, plain)  # calls 36..70: computes when even
    finally:
        assert cachedit_packs.remove_forward_patch(diffusion_model)
        delattr(diffusion_model, cachedit_packs.SHARED_CONFIG)
    assert torch.equal(sample(comfy, model, SPEC, steps=STEPS), plain)


def test_cachedit_general_node_falls_back_to_whole_output_reuse_on_wan(peers, peer_wan, caplog):
    """The pack's general node ("CacheDiT_Model_Optimizer", preset "Custom" for WanModel) tries cache-dit's own
    BlockAdapter, which fails on ComfyUI's WanModel; it then runs the same kind of forward patch at its presets (3
    warm-up calls, every 3rd call after them reused): 25 of 35."""
    installed_or_skip(peers, CACHEDIT_WAN, cachedit_packs.installed)
    comfy, _ = peers
    model, plain = peer_wan
    inputs = dict(model_type="Auto", warmup_steps=0, skip_interval=0, print_summary=False)
    patched = comfy.run_node("CacheDiT_Model_Optimizer", model=model, enable=True, **inputs).outputs[0]
    try:
        calls, out = full_calls(comfy, model, patched)
    finally:
        comfy.run_node("CacheDiT_Model_Optimizer", model=model, enable=False, **inputs)  # its own clean-up
    assert "BlockAdapter has no transformer reference" in caplog.text
    assert calls == 25 and 0 < relative_error(out, plain) < 0.3
    assert torch.equal(sample(comfy, model, SPEC, steps=STEPS), plain)
