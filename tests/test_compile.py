"""torch.compile of the whole native Cosmos3 with SeaCache inside it: the graphs are compiled while the first steps
see every path (forced, reused, computed) and never again, so a 20-step run does not recompile per step.

The gate's entry points are excluded from tracing (graph breaks), and so is the call's one host read, so the
compiled graphs hold the model's tensor work only; sigma and the step reach the gate as host values and never
become guards. Counted with ``torch._dynamo.testing.CompileCounterWithBackend`` (graphs handed to the backend).
On the CPU the backend is ``aot_eager`` (AOTAutograd tracing, eager kernels); the CUDA test uses inductor.
Measured on the CPU (torch 2.13): 16 graphs, all by step 2, none after; decisions equal to eager.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from cosmos3 import TEXT_KV_CACHE_KEY, Cosmos3Config, TextKVCache, reference_sigmas
from seacache_testing.cosmos3_random_weights import random_model
from seacache_testing.seacache_host import SeaCachedCosmos3
from seacache_core import SeaCacheConfig, SeaCacheRun

CONFIG = Cosmos3Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                       intermediate_size=128, vocab_size=256, rope_axes_dim=(4, 2, 2))
STEPS = 20
WARMUP = 3  # steps: a computed one, a reused one, and one more for dynamo's automatic dynamic values
MAX_GRAPHS = 24


def run(device: str, backend: str | None):
    """A 20-step cached CFG run, the model compiled with ``backend`` (None: eager); the graph count after each
    step (empty when eager), the session and the final latent."""
    torch.manual_seed(0)
    model = random_model(CONFIG, torch.float32, device, seed=0)
    tokens = torch.full((2, 12), -1)
    tokens[0] = torch.randint(0, CONFIG.vocab_size, (12,))
    tokens[1, :7] = torch.randint(0, CONFIG.vocab_size, (7,))
    tokens = tokens.to(device)
    x = torch.randn(1, 48, 3, 8, 8).to(device)
    sigmas = reference_sigmas(STEPS, 5.0)
    session = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=0.5), sigmas)
    model.call_gen_stack = SeaCachedCosmos3(model, session)
    counter = CompileCounterWithBackend(backend) if backend else None
    torch._dynamo.reset()
    call = torch.compile(model, backend=counter) if counter else model
    options = {TEXT_KV_CACHE_KEY: TextKVCache()}
    graphs = []
    with torch.no_grad():
        for i in range(STEPS):
            v = call(x.expand(2, -1, -1, -1, -1), sigmas[i].to(device).expand(2).clone(), tokens, fps=24.0,
                     transformer_options=options)
            x = x + (sigmas[i + 1] - sigmas[i]).item() * (v[1:] + 6.0 * (v[:1] - v[1:]))
            if counter:
                graphs.append(counter.frame_count)
    torch._dynamo.reset()
    return graphs, session, x


def check_no_recompilation(device: str, backend: str, tolerance: float):
    _, eager_session, eager = run(device, None)
    graphs, session, compiled = run(device, backend)
    decisions = [r.decision for r in session.stats.records]
    assert "reused" in decisions[:WARMUP] and session.stats.reused > 5  # both paths met during the warm-up
    assert decisions == [r.decision for r in eager_session.stats.records]
    assert 0 < graphs[WARMUP - 1] <= MAX_GRAPHS
    assert graphs[WARMUP - 1:] == [graphs[WARMUP - 1]] * (STEPS - WARMUP + 1), graphs  # nothing after warm-up
    assert ((compiled - eager).abs().max() / eager.abs().max()).item() < tolerance


def test_compiled_cached_run_compiles_during_warmup_only_cpu():
    check_no_recompilation("cpu", "aot_eager", 1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (inductor on the GPU)")
def test_compiled_cached_run_compiles_during_warmup_only_cuda_inductor():
    check_no_recompilation("cuda", "inductor", 1e-3)
