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


def _stack_inputs(model, batch_tokens):
    torch.manual_seed(1)
    x, sigma = torch.randn(batch_tokens.shape[0], 48, 2, 4, 4), torch.full((batch_tokens.shape[0],), 0.5)
    return model.prepare(x, sigma, batch_tokens)


def test_block_replace_patches_get_each_generator_layer():
    """A ``patches_replace["dit"]`` patch is called once per layer it names, with that layer's index and text K/V;
    one that calls the original block is bit-identical to no patch, one that skips its layer changes the output."""
    from cosmos3.model import LAYER_PATCH_KIND

    torch.manual_seed(0)
    model = Cosmos3Transformer(Cosmos3Config(**TINY))
    tokens = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, -1, -1]])  # padded prompts: text_lengths reach the patch
    inputs, hidden = _stack_inputs(model, tokens)
    plain = model.run_gen_stack(hidden, inputs)
    kv = model.compute_text_kv(tokens, hidden.dtype)
    seen = []

    def identity(args, extra):
        options = args["transformer_options"]
        seen.append((options["block_index"], options["total_blocks"], args["text_lengths"]))
        assert torch.equal(args["txt"][0], kv.layers[options["block_index"]][0])
        return extra["original_block"](args)

    replace = {(LAYER_PATCH_KIND, i): identity for i in range(len(model.layers))}
    inputs.transformer_options = {"patches_replace": {"dit": replace}}
    assert torch.equal(model.run_gen_stack(hidden, inputs), plain)
    assert seen == [(0, 2, [5, 3]), (1, 2, [5, 3])]

    inputs.transformer_options = {"patches_replace": {"dit": {(LAYER_PATCH_KIND, 1): lambda args, extra: args}}}
    skipped = model.run_gen_stack(hidden, inputs)
    layer0 = model.layers[0].gen_step(hidden, *kv.layers[0], inputs.cos, inputs.sin, kv.lengths, model.attention)
    assert torch.equal(skipped, layer0)  # layer 1 skipped: the stack output is layer 0's
    assert (skipped - plain).abs().max() > 1e-3
