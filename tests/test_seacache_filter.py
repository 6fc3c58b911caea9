"""SEA filter and gain (docs/algorithm.md §3).

The reference gain below is built here from the formula, on the full FFT grid, as an oracle independent of the
package's rfft half-grid.
"""

import pytest
import torch

from seacache_core import GainCache, SeaCacheConfig, SeaCacheRun, sea_filter_float32
from seacache_testing.allocation_counters import CountingGainCache


def _latent(shape=(2, 3, 5, 8, 10), seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _reference_gain(shape, sigma, power):
    """Full-grid SEA gain from the formula: per-axis Wiener factor a*P / (a^2*P + b^2), P = 1/|f|^power, mean 1."""
    a, b = 1 - sigma, sigma
    grid = torch.ones((), dtype=torch.float64)
    for n in shape:
        prior = 1 / (torch.fft.fftfreq(n, dtype=torch.float64).abs() ** power + 1e-16)
        grid = grid.unsqueeze(-1) * (a * prior / (a * a * prior + b * b + 1e-16))
    return grid / grid.mean()


def _rfft_gain(shape, sigma, power):
    return GainCache().rfft_gain(shape, sigma, power, "cpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_filter_runs_in_float32_on_the_upcast(dtype):
    x = _latent(dtype=dtype)
    y = sea_filter_float32(x, 0.6)
    assert y.shape == x.shape and y.dtype == torch.float32
    assert torch.equal(y, sea_filter_float32(x.float(), 0.6))
    assert not torch.equal(y, x.float())


@pytest.mark.parametrize("shape", [(5, 8, 10), (4, 9, 7), (1, 6, 11)])
@pytest.mark.parametrize("sigma", [0.05, 0.5, 0.7, 0.97])
@pytest.mark.parametrize("power", [2.0, 3.0])
def test_gain_matches_formula_with_mean_one(shape, sigma, power):
    gain = _rfft_gain(shape, sigma, power)
    expected = _reference_gain(shape, sigma, power)[..., : shape[-1] // 2 + 1]
    assert gain.dtype == torch.float32 and gain.shape == expected.shape
    assert torch.isfinite(gain).all() and (gain > 0).all()
    torch.testing.assert_close(gain.double(), expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("sigma", [0.0, 1.0])
def test_gain_finite_at_the_sigma_ends(sigma):
    gain = _rfft_gain((5, 8, 10), sigma, 3.0)
    assert torch.isfinite(gain).all() and (gain > 0).all()


@pytest.mark.parametrize("n", [2, 7, 10, 45, 80])
@pytest.mark.parametrize("sigma", [0.1, 0.5, 0.9])
def test_gain_low_pass_along_an_axis(n, sigma):
    g = _rfft_gain((n,), sigma, 3.0)  # bins 0 .. n // 2, in increasing |f|
    assert (g.diff() <= 0).all()
    if n > 2:
        assert g[0] > g[-1]


@pytest.mark.parametrize("shape", [(2, 3, 5, 8, 10), (1, 2, 4, 9, 7), (1, 2, 3, 6, 11)])
def test_rfft_path_matches_full_fft(shape):
    x = _latent(shape)
    gain = _reference_gain(shape[-3:], 0.4, 3.0)
    full = torch.fft.ifftn(torch.fft.fftn(x.double(), dim=(-3, -2, -1)) * gain, dim=(-3, -2, -1)).real
    torch.testing.assert_close(sea_filter_float32(x, 0.4), full.float(), rtol=0, atol=1e-5)


def test_filter_is_linear():
    x, y = _latent(seed=1), _latent(seed=2)
    a, b = 1.7, -0.3
    torch.testing.assert_close(
        sea_filter_float32(a * x + b * y, 0.5),
        a * sea_filter_float32(x, 0.5) + b * sea_filter_float32(y, 0.5),
        rtol=1e-5,
        atol=1e-5,
    )


def test_constant_in_constant_out():
    x = torch.full((1, 2, 5, 8, 10), 3.0)
    y = sea_filter_float32(x, 0.8)
    assert torch.allclose(y, y.flatten()[0].expand_as(y), rtol=1e-6, atol=0)
    assert y.flatten()[0] > 3.0  # the DC gain exceeds the mean gain


def test_attenuates_high_frequencies_by_the_gain():
    n = 8
    w = torch.arange(n)
    nyquist = ((-1.0) ** w).expand(1, 1, 1, 1, n)  # a pure Nyquist pattern along W
    dc = torch.ones(1, 1, 1, 1, n)
    gain = _reference_gain((1, 1, n), 0.5, 3.0).float()
    torch.testing.assert_close(sea_filter_float32(nyquist, 0.5), nyquist * gain[0, 0, n // 2], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sea_filter_float32(dc, 0.5), dc * gain[0, 0, 0], rtol=1e-5, atol=1e-6)
    assert gain[0, 0, n // 2] < gain[0, 0, 0]


def test_channels_are_never_mixed():
    x = _latent()
    y = x.clone()
    y[:, 1] += 5.0 * torch.randn_like(y[:, 1])
    fx, fy = sea_filter_float32(x, 0.5), sea_filter_float32(y, 0.5)
    assert torch.equal(fx[:, 0], fy[:, 0]) and torch.equal(fx[:, 2], fy[:, 2])
    assert not torch.allclose(fx[:, 1], fy[:, 1])


def test_invalid_dims_and_sigma_raise():
    x = _latent()
    with pytest.raises(ValueError, match="dims"):
        sea_filter_float32(x, 0.5, dims=(-1, 4))
    with pytest.raises(ValueError, match="dims"):
        sea_filter_float32(x, 0.5, dims=(-6,))
    with pytest.raises(ValueError, match="sigma"):
        sea_filter_float32(x, float("nan"))


def test_gain_cache_builds_once_per_shape_and_sigma():
    cache = CountingGainCache()
    for batch in (1, 2, 4):
        sea_filter_float32(_latent((batch, 3, 5, 8, 10)), 0.5, cache=cache)
    assert cache.builds == 1
    sea_filter_float32(_latent(), 0.4, cache=cache)
    sea_filter_float32(_latent((1, 3, 5, 8, 12)), 0.4, cache=cache)
    assert cache.builds == 3
    x = _latent()
    assert torch.equal(sea_filter_float32(x, 0.4, cache=cache), sea_filter_float32(x, 0.4))


def test_gate_power_auto_video_3_image_2():
    gate = SeaCacheRun(SeaCacheConfig(threshold=0.25, gate="sea"), [0.5, 0.0])
    video = _latent((1, 3, 5, 8, 10))
    gate.commit(gate.decide(video, 0.5, ["v"]), torch.zeros(1, 1))
    torch.testing.assert_close(gate.states["v"].indicator, sea_filter_float32(video, 0.5, power=3.0))
    assert not torch.allclose(gate.states["v"].indicator, sea_filter_float32(video, 0.5, power=2.0))
    image = _latent((1, 3, 8, 10))
    gate.commit(gate.decide(image, 0.5, ["i"]), torch.zeros(1, 1))
    torch.testing.assert_close(gate.states["i"].indicator, sea_filter_float32(image, 0.5, power=2.0, dims=(-2, -1)))
    one_frame = _latent((1, 3, 1, 8, 10))
    gate.commit(gate.decide(one_frame, 0.5, ["f"]), torch.zeros(1, 1))
    torch.testing.assert_close(gate.states["f"].indicator, sea_filter_float32(one_frame, 0.5, power=2.0))
    fixed = SeaCacheRun(SeaCacheConfig(threshold=0.25, gate="sea", power=1.5), [0.5, 0.0])
    fixed.commit(fixed.decide(video, 0.5, ["v"]), torch.zeros(1, 1))
    torch.testing.assert_close(fixed.states["v"].indicator, sea_filter_float32(video, 0.5, power=1.5))
