"""The Wan 2.1 natural proxy: the 16-channel natural data, the trainer's Wan architecture, and the shipped weights
loaded and sampled through ComfyUI's own nodes (those tests skip without COMFYUI_PATH)."""

import json
import os

import pytest
import torch

from seacache_testing import proxy_natural as natural
from seacache_testing import proxy_wan
from seacache_testing import quality_proxy as proxy


def test_natural_data_keeps_four_channels_and_gives_sixteen():
    """The 4-channel natural proxy's data is unchanged by the channel-count parameter (values taken from the code
    before it had one), and 16 channels are the same principal directions continued, decoded exactly."""
    videos = natural.make_videos(torch.tensor([0, 9, 22, 31]), torch.Generator().manual_seed(7))
    assert videos.shape == (4, 4, 5, 16, 16)
    assert float(videos.double().sum()) == pytest.approx(806.7189791415003, rel=1e-6)
    assert float(videos.double().abs().sum()) == pytest.approx(14130.99432103365, rel=1e-6)
    assert float(videos[1, 2, 3, 4, 5]) == pytest.approx(-0.025975842028856277, abs=1e-6)
    mean, components = natural.patch_map()
    assert float(components.double().abs().sum()) == pytest.approx(31.301740096416324, rel=1e-6)
    wide = natural.make_videos(torch.tensor([0, 9, 22, 31]), torch.Generator().manual_seed(7), channels=16)
    assert wide.shape == (4, 16, 5, 16, 16) and wide.pow(2).mean().sqrt() == pytest.approx(1.0, abs=0.35)
    _, components16 = natural.patch_map(16)
    cosine = torch.nn.functional.cosine_similarity(components16[:4], components, dim=1)
    assert torch.allclose(cosine, torch.ones(4), atol=1e-5)  # same directions, one common scale each
    frames = natural.render(torch.tensor([3]), 5, torch.Generator().manual_seed(1))[0]
    latent = natural.encode(frames, 16)
    decoded = natural.decode(latent)
    assert torch.allclose(natural.encode(decoded, 16), latent, atol=1e-4)  # exact on the components' span
    error4 = (natural.decode(natural.encode(frames)) - frames).pow(2).mean()
    error16 = (decoded - frames).pow(2).mean()
    assert error16 < 0.25 * error4 < 0.25 * frames.var()  # 16 channels keep far more of the photo


@pytest.fixture(scope="module")
def wan(comfy):
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    return comfy


def cfg_sample(ns, model, table, label, steps=2, cfg=natural.CFG):
    """A video LATENT of class ``label`` through ComfyUI's SamplerCustomAdvanced with CFGGuider (empty prompt)."""
    run = ns.run_node
    guider = run("CFGGuider", model=model, positive=proxy_wan.conditioning(label, table),
                 negative=proxy_wan.conditioning(None, table), cfg=cfg).outputs[0]
    sigmas = run("BasicScheduler", model=model, scheduler="simple", steps=steps, denoise=1.0).outputs[0]
    return run("SamplerCustomAdvanced", noise=run("RandomNoise", noise_seed=3).outputs[0], guider=guider,
               sampler=run("KSamplerSelect", sampler_name="euler").outputs[0], sigmas=sigmas,
               latent_image={"samples": torch.zeros(1, *proxy_wan.LATENT_SHAPE)}).outputs[0]["samples"]


def detected(model) -> dict:
    """What ComfyUI detected: model config class and the Wan unet config it built."""
    config = model.model.model_config
    return {"class": type(config).__name__, **config.unet_config}


