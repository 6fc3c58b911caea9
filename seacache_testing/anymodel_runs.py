"""Helpers for the any-model integration tests and benchmark: sample a tiny core model through ComfyUI's own
sampler nodes, count block executions, read SeaCache reports."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import torch

from . import tiny_comfy_models

APPLY_DEFAULTS = dict(threshold=0.25, residual_order="1", max_consecutive=2, warmup_steps=1, end_steps=1,
                      start_percent=0.0, end_percent=1.0, filter_exponent="auto", residual_storage="compute device",
                      gate="sea")


def seacache(ns, model, node_id="7", **overrides):
    """SeaCache Apply on ``model`` through the node (defaults unless overridden)."""
    return ns.run_node("SeaCacheApply", hidden={"UNIQUE_ID": node_id}, model=model, **{**APPLY_DEFAULTS, **overrides}).outputs[0]


def sample(ns, model, spec, steps=12, batch=1, seed=3, cfg=4.0, sampler="euler", scheduler="simple", positive=None, negative=None):
    """Final latent of a CFG run of ``model`` on an empty latent of the spec's shape (random prompt embeddings
    unless ``positive``/``negative`` conditionings are given); an audio-video latent comes back as one tensor per
    item (the streams flattened and joined), so results compare with ``torch.equal``."""
    run = ns.run_node
    positive = positive if positive is not None else tiny_comfy_models.conditioning(spec, seed=1)
    negative = negative if negative is not None else tiny_comfy_models.conditioning(spec, seed=2)
    guider = run("CFGGuider", model=model, positive=positive, negative=negative, cfg=cfg).outputs[0]
    sampler_obj = run("KSamplerSelect", sampler_name=sampler).outputs[0]
    noise = run("RandomNoise", noise_seed=seed).outputs[0]
    sigmas = run("BasicScheduler", model=model, scheduler=scheduler, steps=steps, denoise=1.0).outputs[0]
    latent = tiny_comfy_models.empty_latent(spec, batch)
    out = run("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler_obj, sigmas=sigmas, latent_image=latent).outputs[0]["samples"]
    if isinstance(out, torch.Tensor):
        return out
    return torch.cat([stream.reshape(stream.shape[0], -1) for stream in out.unbind()], dim=1)


def last_report(model) -> dict:
    """The report of the last run of a SeaCache-patched MODEL."""
    return model.model_options["transformer_options"]["seacache_settings"].last_run


def stack_blocks(diffusion_model) -> list[torch.nn.Module]:
    """Every block of the model's block stack(s), for counting executions."""
    names = ("blocks", "double_blocks", "single_blocks", "transformer_blocks")
    return [block for name in names for block in getattr(diffusion_model, name, [])]


@contextmanager
def counting_blocks(diffusion_model):
    """Yields a dict whose "calls" counts block executions inside the block."""
    counter = {"calls": 0}

    def hook(*_):
        counter["calls"] += 1

    handles = [block.register_forward_hook(hook) for block in stack_blocks(diffusion_model)]
    try:
        yield counter
    finally:
        for handle in handles:
            handle.remove()


def in_threads(works) -> list:
    """Each callable of ``works`` in a thread of its own, all started before any is joined; their results in order.
    The first exception raised in a thread is raised again here."""
    outs, errors = [None] * len(works), []

    def run(index):
        try:
            outs[index] = works[index]()
        except BaseException as error:  # re-raised in the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(works))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return outs
