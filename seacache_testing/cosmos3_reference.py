"""Helpers that drive diffusers' reference Cosmos3 transformer the way its pipeline does (tests only)."""

from __future__ import annotations

import torch

TINY = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    intermediate_size=96,
    vocab_size=512,
    rope_axes_dim=[6, 5, 5],
)

# Architecture switches of the Cosmos3 family in diffusers 0.42.1 (``Cosmos3OmniTransformer`` config), each on the
# TINY sizes: the Qwen3 backbone (Nano, Super, Super-Text2Image/Image2Video and their 4-step versions share it),
# the Nemotron backbone (Edge: relu2 MLP + Nemotron norms), text keys normalised only for the generator, biases.
VARIANTS = {
    "qwen3": {},
    "relu2": {"hidden_act": "relu2"},
    "relu2-und-k-norm": {"hidden_act": "relu2", "qk_norm_for_text": False, "use_und_k_norm_for_gen": True},
    "und-k-norm": {"qk_norm_for_text": False, "use_und_k_norm_for_gen": True},
    "attention-bias": {"attention_bias": True},
}


def reference_model(seed: int = 0, **overrides):
    """A tiny random diffusers ``Cosmos3OmniTransformer`` in float32 with non-trivial norm weights and biases."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer

    torch.manual_seed(seed)
    model = Cosmos3OmniTransformer(**{**TINY, **overrides}).float().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            parts = name.split(".")
            if name.endswith("norm.weight") or (len(parts) > 1 and "norm" in parts[-2]):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.05 * torch.randn_like(p))
            elif name == "audio_modality_embed":  # diffusers initialises it to zeros: give it a value to test
                p.copy_(torch.randn_like(p))
    return model


def native_from(ref):
    """This pack's ``Cosmos3Transformer`` with the reference's weights, loaded by checkpoint key names (fp32, eval)."""
    from cosmos3 import Cosmos3Config, Cosmos3Transformer, is_unused_key

    cfg = Cosmos3Config.from_dict(dict(ref.config))
    model = Cosmos3Transformer(cfg).float().eval()
    model.load_state_dict({k: v for k, v in ref.state_dict().items() if not is_unused_key(k)}, strict=True)
    return model


SOUND = dict(sound_gen=True, sound_dim=8, sound_latent_fps=25.0)
"""Sound switches of a ``sound_gen`` checkpoint on the TINY sizes (8 sound latent channels)."""


def reference_inputs(model, latent, timestep, token_ids, fps=24.0, clean_frames=(), sound=None) -> dict:
    """The keyword arguments of diffusers' ``Cosmos3OmniTransformer.forward`` for one item exactly as the pipeline
    packs them (batch 1, packed sequence), ``return_dict`` left out: a caller wrapping the transformer (Cache-DiT
    replaces its ``forward``) decides how to ask for the tuple form.

    With ``sound`` [1, sound_dim, T_s] the sound tokens follow the video tokens as diffusers' pipeline packs them
    (``_prepare_sound_segment``: the video's temporal start, ``sound_latent_fps``, all frames noisy)."""
    from diffusers.pipelines.cosmos.pipeline_cosmos3_omni import (
        get_3d_mrope_ids_text_tokens,
        get_3d_mrope_ids_vae_tokens,
    )

    cfg = model.config
    _, _, t, h, w = latent.shape
    p = cfg.latent_patch_size
    ph, pw = -(-h // p), -(-w // p)
    und_len = len(token_ids)
    text_ids, next_offset = get_3d_mrope_ids_text_tokens(und_len, 0, use_float_positions=cfg.enable_fps_modulation)
    offset = next_offset + cfg.unified_3d_mrope_temporal_modality_margin
    vision_ids, _ = get_3d_mrope_ids_vae_tokens(
        t, ph, pw, offset, reset_spatial_indices=cfg.unified_3d_mrope_reset_spatial_ids,
        fps=fps if cfg.enable_fps_modulation else None, base_fps=float(cfg.base_fps), temporal_compression_factor=4,
    )
    noisy = torch.tensor([i for i in range(t) if i not in set(clean_frames)], dtype=torch.long)
    stride = ph * pw
    mse = torch.cat([torch.arange(und_len + i * stride, und_len + (i + 1) * stride) for i in noisy.tolist()])
    n_vision = t * stride
    position_ids, n_sound, sound_args = [text_ids, vision_ids], 0, {}
    if sound is not None:
        n_sound = sound.shape[2]
        sound_ids, _ = get_3d_mrope_ids_vae_tokens(
            n_sound, 1, 1, offset, reset_spatial_indices=cfg.unified_3d_mrope_reset_spatial_ids,
            fps=float(cfg.sound_latent_fps) if cfg.enable_fps_modulation else None, base_fps=float(cfg.base_fps),
            temporal_compression_factor=1,
        )
        position_ids.append(sound_ids)
        indexes = torch.arange(und_len + n_vision, und_len + n_vision + n_sound)
        sound_args = dict(
            sound_tokens=[sound[0]], sound_token_shapes=[(n_sound, 1, 1)], sound_sequence_indexes=indexes,
            sound_mse_loss_indexes=indexes.clone(), sound_timesteps=torch.full((n_sound,), float(timestep)),
            sound_noisy_frame_indexes=[torch.arange(n_sound)],
        )
    return dict(
        input_ids=torch.tensor(token_ids, dtype=torch.long),
        text_indexes=torch.arange(und_len),
        position_ids=torch.cat(position_ids, dim=1),
        und_len=und_len,
        sequence_length=und_len + n_vision + n_sound,
        vision_tokens=[latent],
        vision_token_shapes=[(t, ph, pw)],
        vision_sequence_indexes=torch.arange(und_len, und_len + n_vision),
        vision_mse_loss_indexes=mse,
        vision_timesteps=torch.full((len(noisy) * stride,), float(timestep)),
        vision_noisy_frame_indexes=[noisy],
        **sound_args,
    )


def reference_velocity(model, latent, timestep, token_ids, fps=24.0, clean_frames=(), sound=None):
    """Velocity [1, C, T, H, W] of one item exactly as the pipeline requests it (:func:`reference_inputs`); with
    ``sound`` the pair (video velocity, sound velocity [1, sound_dim, T_s])."""
    inputs = reference_inputs(model, latent, timestep, token_ids, fps, clean_frames, sound)
    with torch.no_grad():
        preds, preds_sound, _ = model(**inputs, return_dict=False)
    return preds[0] if sound is None else (preds[0], preds_sound[0][None])


PARITY_RTOL = 2e-5  # max relative error allowed between our fp32 model and the reference's


def rel_err(a, b):
    """Max absolute difference of ``a`` and ``b`` relative to ``b``'s largest magnitude."""
    return ((a - b).abs().max() / b.abs().max()).item()


def check(got, expected, what):
    """Assert parity and print the measured error (``pytest -s`` lists every variant's figure)."""
    err = rel_err(got, expected)
    print(f"parity {what}: max rel err {err:.2e}")
    assert err < PARITY_RTOL


def sigma_and_t(sigma: float):
    """A one-item sigma tensor and the matching timestep (sigma x 1000) the reference model takes."""
    s = torch.tensor([sigma], dtype=torch.float32)
    return s, (s * 1000.0).item()


def tokens(n, seed):
    """``n`` random token ids of the tiny vocabulary, from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, TINY["vocab_size"], (n,), generator=g).tolist()