def test_trainer_writes_a_wan_file_that_comfyui_loads_and_samples(wan, tmp_path):
    """Two steps of the pack's trainer on ComfyUI's WanModel write a diffusion_models file UNETLoader detects as
    Wan 2.1 T2V with 16 input channels, and ComfyUI samples it with the word table's conditioning."""
    model, steps = proxy.train(2, 2, 1e-3, 0, log_every=1, data=proxy.WAN_NATURAL)
    assert steps == 2 and isinstance(model, proxy_wan.WanProxy)
    proxy.save_proxy(model, str(tmp_path), {}, proxy.WAN_NATURAL)
    assert sorted(os.listdir(tmp_path)) == sorted([proxy.CARD_NAME, proxy_wan.WEIGHTS_NAME, proxy_wan.TEXT_NAME])
    comfy_model = proxy_wan.load_model(str(tmp_path))
    found = detected(comfy_model)
    assert (found["class"], found["in_dim"], found["num_layers"], found["dim"]) == ("WAN21_T2V", 16, 3, 128)
    table = proxy_wan.word_table(str(tmp_path))
    assert torch.equal(table, model.text_embedding.weight.detach().to(torch.bfloat16).float())
    samples = cfg_sample(wan, comfy_model, table, label=5)
    assert samples.shape == (1, *proxy_wan.LATENT_SHAPE) and torch.isfinite(samples).all() and samples.std() > 0
    frames = proxy_wan.decode(samples)
    assert frames.shape == (natural.FRAMES, 3, natural.PIXELS, natural.PIXELS) and torch.isfinite(frames).all()


def test_wan_proxy_needs_comfyui_path(monkeypatch):
    """Without COMFYUI_PATH the Wan proxy says what to set, before anything runs."""
    monkeypatch.delenv("COMFYUI_PATH", raising=False)
    with pytest.raises(RuntimeError, match="COMFYUI_PATH"):
        proxy_wan.comfyui()


def test_shipped_wan_proxy_runs_in_comfyui_as_the_trainer_ran_it(wan):
    """The committed weights load through UNETLoader (Wan 2.1 T2V, in_dim 16, 3 blocks), and one Euler step of
    ComfyUI's sampler from a sampler latent equals the adapter's denoised prediction mapped through Wan's latent
    format: same network, same t = 1000 sigma, same model space."""
    with open(os.path.join(proxy_wan.FOLDER, proxy.CARD_NAME)) as f:
        card = json.load(f)
    assert card["data"] == "wan_natural" and card["config"]["in_dim"] == 16
    assert card["valid"] and card["cfg"] == proxy_wan.CFG == proxy.WAN_NATURAL.cfg and card["validity"]["cfg"] == proxy_wan.CFG
    comfy_model = proxy_wan.load_model()
    found = detected(comfy_model)
    assert (found["class"], found["in_dim"], found["out_dim"], found["num_layers"]) == ("WAN21_T2V", 16, 16, 3)
    assert len(comfy_model.model.diffusion_model.blocks) == 3
    adapter = proxy.load_proxy(proxy_wan.FOLDER, data=proxy.WAN_NATURAL)
    table = proxy_wan.word_table()
    assert torch.equal(table, adapter.text_embedding.weight)

    label, sigma = 9, 0.6
    clean = proxy.WAN_NATURAL.dataset(1, 77)[0]  # a model-space video
    latent = proxy_wan.from_model_space(clean)
    run = wan.run_node
    guider = run("CFGGuider", model=comfy_model, positive=proxy_wan.conditioning(label, table),
                 negative=proxy_wan.conditioning(None, table), cfg=1.0).outputs[0]
    out = run("SamplerCustomAdvanced", noise=run("DisableNoise").outputs[0], guider=guider,
              sampler=run("KSamplerSelect", sampler_name="euler").outputs[0], sigmas=torch.tensor([sigma, 0.0]),
              latent_image={"samples": latent}).outputs[0]["samples"]
    x = (1 - sigma) * clean  # flow noise scaling with zero noise
    with torch.no_grad():
        velocity = adapter(x, torch.tensor([sigma]), proxy.WAN_NATURAL.token_batch([label]))
    expected = proxy_wan.from_model_space(x - sigma * velocity)
    assert torch.allclose(proxy_wan.to_model_space(latent), clean, atol=1e-5)
    assert (out - expected).abs().max() < 1e-3 * expected.abs().max(), (out - expected).abs().max()
    assert (out - latent).abs().mean() > 0.01  # the step did something
