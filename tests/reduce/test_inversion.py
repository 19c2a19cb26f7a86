"""The crossing interval by an inverted t test, against scipy's t test, closed forms and coverage
of known crossings."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import interpolate, stats

from attnsweep.reduce.inversion import FLAGS, MIN_SEEDS, crossing_interval


def stencil(x: np.ndarray, u: float, order: int) -> np.ndarray:
    """The grid values the interpolant at u reads (docs/statistics.md): the bracketing pair and
    its neighbours, shifted inwards at the grid's ends."""
    k = min(np.searchsorted(x, u, side="right") - 1, len(x) - 2)
    width = min(order + 1, len(x))
    start = int(np.clip(k - (width - 2) // 2, 0, len(x) - width))
    return np.arange(start, start + width)


def seed_values(x: np.ndarray, samples: np.ndarray, u: float, order: int) -> np.ndarray:
    """Each seed's curve at u through scipy's Lagrange interpolation of its stencil."""
    idx = stencil(x, u, order)
    return np.array([interpolate.BarycentricInterpolator(x[idx], row[idx])(u) for row in samples])


@pytest.mark.parametrize("order", [1, 3])
def test_the_ends_are_where_scipys_t_test_rejects_at_5_percent(order: int) -> None:
    """At each end of the interval a one-sample t test of the seeds' interpolated values against
    the level has p = 0.05 (|t| = t_{S-1, 0.975}); at the estimate the seed mean is the level.
    Bisection to 2^-40 of a grid interval of 0.25 leaves |dp| well under 1e-6 (dp/du is O(1/se)
    with se ~ 0.02 here)."""
    rng = np.random.default_rng(11)
    x = np.linspace(0.0, 2.0, 9)
    samples = np.tanh(2 * (x - 0.9)) + rng.normal(0.0, 0.15, (12, 1)) + rng.normal(0.0, 0.05, (12, x.size))
    found = crossing_interval(x, samples, 0.2, order=order, bracket=False)
    assert found.flag == FLAGS.index("bounded") and found.seeds == 12 and found.spacing == 0.25
    assert abs(seed_values(x, samples, float(found.estimate), order).mean() - 0.2) < 1e-9
    for end in (found.low, found.high):
        p = stats.ttest_1samp(seed_values(x, samples, float(end), order), 0.2).pvalue
        assert abs(p - 0.05) < 1e-6
    assert found.low < found.estimate < found.high


def test_coverage_of_a_line_with_gaussian_seeds_is_nominal() -> None:
    """A straight line with Gaussian noise per seed and value: the t test is exact there at any
    seed count, so the 95% intervals of 600 independent rows of 4 seeds (allowed here) cover the
    true crossing with probability 0.95; the count's standard deviation is
    sqrt(0.95 * 0.05 / 600) = 0.0089, and the test allows 3 of them each side. The percentile
    bootstrap (it resamples with the variance s^2 (S - 1)/S / S and normal tails) covers about
    0.83 here, and a normal quantile in place of Student's 0.86: both fail."""
    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 1.0, 11)
    truth = 0.4372
    samples = 2 * (x - truth) + rng.normal(0.0, 0.3, (600, 4, x.size))
    found = crossing_interval(x, samples, 0.0, min_seeds=2)
    coverage = ((found.low <= truth) & (truth <= found.high)).mean()
    assert 0.95 - 3 * 0.0089 <= coverage <= 0.95 + 3 * 0.0089


def test_coverage_when_each_value_holds_its_own_seed_count() -> None:
    """A refined row: seeds shift the whole curve (paired, as common random numbers do) plus
    noise per value, and each value holds its own count (4 to 64, many seeds at the crossing).
    The test's own intervals (without the bracket, which at this noise would hold the crossing
    alone) of 1000 rows cover the true crossing (x = 1) in at least 0.95 - 3 x 0.0069 = 0.929 of
    rows (0.0069: the binomial standard deviation at 1000 rows)."""
    rng = np.random.default_rng(7)
    x = np.linspace(0.0, 2.0, 21)
    counts = np.clip((64 * np.exp(-(((x - 1.0) / 0.3) ** 2))).astype(int) + rng.integers(0, 12, x.size), 4, 64)
    present = np.arange(64)[:, None] < counts
    samples = x / 2 + rng.normal(0.0, 0.1, (1000, 64, 1)) + rng.normal(0.0, 0.03, (1000, 64, x.size))
    found = crossing_interval(x, np.where(present, samples, np.nan), 0.5, present=present, bracket=False)
    assert ((found.low <= 1.0) & (found.high >= 1.0)).mean() >= 0.929
    assert (found.seeds >= counts.min()).all()


def test_every_value_held_is_the_product_grid_bit_for_bit() -> None:
    rng = np.random.default_rng(4)
    x = np.linspace(0.0, 1.0, 9)
    samples = x + rng.normal(0.0, 0.05, size=(3, 10, 9))
    plain = crossing_interval(x, samples, 0.5)
    held = crossing_interval(x, samples, 0.5, present=np.ones(samples.shape, bool))
    for name in ("estimate", "low", "high", "seeds", "spacing", "flag"):
        np.testing.assert_array_equal(getattr(plain, name), getattr(held, name))


def test_a_row_is_read_on_the_values_it_holds() -> None:
    """Values a row does not hold (NaN there) are skipped: the row's result is that of its
    compressed grid."""
    rng = np.random.default_rng(5)
    x = np.linspace(0.0, 1.0, 13)
    samples = x + rng.normal(0.0, 0.05, size=(10, 13))
    held = np.ones(13, bool)
    held[[2, 5, 6, 11]] = False
    present = np.broadcast_to(held, samples.shape)
    got = crossing_interval(x, np.where(present, samples, np.nan), 0.5, present=present)
    want = crossing_interval(x[held], samples[:, held], 0.5)
    for name in ("estimate", "low", "high", "seeds", "spacing", "flag"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))


