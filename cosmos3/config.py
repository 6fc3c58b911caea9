"""Cosmos3 network hyper-parameters, read from a diffusers ``config.json``."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field


HIDDEN_ACTS = ("silu", "relu2")
LATENT_CHANNELS = 48
"""Channels of a Cosmos3 video latent: the z_dim of its VAE (Wan2.2)."""
VAE_SPATIAL = 16
"""Pixels per latent cell of the VAE, across and down; an odd latent size is zero-padded to the 2x2 patch by the
model."""
VAE_TEMPORAL = 4
"""Video frames per latent frame after the first: latent frame t > 0 covers video frames 4t-3 .. 4t."""


@dataclass(frozen=True)
class Cosmos3Config:
    """Architecture of the Cosmos3 omni transformer (defaults: Cosmos3-Nano).

    Field names follow the diffusers ``Cosmos3OmniTransformer`` config so an
    official ``transformer/config.json`` maps onto it one to one.
    """

    hidden_size: int = 4096
    num_hidden_layers: int = 36
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int = 128
    intermediate_size: int = 12288
    rms_norm_eps: float = 1e-6
    vocab_size: int = 151936
    attention_bias: bool = False
    hidden_act: str = "silu"
    qk_norm_for_text: bool = True
    use_und_k_norm_for_gen: bool = False
    latent_channel: int = LATENT_CHANNELS
    latent_patch_size: int = 2
    patch_latent_dim: int = 192
    rope_theta: float = 5_000_000.0
    rope_axes_dim: tuple[int, int, int] = (24, 20, 20)
    base_fps: int = 24
    enable_fps_modulation: bool = True
    unified_3d_mrope_reset_spatial_ids: bool = True
    unified_3d_mrope_temporal_modality_margin: int = 15000
    timestep_scale: float = 0.001
    temporal_compression: int = VAE_TEMPORAL
    sound_gen: bool = False  # the checkpoint also generates a sound track (audio_proj_in/out, audio_modality_embed)
    sound_dim: int | None = None  # channels of a sound latent frame (the audio VAE's latent size)
    sound_latent_fps: float = 25.0  # sound latent frames per second (the rate of the sound positions)
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        self.validate()

    def validate(self) -> None:
        """Reject configurations this implementation cannot run, naming the field and what is supported."""
        if self.hidden_act not in HIDDEN_ACTS:
            raise ValueError(
                f"Cosmos3Config.hidden_act={self.hidden_act!r} is not supported: Cosmos3 backbones use 'silu' "
                "(Qwen3: Nano, Super and their Text2Image/Image2Video versions) or 'relu2' (Nemotron: Edge)."
            )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads})."
            )
        if sum(self.rope_axes_dim) * 2 != self.head_dim:
            raise ValueError(f"rope_axes_dim {tuple(self.rope_axes_dim)} must sum to head_dim/2 = {self.head_dim // 2}.")
        if self.sound_gen and not self.sound_dim:
            raise ValueError("Cosmos3Config.sound_gen=True needs sound_dim (the audio latent channels) in config.json.")
        expected = self.latent_channel * self.latent_patch_size**2
        if self.patch_latent_dim != expected:
            raise ValueError(
                f"patch_latent_dim ({self.patch_latent_dim}) must equal latent_channel * patch_size^2 = {expected}."
            )

    @classmethod
    def from_dict(cls, raw: dict) -> "Cosmos3Config":
        """Build from a diffusers config dict; unknown keys are kept in ``extra``, ``rope_scaling`` is honoured."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: v for k, v in raw.items() if k in names and v is not None}
        if "rope_axes_dim" not in values and isinstance(raw.get("rope_scaling"), dict):
            section = raw["rope_scaling"].get("mrope_section")
            if section:
                values["rope_axes_dim"] = section
        if "rope_axes_dim" in values:
            values["rope_axes_dim"] = tuple(int(v) for v in values["rope_axes_dim"])
        extra = {k: v for k, v in raw.items() if k not in names and not k.startswith("_")}
        return cls(**values, extra=extra)

    def to_dict(self) -> dict:
        """The diffusers-style config dict (round-trips through :meth:`from_dict`)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out["rope_axes_dim"] = list(self.rope_axes_dim)
        return out

    def parameter_count(self) -> int:
        """Parameters used for generation (text and generator pathways, the sound modules when ``sound_gen``; no
        lm_head/action)."""
        h, q, kv = self.hidden_size, self.num_attention_heads * self.head_dim, self.num_key_value_heads * self.head_dim
        attn = 2 * (h * q + 2 * h * kv + q * h)
        if self.attention_bias:
            attn += 2 * (q + 2 * kv + h)
        mlp = 2 * (3 if self.hidden_act == "silu" else 2) * h * self.intermediate_size
        qk_norms = 2 + (2 if self.qk_norm_for_text else int(self.use_und_k_norm_for_gen))
        per_layer = attn + mlp + 4 * h + qk_norms * self.head_dim
        patch = self.patch_latent_dim
        top = self.vocab_size * h + 2 * patch * h + patch + h + (256 * h + h) + (h * h + h) + h
        sound = 2 * self.sound_dim * h + self.sound_dim + 2 * h if self.sound_gen else 0
        return self.num_hidden_layers * per_layer + top + sound

    def token_count(self, frames: int, height: int, width: int) -> int:
        """Generator tokens of a latent of the given (T, H, W) size after 2x2 patching."""
        p = self.latent_patch_size
        return frames * math.ceil(height / p) * math.ceil(width / p)
