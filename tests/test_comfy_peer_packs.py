"""The third-party cache packs of seacache_testing/peer_packs.py on a tiny random Wan 2.1 T2V (needs COMFYUI_PATH and
the packs in $PEER_CACHES_PATH or ComfyUI's custom_nodes; each pack that is not there skips): each supported
pack, applied through its node, computes fewer full stack calls at a high knob than uncached, its grid reaches past
13 and 22 of 35, a second run repeats the first, and it returns a clone (the input MODEL still samples as before)."""

import pytest
import torch

from seacache_testing import peer_packs, tiny_comfy_models
from seacache_testing.anymodel_runs import counting_blocks, sample, stack_blocks

pytestmark = pytest.mark.filterwarnings("ignore:__array_wrap__:DeprecationWarning")  # MagCache's numpy use, per step

STEPS = 35
SPEC = tiny_comfy_models.SPECS["wan21_t2v"]


def installed_or_skip(peers, peer):
    comfy, loaded = peers
    if peer not in peer_packs.installed(comfy):
        pytest.skip(f"node {peer.node_id!r} of {peer.source} is not registered (pack folders loaded: {loaded}); "
                    f"put the pack in ${peer_packs.PEER_CACHES_ENV} or ComfyUI's custom_nodes")


def full_calls(comfy, model, patched) -> tuple[float, torch.Tensor]:
    """Full stack runs of one sampling of ``patched`` (block calls / blocks) and its result."""
    diffusion_model = model.model.diffusion_model
    with counting_blocks(diffusion_model) as blocks:
        out = sample(comfy, patched, SPEC, steps=STEPS)
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
