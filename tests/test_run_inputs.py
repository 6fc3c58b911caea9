"""Run-start checks of a sampling run's inputs (nodes/seacache/run_inputs.py): latent rank, NaN/Inf, the schedule."""

import math
import re

import pytest
import torch

from seacache_testing import comfyui_harness

run_inputs = comfyui_harness.import_pack_module("nodes.seacache.run_inputs")  # imports nothing of ComfyUI
refuse_bad_schedule, refuse_latent_rank, refuse_non_finite = (
    run_inputs.refuse_bad_schedule, run_inputs.refuse_latent_rank, run_inputs.refuse_non_finite)


@pytest.mark.parametrize("shape", [(1, 16, 8, 8), (2, 16, 3, 8, 8)])
def test_image_and_video_latents_pass(shape):
    refuse_latent_rank(shape)


@pytest.mark.parametrize("shape", [(1, 64, 215), (1, 2, 3, 4, 5, 6), (8,)])
def test_other_latent_ranks_are_refused_naming_shape_and_fix(shape):
    with pytest.raises(ValueError, match=r"image and video models.*" + re.escape(str(shape)) + r".*without SeaCache Apply"):
        refuse_latent_rank(shape)


def test_finite_tensors_pass_and_each_bad_one_is_named():
    good = torch.randn(1, 4, 8, 8)
    refuse_non_finite({"input latent": good, "noise": good.clone()})
    refuse_non_finite({})
    for value in (math.nan, math.inf, -math.inf):
        bad = good.clone()
        bad[0, 1, 2, 3] = value
        with pytest.raises(ValueError, match=r"The noise given to the sampler hold NaN or Inf"):
            refuse_non_finite({"input latent": good, "noise": bad})
        with pytest.raises(ValueError, match=r"The input latent and the noise given"):
            refuse_non_finite({"input latent": bad, "noise": bad})


@pytest.mark.parametrize("sigmas", [[1.0, 0.5, 0.0], [14.6, 3.0, 3.0, 0.03, 0.0], [1.0], [0.0, 0.0]])
def test_falling_schedules_pass_including_equal_neighbours(sigmas):
    refuse_bad_schedule(sigmas)


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_non_finite_sigmas_are_refused(value):
    with pytest.raises(ValueError, match="sigma schedule holds NaN or Inf"):
        refuse_bad_schedule([1.0, value, 0.0])


@pytest.mark.parametrize(("sigmas", "where"), [([1.0, 0.5, 0.7, 0.0], "from 0.5 to 0.7 at step 2"),
                                               ([0.0, 0.5, 1.0], "from 0 to 0.5 at step 1")])
def test_a_rising_schedule_is_refused_naming_the_step_and_fix(sigmas, where):
    with pytest.raises(ValueError, match=where + r".*FlipSigmas.*without SeaCache Apply"):
        refuse_bad_schedule(sigmas)
