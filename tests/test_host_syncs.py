"""Device-to-host reads per model call of a cached run on the native Cosmos3, counted on the CPU.

Each host read of a device value waits for the GPU's queue. Through the plain-torch host
(``scripts/seacache_host.py``) a call reads once for its sigma and prompt tokens (``cosmos3/model.py``) and once
for the gate's decision (``seacache_core/gate.py``, the distances of all branches together); the first call has no
distance to read, and the text pathway reads its prompt lengths once per run. CPU residual storage adds no read:
its copies go to host buffers allocated once per run (``non_blocking`` on a GPU).
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from cosmos3 import TEXT_KV_CACHE_KEY, Cosmos3Config, TextKVCache, reference_sigmas
from cosmos3.random_weights import random_model
from host_transfers import HostReads
from scripts.seacache_host import BRANCHES, SeaCachedCosmos3
from seacache_core import SeaCacheConfig, SeaCacheSession

CONFIG = Cosmos3Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       intermediate_size=128, vocab_size=256, rope_axes_dim=(4, 2, 2))
STEPS = 20


def cached_run(storage: str, order: int = 1):
    """A 20-step CFG run (cond + uncond batched) with SeaCache; reads per source file, session, final latent."""
    torch.manual_seed(0)
    model = random_model(CONFIG, torch.float32, "cpu", seed=0)
    tokens = torch.full((2, 12), -1)
    tokens[0] = torch.randint(0, CONFIG.vocab_size, (12,))
    tokens[1, :7] = torch.randint(0, CONFIG.vocab_size, (7,))
    x = torch.randn(1, 48, 3, 8, 8)
    sigmas = reference_sigmas(STEPS, 5.0)
    session = SeaCacheSession(SeaCacheConfig(threshold=0.5, order=order, residual_device=storage))
    session.set_schedule(sigmas)
    model.call_gen_stack = SeaCachedCosmos3(model, session)
    options = {TEXT_KV_CACHE_KEY: TextKVCache()}
    reads = HostReads()
    with torch.no_grad():
        for i in range(STEPS):
            with reads:
                v = model(x.expand(2, -1, -1, -1, -1), sigmas[i].expand(2).clone(), tokens, fps=24.0,
                          transformer_options=options)
            x = x + (sigmas[i + 1] - sigmas[i]).item() * (v[1:] + 6.0 * (v[:1] - v[1:]))
    per_file = Counter(site.rsplit(":", 1)[0] for _, site in reads.reads)
    return per_file, session, x


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
    per_file, session, _ = cached_run(storage)
    assert session.stats.reused > 0 and session.stats.calls == STEPS
    assert per_file["seacache_core/gate.py"] == STEPS - 1  # every call but the first reads its distances once
    assert per_file["cosmos3/model.py"] == STEPS + 1  # sigma and tokens once per call, prompt lengths once per run
    assert set(per_file) == {"seacache_core/gate.py", "cosmos3/model.py"}


@pytest.mark.parametrize("order", [1, 2])
def test_cpu_storage_run_is_bit_identical_to_compute_storage(order):
    _, on_device, compute_latent = cached_run("compute", order)
    _, offloaded, cpu_latent = cached_run("cpu", order)
    assert offloaded.stats.reused > 0
    assert [r.decision for r in offloaded.stats.records] == [r.decision for r in on_device.stats.records]
    assert torch.equal(cpu_latent, compute_latent)
    for key in BRANCHES:
        assert offloaded.gate.branch_state(key).history.buffers_allocated == order + 1
