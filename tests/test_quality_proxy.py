"""The quality proxy (trained Cosmos3-architecture model), the cache options it compares, and bench_quality."""

import math
import os
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "scripts"), os.path.join(ROOT, "benchmarks")]

import bench_quality  # noqa: E402
import train_proxy as proxy  # noqa: E402
from cosmos3 import STACK_BOUNDARY_KEY, Cosmos3Transformer  # noqa: E402
from seacache_core import SeaCacheConfig, SeaCacheGate, rel_l1, sea_filter_float32  # noqa: E402


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    return proxy.load_proxy()


def test_proxy_loads_as_the_packs_cosmos3(model):
    assert isinstance(model, Cosmos3Transformer) and model.config == proxy.proxy_config()
    card_path = os.path.join(proxy.PROXY_DIR, proxy.CARD_NAME)
    with open(card_path) as f:
        card = __import__("json").load(f)
    assert card["valid"] and card["data_like"] and card["cfg"] == proxy.CFG and card["seed"] == 0 and card["command"].startswith("python scripts/train_proxy.py")
    size = os.path.getsize(os.path.join(proxy.PROXY_DIR, proxy.WEIGHTS_NAME))
    assert size < 4 * 2**20  # small enough to commit


def test_dataset_is_deterministic_and_prompt_dependent():
    a, labels = proxy.make_dataset(32, 5)
    b, _ = proxy.make_dataset(32, 5)
    assert torch.equal(a, b) and a.shape == (32, *proxy.LATENT_SHAPE)
    assert sorted(labels.tolist()) == sorted(list(range(16)) * 2)
    probe = proxy.train_probe(*proxy.make_dataset(1024, 11), epochs=60)
    held_x, held_y = proxy.make_dataset(64, 12)
    assert (probe(proxy.probe_features(held_x)).argmax(1) == held_y).float().mean() > 0.9  # content is learnable


def test_samples_pass_the_validity_bar(model):
    """The committed proxy makes data-like videos of the prompted class: nearest-neighbour distance at most half-way
    to noise and a probe trained on real videos recognising the prompted class in at least 75 % of samples."""
    report = proxy.validity(model, labels=list(range(16)))
    assert report["samples"] == 16
    assert report["noise_nn_ratio"] > 1.5 and report["probe_real_accuracy"] > 0.9  # the metrics see the content
    assert proxy.is_data_like(report), report
    assert proxy.is_valid(report), report


def test_boundary_changes_where_the_seam_ends_not_the_velocity(model):
    x = torch.randn(2, *proxy.LATENT_SHAPE, generator=torch.Generator().manual_seed(0))
    tokens, sigma = proxy.token_batch([3, None]), torch.tensor([0.7, 0.7])
    seams = {}

    def recording(boundary):
        def seam(hidden, inputs):
            out = model.run_gen_stack(hidden, inputs)
            seams[boundary] = out
            return out
        return seam

    with torch.no_grad():
        velocities = {}
        for boundary in ("before_norm", "after_norm"):
            model.call_gen_stack = recording(boundary)
            velocities[boundary] = model(x, sigma, tokens, fps=24.0, transformer_options={STACK_BOUNDARY_KEY: boundary})
        del model.call_gen_stack
        torch.testing.assert_close(velocities["after_norm"], velocities["before_norm"], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(seams["after_norm"], model.norm_moe_gen(seams["before_norm"]))
        with pytest.raises(ValueError, match=STACK_BOUNDARY_KEY):
            model(x, sigma, tokens, transformer_options={STACK_BOUNDARY_KEY: "middle"})


def test_unfiltered_gate_compares_raw_latents():
    a = proxy.make_dataset(1, 1)[0]  # smooth content
    b = a + 0.3 * torch.randn(a.shape, generator=torch.Generator().manual_seed(1))  # plus fine noise
    distances = {}
    for name in ("sea", "none"):
        gate = SeaCacheGate(SeaCacheConfig(indicator_filter=name, threshold=100.0))
        for step, latent in enumerate((a, b)):
            decision = gate.decide(["c"], latent, 0.5, step, 4)
            gate.commit(decision, torch.zeros(1, 1))
        distances[name] = decision.distance
    assert distances["none"] == pytest.approx(float(rel_l1(b, a)), rel=1e-5)
    sea = rel_l1(sea_filter_float32(b, 0.5), sea_filter_float32(a, 0.5))
    assert distances["sea"] == pytest.approx(float(sea), rel=1e-5)
    assert distances["sea"] < 0.95 * distances["none"]  # the low-pass SEA view discounts the fine change


def test_even_steps_spread_the_full_calls():
    assert bench_quality.even_steps(35, 19) == {round(i * 34 / 18) for i in range(19)}
    assert len(bench_quality.even_steps(35, 19)) == 19 and {0, 34} <= bench_quality.even_steps(35, 19)


def test_bench_quality_quick_prints_the_table(capsys):
    rows = bench_quality.main(["--quick"])
    printed = capsys.readouterr().out
    names = {(v.section, v.name) for v in bench_quality.variants(quick=True)}
    assert {(r["section"], r["variant"]) for r in rows} == names
    table_lines = [line for line in printed.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(table_lines) == len(rows) + 1  # header + one line per row
    shipped = {r["section"]: r for r in rows if r["variant"].startswith("shipped")}
    for r in rows:
        assert len(r["error"]) == len(r["full"]) == 2
        assert all(math.isfinite(e) and e >= 0 for e in r["error"])
        assert all(2 <= f <= 16 for f in r["full"])
        if r["variant"].startswith("evenly"):
            assert r["full"] == shipped[r["section"]]["full"]  # matched count, pair by pair