def test_the_cubic_estimate_is_the_root_of_the_mean_through_four_values() -> None:
    """On a convex curve the chord's crossing is off by ~h^2 f''/(8 f'); the cubic's is the root
    of the cubic through the four values around the crossing (numpy's polynomial fit of 4 points
    is that interpolant), and is within O(h^4) of the truth."""
    x = np.linspace(0.0, 1.0, 11)
    truth = 0.4372
    mean = np.expm1(4 * (x - truth))
    samples = mean + np.array([[-0.01], [0.01]])  # two seeds with the curve as their mean
    found = crossing_interval(x, samples, 0.0, min_seeds=2)
    roots = np.roots(np.polyfit(x[3:7], mean[3:7], 3))
    root = roots[(abs(roots.imag) < 1e-12) & (roots.real > 0.4) & (roots.real < 0.5)].real
    assert found.estimate == pytest.approx(float(root[0]), abs=1e-10)
    chord = crossing_interval(x, samples, 0.0, order=1, min_seeds=2).estimate
    assert abs(found.estimate - truth) < 0.1 * abs(chord - truth)


def test_the_interval_holds_the_bracket_a_grid_does_not_resolve() -> None:
    """A steep logistic (width 0.02) crossing 1/2 at 0.4372 inside one grid interval of 0.1,
    with 256 seeds of small noise: the cubic through the four values around it misses the
    crossing by far more than the noise allows, so the test's own interval excludes it; the
    interval holds the bracketing pair [0.4, 0.5], and with it the crossing."""
    rng = np.random.default_rng(12)
    x = np.linspace(0.0, 1.0, 11)
    truth = 0.4372
    samples = 1 / (1 + np.exp(-(x - truth) / 0.02)) + rng.normal(0.0, 0.01, (256, x.size))
    bare = crossing_interval(x, samples, 0.5, bracket=False)
    found = crossing_interval(x, samples, 0.5)
    assert not bare.low <= truth <= bare.high
    assert found.estimate == bare.estimate and found.spacing == pytest.approx(0.1)
    assert found.low == min(bare.low, 0.4) and found.high == max(bare.high, 0.5)
    assert found.low <= truth <= found.high


def test_a_bump_is_bounded_by_its_rising_side() -> None:
    """The first crossing of a curve that rises through the level and falls back: the interval
    stops where the curve is significantly above the level, not at its far side."""
    rng = np.random.default_rng(8)
    x = np.linspace(0.0, 1.0, 41)
    samples = np.exp(-np.square((x - 0.6) / 0.15)) + rng.normal(0.0, 0.05, (16, x.size))
    found = crossing_interval(x, samples, 0.5)
    assert found.flag == FLAGS.index("bounded")
    assert 0.4 < found.low < found.estimate < found.high < 0.6


def test_flags_name_why_an_end_is_missing() -> None:
    x = np.linspace(0.0, 1.0, 11)
    rng = np.random.default_rng(9)
    noisy = 0.05 * (x - 0.5) + rng.normal(0.0, 0.2, (MIN_SEEDS, x.size))  # too flat to bound
    rows = np.stack([
        np.tile(x, (MIN_SEEDS, 1)) + rng.normal(0.0, 0.01, (MIN_SEEDS, x.size)),  # bounded
        np.full((MIN_SEEDS, x.size), 0.1),  # never reaches 0.5
        noisy,
    ])
    found = crossing_interval(x, rows, np.array([0.5, 0.5, noisy.mean(0)[5]]))
    assert [FLAGS[f] for f in found.flag[:2]] == ["bounded", "no_crossing"]
    assert FLAGS[found.flag[2]] in ("reaches_grid_start", "reaches_grid_end")
    assert np.isnan(found.low[2]) or np.isnan(found.high[2])
    few = crossing_interval(x, rows[:1, : MIN_SEEDS - 1], 0.5)
    assert FLAGS[int(few.flag[0])] == "too_few_seeds" and np.isnan(few.low) and np.isnan(few.high)
    assert np.isfinite(few.estimate) and few.seeds == MIN_SEEDS - 1


def test_the_result_does_not_depend_on_the_chunk() -> None:
    rng = np.random.default_rng(10)
    x = np.linspace(0.0, 1.0, 17)
    samples = x + rng.normal(0.0, 0.1, (7, 9, x.size))
    whole = crossing_interval(x, samples, 0.5)
    for chunk in (1, 1000, 1 << 30):
        part = crossing_interval(x, samples, 0.5, chunk=chunk)
        for name in ("estimate", "low", "high"):
            np.testing.assert_array_equal(getattr(part, name), getattr(whole, name))


def test_a_grid_that_does_not_increase_is_refused() -> None:
    with pytest.raises(ValueError, match="increase strictly"):
        crossing_interval(np.array([0.0, 0.0, 1.0]), np.zeros((8, 3)), 0.5)
