"""The published SeaCache indicator: the first transformer block's timestep-modulated input, on the vision tokens
only, SEA-filtered over their (T, H, W) grid (docs/first-block-indicator.md states what diffusers and the official
scripts capture, and where each host reaches that tensor).

The host hands over the tensor the first block would feed its attention (``norm1(x) * (1 + scale) + shift`` on
adaLN models; ``input_layernorm_moe_gen(x)`` on Cosmos3, which adds its time embedding to the tokens instead) as
tokens ``[B, N, D]``, and says where the vision tokens sit (:class:`VisionTokens`). :func:`first_block_view` lays
them out as a video of ``D`` channels, ``[B, D, T, H, W]``: the shape every SeaCache gate reads. The gates
``"first_block"`` and ``"first_block_same_sigma"`` decide on this view (``SeaCacheRun.pending``: the call is decided
when the host's seam enters the stack with it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .sea_filter import index_of


@dataclass(frozen=True)
class VisionTokens:
    """Where a call's vision tokens sit in the first block's input ``[B, N, D]``.

    ``grid`` is their (T, H, W) token grid, stored frame by frame and row by row from token ``start`` on (the
    order every patch embedding of the supported models produces). ``noisy_frames`` names the frames the indicator
    reads (ascending); None reads them all. diffusers leaves conditioned (clean) frames out, so an image-to-video
    call reads frames 1..T-1 of a T-frame grid.
    """

    grid: tuple[int, int, int]
    start: int = 0
    noisy_frames: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        grid = tuple(self.grid)
        if len(grid) != 3 or any(not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in grid):
            raise ValueError(f"grid must be three positive integers (T, H, W), got {self.grid!r}")
        if not isinstance(self.start, int) or self.start < 0:
            raise ValueError(f"start must be an integer >= 0, got {self.start!r}")
        object.__setattr__(self, "grid", grid)
        if self.noisy_frames is not None:
            frames = tuple(self.noisy_frames)
            if not frames or list(frames) != sorted(set(frames)) or frames[0] < 0 or frames[-1] >= grid[0]:
                raise ValueError(
                    f"noisy_frames must be distinct ascending frame indices in 0..{grid[0] - 1}, "
                    f"got {self.noisy_frames!r}"
                )
            object.__setattr__(self, "noisy_frames", frames)

    @property
    def count(self) -> int:
        """Vision tokens in the sequence (all frames)."""
        return math.prod(self.grid)

    @property
    def frames_read(self) -> int:
        """Frames the indicator reads."""
        return self.grid[0] if self.noisy_frames is None else len(self.noisy_frames)


def first_block_view(modulated: torch.Tensor, tokens: VisionTokens) -> torch.Tensor:
    """The vision tokens of ``modulated`` ``[B, N, D]`` as a video ``[B, D, T', H, W]`` of the frames read, in the
    input's dtype and device (a view unless ``noisy_frames`` skips frames in between). ValueError when the tokens
    do not fit the sequence."""
    if modulated.ndim != 3:
        raise ValueError(f"the first block's input must be tokens [B, N, D], got shape {tuple(modulated.shape)}")
    end = tokens.start + tokens.count
    if end > modulated.shape[1]:
        raise ValueError(
            f"vision tokens {tokens.start}..{end - 1} (grid {tokens.grid}) do not fit a sequence of "
            f"{modulated.shape[1]} tokens"
        )
    video = modulated[:, tokens.start : end].unflatten(1, tokens.grid)
    if tokens.noisy_frames is not None and tokens.frames_read != tokens.grid[0]:
        video = video[:, index_of(tokens.noisy_frames)]
    return video.permute(0, 4, 1, 2, 3)


def noisy_frames_view(modulated: torch.Tensor, grid: tuple[int, int, int],
                      frame_is_clean: torch.Tensor) -> torch.Tensor:
    """:func:`first_block_view` of the video tokens that open ``modulated`` ``[B, N, D]`` on the token ``grid``,
    without the frames ``frame_is_clean`` ``[B, T]`` flags in any item (diffusers reads the noisy frames only; a
    frame conditioned in one item is left out of all, so the items share one grid). Reads the flags to the host.
    ValueError when every frame is conditioned."""
    clean = frame_is_clean.any(dim=0).tolist()
    noisy = tuple(frame for frame, given in enumerate(clean) if not given)
    if not noisy:
        raise ValueError("every frame is conditioned: the first block's view has no noisy frame")
    return first_block_view(modulated, VisionTokens(tuple(grid), 0, noisy))
