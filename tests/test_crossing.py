"""Level crossings and their bootstrap, against curves whose crossing is known exactly."""

from __future__ import annotations

import numpy as np

from attnsweep.crossing import bootstrap_crossing, first_crossing, max_slope


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


def test_bootstrap_interval_covers_the_truth() -> None:
    """Noisy seeds around a known curve: the 95% interval brackets the true crossing, and
    shrinks with more seeds."""
    rng = np.random.default_rng(1)
    x = np.linspace(0.0, 4.0, 41)
    truth = 1 / (1 + np.exp(-3 * (x - 2.0)))  # crosses 1/2 at x = 2
    widths = []
    for seeds in (8, 64):
        samples = truth + rng.normal(0.0, 0.05, size=(seeds, x.size))
        est, low, high = bootstrap_crossing(x, samples, 0.5, resamples=500)
        assert low <= 2.0 <= high
        assert abs(est - 2.0) < 0.1
        widths.append(high - low)
    assert widths[1] < widths[0]


def test_single_seed_has_no_interval() -> None:
    x = np.arange(3.0)
    est, low, high = bootstrap_crossing(x, np.array([[0.0, 0.5, 1.0]]), 0.25)
    assert est == 0.5 and np.isnan(low) and np.isnan(high)


def test_error_bars_of_an_interval_that_misses_its_estimate():
    """A percentile interval need not contain its estimate: the bar on that side is 0, not
    negative (matplotlib refuses negative yerr), and a NaN bound draws no bar."""
    from attnsweep.crossing import error_bars

    bars = error_bars(np.array([1.0, 5.0, 2.0]), np.array([0.5, 5.5, np.nan]), np.array([1.5, 6.0, 3.0]))
    np.testing.assert_array_equal(bars, [[0.5, 0.0, 0.0], [0.5, 1.0, 1.0]])
