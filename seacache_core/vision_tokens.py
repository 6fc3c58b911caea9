"""The published SeaCache indicator's tensor: the first block's timestep-modulated input on the vision tokens, laid out
as a video of its channels ``[B, D, T, H, W]``, the shape every gate reads (docs/first-block-indicator.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .sea_filter import index_of


@dataclass(frozen=True)
class VisionTokens:
    """Where a call's vision tokens sit in the first block's input ``[B, N, D]``: a (T, H, W) ``grid`` stored frame by
    frame from token ``start``; ``noisy_frames`` the frames read (None: all; diffusers leaves conditioned frames out).
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
        """Vision tokens in the sequence."""
        return math.prod(self.grid)

    @property
    def frames_read(self) -> int:
        """Frames the indicator reads."""
        return self.grid[0] if self.noisy_frames is None else len(self.noisy_frames)


def first_block_view(modulated: torch.Tensor, tokens: VisionTokens) -> torch.Tensor:
    """The vision tokens of ``modulated`` ``[B, N, D]`` as ``[B, D, T', H, W]`` (a view unless frames are skipped in
    between); ValueError when they do not fit the sequence."""
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
    """:func:`first_block_view` of the video tokens opening ``modulated`` without the frames ``frame_is_clean`` ``[B,
    T]`` flags in any item (one host read); ValueError when every frame is conditioned."""
    clean = frame_is_clean.any(dim=0).tolist()
    noisy = tuple(frame for frame, given in enumerate(clean) if not given)
    if not noisy:
        raise ValueError("every frame is conditioned: the first block's view has no noisy frame")
    return first_block_view(modulated, VisionTokens(tuple(grid), 0, noisy))
