"""Host reads SeaCache adds to a Cosmos3 run through ComfyUI's sampler (needs COMFYUI_PATH), counted on the CPU
with :class:`host_transfers.HostReads` over the whole sampling run: ComfyUI's own reads are the same with and without
SeaCache, so the difference is SeaCache's: one read per gated call, the gate's (the call's sigma, which the runtime
keeps on the device to map and filter, and the distances of its branches, in one transfer; the first call reads its
sigma alone), plus one at run start: whether latent and noise are finite (ComfyUI moves them to the device only
after that point, so on a GPU this read waits for nothing unless the latent was made on the device, --gpu-only). A read made inside ComfyUI is attributed to the pack's innermost frame above it (an outer-sample
wrapper), so the comparison is of totals.
Measured, 12 steps (model 12, gate 12, run start 1): ComfyUI 0.3.64 15 reads uncached, 28 with SeaCache; 0.33.0 18 and 31
(before the sigma joined the gate's read: 38 and 41).
"""

from __future__ import annotations

from collections import Counter

from seacache_testing.host_transfers import HostReads

STEPS = 12


def reads_by_file(tiny, model):
    with HostReads() as reads:
        tiny.sample(model, steps=STEPS, sampler="euler")
    return Counter(site.rsplit(":", 1)[0] for _, site in reads.reads)


def test_seacache_adds_one_host_read_per_call_and_one_per_run_through_comfyui(tiny):
    plain = reads_by_file(tiny, tiny.model)
    model = tiny.seacache()
    cached = reads_by_file(tiny, model)
    calls = model.model_options["transformer_options"]["seacache_settings"].last_run["calls"]
    assert calls == STEPS
    assert plain["cosmos3/model.py"] == cached["cosmos3/model.py"] == STEPS  # the call's sigma and prompt tokens
    assert cached["seacache_core/sea_filter.py"] == calls  # the call's sigma and the distances of its branches, together
    assert cached["nodes/seacache/run_inputs.py"] == 1  # latent and noise finite, once per run
    assert sum(cached.values()) - sum(plain.values()) == calls + 1, (plain, cached)
