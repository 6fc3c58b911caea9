"""The text/generator split of a Cosmos3 layer that dynamic VRAM's load order and the memory plan rely on."""

import pytest
import torch

from cosmos3 import Cosmos3Config, Cosmos3Transformer

TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            intermediate_size=96, vocab_size=512, rope_axes_dim=(6, 5, 5))


@pytest.mark.parametrize("variant", [{}, {"qk_norm_for_text": False, "use_und_k_norm_for_gen": True}, {"attention_bias": True}])
def test_pathways_partition_each_layer(variant):
    model = Cosmos3Transformer(Cosmos3Config(**TINY, **variant))
    for layer in model.layers:
        text = {id(p) for m in layer.text_modules() for p in m.parameters()}
        gen = {id(p) for m in layer.generator_modules() for p in m.parameters()}
        assert not text & gen
        assert text | gen == {id(p) for p in layer.parameters()}


def test_generator_pathway_alone_gives_the_generator_output():
    """Zeroing every text-pathway weight after the text K/V are computed leaves the generator step unchanged."""
    torch.manual_seed(0)
    model = Cosmos3Transformer(Cosmos3Config(**TINY))
    x, sigma, tokens = torch.randn(1, 48, 2, 4, 4), torch.tensor([0.5]), torch.randint(0, 512, (1, 7))
    inputs, hidden = model.prepare(x, sigma, tokens)
    kv = model.compute_text_kv(tokens, hidden.dtype)
    expected = hidden
    for layer, (k, v) in zip(model.layers, kv.layers):
        expected = layer.gen_step(expected, k, v, inputs.cos, inputs.sin, kv.lengths, model.attention)
    with torch.no_grad():
        for layer in model.layers:
            for module in layer.text_modules():
                for p in module.parameters():
                    p.zero_()
    out = hidden
    for layer, (k, v) in zip(model.layers, kv.layers):
        out = layer.gen_step(out, k, v, inputs.cos, inputs.sin, kv.lengths, model.attention)
    assert torch.equal(out, expected)
