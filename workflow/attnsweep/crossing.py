"""Level crossings on a grid, with a bootstrap over seeds: the generic part of a phase boundary."""

from __future__ import annotations

import warnings

import numpy as np


def first_crossing(x: np.ndarray, y: np.ndarray, level: np.ndarray | float) -> np.ndarray:
    """First upward crossing of ``level`` by ``y`` along the last axis, linearly interpolated.

    Parameters
    ----------
    x : (G,) increasing grid.
    y : (..., G) values; ``level`` broadcasts against ``y[..., 0]``.

    Returns
    -------
    (...) crossing abscissae; NaN where ``y`` starts at or above the level (the crossing lies
    below the grid) or never reaches it (above the grid), or where y has NaNs.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    level = np.broadcast_to(np.asarray(level, dtype=float)[..., None], y.shape)
    above = y >= level
    up = ~above[..., :-1] & above[..., 1:]
    has = up.any(-1) & ~above[..., 0] & ~np.isnan(y).any(-1)
    k = np.where(has, up.argmax(-1), 0)
    y0 = np.take_along_axis(y, k[..., None], -1)[..., 0]
    y1 = np.take_along_axis(y, k[..., None] + 1, -1)[..., 0]
    lv = level[..., 0]
    t = (lv - y0) / np.where(y1 == y0, 1.0, y1 - y0)
    out = x[k] + t * (x[np.minimum(k + 1, len(x) - 1)] - x[k])
    return np.where(has, out, np.nan)


def max_slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Midpoint of the grid interval where ``dy/dx`` is largest, along the last axis."""
    x = np.asarray(x, dtype=float)
    slope = np.diff(y, axis=-1) / np.diff(x)
    mid = (x[:-1] + x[1:]) / 2
    valid = ~np.isnan(slope).all(-1)
    k = np.nanargmax(np.where(np.isnan(slope), -np.inf, slope), axis=-1)
    return np.where(valid, mid[k], np.nan)


def resampled_means(samples: np.ndarray, resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """Means over ``resamples`` bootstrap draws of the seeds: (..., S, G) samples give (..., R, G)."""
    samples = np.asarray(samples, dtype=float)
    n_seeds = samples.shape[-2]
    idx = np.random.default_rng(seed).integers(0, n_seeds, size=(resamples, n_seeds))
    return samples[..., idx, :].mean(-2)


def bootstrap_crossing(
    x: np.ndarray,
    samples: np.ndarray,
    level: np.ndarray | float,
    resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Crossing of the seed mean and its percentile bootstrap interval over seeds.

    ``samples`` has shape (..., S, G): S seeds of a curve on the grid ``x``. Returns the
    estimate and the lower and upper ends of the ``confidence`` interval, each (...). With a
    single seed the interval is NaN. Resampled curves that never cross are left out of the
    percentiles.
    """
    samples = np.asarray(samples, dtype=float)
    estimate = first_crossing(x, samples.mean(-2), level)
    n_seeds = samples.shape[-2]
    if n_seeds < 2:
        nan = np.full_like(estimate, np.nan)
        return estimate, nan, nan
    boot = first_crossing(x, resampled_means(samples, resamples, seed), np.asarray(level, dtype=float)[..., None])
    tail = (1 - confidence) / 2 * 100
    enough = np.isfinite(boot).sum(-1) >= resamples // 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows, masked below
        low, high = np.nanpercentile(boot, [tail, 100 - tail], axis=-1)
    return estimate, np.where(enough, low, np.nan), np.where(enough, high, np.nan)


def error_bars(estimate: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """matplotlib's (2, N) ``yerr`` of an interval [low, high] around ``estimate``: clipped at 0,
    as a percentile bootstrap interval need not contain its estimate; NaN as no bar."""
    return np.clip(np.nan_to_num(np.vstack([estimate - low, high - estimate])), 0, None)
