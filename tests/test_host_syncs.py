"""Device-to-host reads per model call of a cached run on the native Cosmos3, counted on the CPU.

Each host read of a device value waits for the GPU's queue. Through the plain-torch host
(``seacache_testing/seacache_host.py``) a call reads once for its sigma and prompt tokens (``cosmos3/model.py``) and once
for the gate's decision (``seacache_core/sea_filter.py``, the distances of all branches together); the first call has no
distance to read, and the text pathway reads its prompt lengths once per run. CPU residual storage adds no read:
its copies go to host buffers allocated once per run (``non_blocking`` on a GPU).
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from cosmos3 import TEXT_KV_CACHE_KEY, Cosmos3Config, TextKVCache, reference_sigmas
from seacache_testing.allocation_counters import counting_host_buffers
from seacache_testing.cosmos3_random_weights import random_model
from seacache_testing.host_transfers import HostReads
from seacache_testing.seacache_host import BRANCHES, SeaCachedCosmos3
from seacache_core import SeaCacheConfig, SeaCacheRun

CONFIG = Cosmos3Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       intermediate_size=128, vocab_size=256, rope_axes_dim=(4, 2, 2))
STEPS = 20


def cached_run(storage: str, order: int = 1):
    """A 20-step CFG run (cond + uncond batched) with SeaCache; reads per source file, run, final latent."""
    torch.manual_seed(0)
    model = random_model(CONFIG, torch.float32, "cpu", seed=0)
    tokens = torch.full((2, 12), -1)
    tokens[0] = torch.randint(0, CONFIG.vocab_size, (12,))
    tokens[1, :7] = torch.randint(0, CONFIG.vocab_size, (7,))
    x = torch.randn(1, 48, 3, 8, 8)
    sigmas = reference_sigmas(STEPS, 5.0)
    run = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=0.5, order=order, residual_storage=storage), sigmas)
    model.call_gen_stack = SeaCachedCosmos3(model, run)
    options = {TEXT_KV_CACHE_KEY: TextKVCache()}
    reads = HostReads()
    with torch.no_grad():
        for i in range(STEPS):
            with reads:
                v = model(x.expand(2, -1, -1, -1, -1), sigmas[i].expand(2).clone(), tokens, fps=24.0,
                          transformer_options=options)
            x = x + (sigmas[i + 1] - sigmas[i]).item() * (v[1:] + 6.0 * (v[:1] - v[1:]))
    per_file = Counter(site.rsplit(":", 1)[0] for _, site in reads.reads)
    return per_file, run, x


def test_the_counter_sees_device_reads_and_not_host_ones():
    device_value = torch.ones(3)
    with HostReads() as reads:
        device_value.sum().item()
        host = device_value.cpu()
        host.tolist()
        float(host[0])
        bool(device_value[0] > 0)
    assert [op for op, _ in reads.reads] == ["item", "cpu", "__bool__"]


@pytest.mark.parametrize("storage", ["compute", "cpu"])
def test_one_read_for_the_gate_and_one_for_the_call_per_model_call(storage):
    per_file, run, _ = cached_run(storage)
    assert run.stats.reused > 0 and run.stats.calls == STEPS
    assert per_file["seacache_core/sea_filter.py"] == STEPS - 1  # every call but the first reads its distances once
    assert per_file["cosmos3/model.py"] == STEPS + 1  # sigma and tokens once per call, prompt lengths once per run
    assert set(per_file) == {"seacache_core/sea_filter.py", "cosmos3/model.py"}


@pytest.mark.parametrize("order", [1, 2])
def test_cpu_storage_run_is_bit_identical_to_compute_storage(order):
    _, on_device, compute_latent = cached_run("compute", order)
    with counting_host_buffers() as allocated:
        _, offloaded, cpu_latent = cached_run("cpu", order)
    assert offloaded.stats.reused > 0
    assert [r.decision for r in offloaded.stats.records] == [r.decision for r in on_device.stats.records]
    assert torch.equal(cpu_latent, compute_latent)
    for key in BRANCHES:
        assert allocated[offloaded.states[key].history] == order + 1


def _session_run(gate_kind: str, device_sigma: bool):
    """A schedule gated call by call as ComfyUI calls it (cond + uncond batched, a repeated step, an off-schedule
    call, a latent of another dtype, a restart), with host float sigmas or one-value device ones; the run,
    the indicators after each call and the host reads."""
    sigmas = reference_sigmas(12, 5.0).tolist()
    run = SeaCacheRun(SeaCacheConfig(threshold=0.3, gate=gate_kind, order=1), sigmas)
    torch.manual_seed(0)
    base, drift = torch.randn(1, 4, 3, 6, 8), torch.randn(1, 4, 3, 6, 8)
    calls = [(i, torch.float32) for i in range(12)]
    calls[5:5] = [(4, torch.float32), (None, torch.float32)]  # the step again, then halfway to the next sigma
    calls[9:9] = [(8, torch.bfloat16), (2, torch.float32)]  # another dtype, then a restart (sigma goes up)
    indicators, reads = [], HostReads()
    for step, dtype in calls:
        sigma = (sigmas[4] + sigmas[5]) / 2 if step is None else sigmas[step]
        latent = (base + 0.02 * (step or 4.5) * drift).expand(2, -1, -1, -1, -1).to(dtype)
        sigma = torch.tensor([sigma], dtype=torch.float32, device="cpu").double()  # a "device" tensor for HostReads
        sigma = sigma if device_sigma else float(sigma)
        filter_sigma = sigma / (1.0 + sigma)  # an epsilon-prediction mapping, on the device or the host
        with reads:
            decision = run.decide(latent, sigma, ["c", "u"], filter_sigma)
        if run.predict(decision, torch.zeros(2, 5)) is None:
            run.commit(decision, torch.randn(2, 5))
        indicators.append([run.states[k].indicator.clone() for k in ("c", "u")])
    return run, indicators, Counter(site.rsplit(":", 1)[0] for _, site in reads.reads), len(calls)


@pytest.mark.parametrize("gate_kind", ["sea", "sea_same_sigma"])
def test_a_device_sigma_decides_exactly_as_a_host_one_in_one_read_per_call(gate_kind):
    host, host_indicators, host_reads, calls = _session_run(gate_kind, device_sigma=False)
    device, device_indicators, device_reads, _ = _session_run(gate_kind, device_sigma=True)
    assert host.stats.reused > 0 and {r.reason for r in host.stats.records} >= {"repeat", "off_schedule", "reset"}
    assert [vars(r) for r in device.stats.records] == [vars(r) for r in host.stats.records]
    for on_device, on_host in zip(device_indicators, host_indicators):
        assert all(torch.equal(a, b) for a, b in zip(on_device, on_host))
    assert device_reads == {"seacache_core/sea_filter.py": calls}  # the sigma with the distances, every call
    assert host_reads["seacache_core/sea_filter.py"] < calls  # the host path reads distances only, when a branch has any
