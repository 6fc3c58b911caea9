"""The reference sigma schedule equals diffusers' UniPC flow schedule bit for bit."""

import pytest
import torch

from cosmos3 import reference_sigmas


@pytest.mark.parametrize("steps,shift", [(35, 10.0), (35, 5.0), (20, 3.0), (1, 10.0)])
def test_matches_diffusers_unipc_flow_sigmas(steps, shift):
    diffusers = pytest.importorskip("diffusers")
    ref = diffusers.UniPCMultistepScheduler(use_flow_sigmas=True, flow_shift=shift, prediction_type="flow_prediction")
    ref.set_timesteps(steps)
    assert torch.equal(reference_sigmas(steps, shift), ref.sigmas.float())


def test_denoise_keeps_the_tail_of_a_longer_schedule():
    full = reference_sigmas(20, 5.0)
    half = reference_sigmas(10, 5.0, denoise=0.5)
    assert torch.equal(half, full[-11:])
    assert half[-1] == 0 and len(half) == 11


def test_steps_must_be_positive():
    with pytest.raises(ValueError, match="steps"):
        reference_sigmas(0, 10.0)
