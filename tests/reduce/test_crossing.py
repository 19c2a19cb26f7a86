"""Level crossings on a grid and bootstrap draws over seeds, against curves whose crossing is known exactly
(the interval: test_inversion.py)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from attnsweep.reduce.crossing import first_crossing, held_means, max_slope, seed_mean


def test_linear_crossing_is_exact() -> None:
    x = np.linspace(0.0, 10.0, 11)
    y = np.stack([x / 10, (x - 2) / 4])  # cross 0.35 at 3.5 and at 3.4
    np.testing.assert_allclose(first_crossing(x, y, 0.35), [3.5, 3.4])


def test_level_broadcasts_per_curve() -> None:
    x = np.arange(5.0)
    y = np.tile(x / 4, (3, 1))
    np.testing.assert_allclose(first_crossing(x, y, np.array([0.125, 0.5, 0.875])), [0.5, 2.0, 3.5])


def test_no_crossing_inside_the_grid_is_nan() -> None:
    x = np.arange(4.0)
    above, below, nan = np.full(4, 0.9), np.full(4, 0.1), np.array([0.0, np.nan, 1.0, 1.0])
    assert np.isnan(first_crossing(x, np.stack([above, below, nan]), 0.5)).all()


def test_first_of_several_upward_crossings() -> None:
    x = np.arange(6.0)
    y = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    assert first_crossing(x, y, 0.5) == 0.5


def test_max_slope_of_a_step() -> None:
    x = np.linspace(0.0, 4.0, 9)
    assert max_slope(x, np.tanh(8 * (x - 2.25))) == 2.25


def test_error_bars_of_an_interval_that_misses_its_estimate():
    """An interval given that does not contain its estimate draws a bar of 0 on that side, not a
    negative one (matplotlib refuses negative yerr), and a NaN end draws no bar."""
    from attnsweep.reduce.crossing import error_bars

    bars = error_bars(np.array([1.0, 5.0, 2.0]), np.array([0.5, 5.5, np.nan]), np.array([1.5, 6.0, 3.0]))
    np.testing.assert_array_equal(bars, [[0.5, 0.0, 0.0], [0.5, 1.0, 1.0]])


# ------------------------------------------------------------------ rows of a refined sweep
def test_a_row_holding_some_values_crosses_between_the_ones_it_holds() -> None:
    """With ``present``, the crossing of a row is that of its own values alone: the same as on
    the compressed grid, whatever the (NaN) values it does not hold."""
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 1.0, 11)
    y = np.sort(rng.uniform(size=(50, 11)), axis=-1)
    present = rng.uniform(size=(50, 11)) < 0.6
    level = rng.uniform(0.2, 0.8, size=50)
    got = first_crossing(x, np.where(present, y, np.nan), level, present)
    for i in range(50):
        held = present[i]
        want = first_crossing(x[held], y[i, held], level[i]) if held.sum() >= 2 else np.nan
        np.testing.assert_equal(got[i], want)


def test_nan_at_a_held_value_is_no_crossing() -> None:
    """A held value that is NaN (a failed computation) is a hole: no crossing, no silent
    interpolation across it."""
    x = np.arange(4.0)
    y = np.array([0.0, np.nan, 1.0, 1.0])
    assert np.isnan(first_crossing(x, y, 0.5, np.array([True, True, True, False])))
    assert first_crossing(x, y, 0.5, np.array([True, False, True, False])) == 1.0


def test_held_means_draw_each_value_from_its_own_seeds() -> None:
    """Seeds 0-3 everywhere, seeds 4-7 at two values: each draw takes 8 of the 8 seeds, and a
    value's mean is over the drawn seeds it holds. Their mean is the value's seed mean; at a value
    holding all 8 the variance is the plain bootstrap's s^2/8 (ddof 0); at a value holding 4, whose
    draw count K is Binomial(8, 1/2), it is s^2 E[1/K | K > 0], and draws with K = 0 leave it out."""
    rng = np.random.default_rng(5)
    samples = rng.normal(size=(8, 5))
    present = np.ones((8, 5), bool)
    present[4:, [0, 1, 4]] = False
    samples[:, 1] = samples[:, 0] + 1.0
    samples[~present] = np.nan
    means, held = held_means(samples, present, 40000)
    k = np.arange(1, 9)
    inverse_count = (stats.binom.pmf(k, 8, 0.5) / k).sum() / stats.binom.sf(0, 8, 0.5)
    np.testing.assert_allclose(np.nanmean(means, 0), seed_mean(samples, present), atol=0.01)
    np.testing.assert_allclose(np.nanvar(means, 0)[[0, 2]], [samples[:4, 0].var() * inverse_count,
                                                             samples[:, 2].var() / 8], rtol=0.04)
    np.testing.assert_allclose((~held[:, 0]).mean(), 0.5**8, atol=0.001)
    np.testing.assert_array_equal(held[:, 2], True)
    np.testing.assert_allclose(means[:, 1], means[:, 0] + 1.0)  # paired: the same draws


def test_resampled_means_in_chunks_equal_one_gather_bit_for_bit() -> None:
    """The chunked gather (bounded memory) against the whole R x S gather at once, on rows,
    seeds and values of different sizes, from one draw a chunk to all draws in one."""
    from attnsweep.reduce.crossing import resampled_means

    rng = np.random.default_rng(3)
    for shape in [(2, 3, 17, 5), (40, 1), (4, 64, 61)]:
        samples = rng.normal(size=shape)
        idx = np.random.default_rng(7).integers(0, shape[-2], size=(100, shape[-2]))
        whole = samples[..., idx, :].mean(-2)
        for chunk in (1, samples.nbytes, 10 * samples.nbytes, 1 << 28):
            np.testing.assert_array_equal(resampled_means(samples, 100, 7, chunk_bytes=chunk), whole)
