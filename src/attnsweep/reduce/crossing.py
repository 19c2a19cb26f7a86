"""Level crossings on a grid, seed means and bootstrap draws over seeds, and a boundary's variables:
the generic part of a phase boundary (its interval: :mod:`attnsweep.reduce.inversion`)."""

from __future__ import annotations

import numpy as np

from attnsweep.reduce.inversion import FLAGS, METHOD, CrossingInterval


def first_crossing(x: np.ndarray, y: np.ndarray, level: np.ndarray | float,
                   present: np.ndarray | None = None) -> np.ndarray:
    """First upward crossing of ``level`` by ``y`` along the last axis, linearly interpolated.

    Parameters
    ----------
    x : (G,) increasing grid.
    y : (..., G) values; ``level`` broadcasts against ``y[..., 0]``.
    present : (..., G) bool, optional
        Where ``y`` was computed: a row of a refined sweep holds some grid values only, and its
        crossing interpolates between neighbours it holds (default: every value is present).

    Returns
    -------
    (...) crossing abscissae; NaN where ``y`` starts at or above the level (the crossing lies
    below the grid) or never reaches it (above the grid), or where y has NaNs at a present value.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    level = np.broadcast_to(np.asarray(level, dtype=float)[..., None], y.shape)
    above = y >= level
    size = y.shape[-1]
    if present is None:
        nxt = np.broadcast_to(np.arange(1, size + 1), y.shape)
        valid = np.ones(y.shape, dtype=bool)
        first = np.zeros(y.shape[:-1], dtype=int)
    else:  # each present value's next present neighbour (size where none)
        valid = np.broadcast_to(present, y.shape)
        at = np.where(valid, np.arange(size), size)
        following = np.minimum.accumulate(at[..., ::-1], axis=-1)[..., ::-1]
        nxt = np.concatenate([following[..., 1:], np.full((*y.shape[:-1], 1), size)], -1)
        first = np.minimum(following[..., 0], size - 1)
    pair = valid & (nxt < size)
    above_next = np.take_along_axis(above, np.minimum(nxt, size - 1), -1)
    up = (pair & ~above & above_next)[..., :-1]
    starts_below = ~np.take_along_axis(above, first[..., None], -1)[..., 0] & valid.any(-1)
    has = up.any(-1) & starts_below & ~(np.isnan(y) & valid).any(-1)
    k = np.where(has, up.argmax(-1), 0)
    k1 = np.take_along_axis(nxt, k[..., None], -1)[..., 0]
    k1 = np.minimum(k1, size - 1)
    y0 = np.take_along_axis(y, k[..., None], -1)[..., 0]
    y1 = np.take_along_axis(y, k1[..., None], -1)[..., 0]
    lv = level[..., 0]
    t = (lv - y0) / np.where(y1 == y0, 1.0, y1 - y0)
    out = x[k] + t * (x[k1] - x[k])
    return np.where(has, out, np.nan)


def max_slope(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Midpoint of the grid interval where ``dy/dx`` is largest, along the last axis."""
    x = np.asarray(x, dtype=float)
    slope = np.diff(y, axis=-1) / np.diff(x)
    mid = (x[:-1] + x[1:]) / 2
    valid = ~np.isnan(slope).all(-1)
    k = np.nanargmax(np.where(np.isnan(slope), -np.inf, slope), axis=-1)
    return np.where(valid, mid[k], np.nan)


def resampled_means(samples: np.ndarray, resamples: int = 1000, seed: int = 0,
                    chunk_bytes: int = 1 << 28) -> np.ndarray:
    """Means over ``resamples`` bootstrap draws of the seeds: (..., S, G) samples give (..., R, G).

    The draws are gathered a chunk at a time (at most ``chunk_bytes`` of resampled seeds), not all
    R x S at once: 1000 draws of 256 seeds of a 243-row, 61-time sweep would be 28 GiB. Each draw's
    mean is computed alone either way, so the chunk size changes no bit."""
    samples = np.asarray(samples, dtype=float)
    n_seeds = samples.shape[-2]
    idx = np.random.default_rng(seed).integers(0, n_seeds, size=(resamples, n_seeds))
    step = max(1, chunk_bytes // max(samples.nbytes, 1))
    out = np.empty((*samples.shape[:-2], resamples, samples.shape[-1]))
    for start in range(0, resamples, step):
        out[..., start:start + step, :] = samples[..., idx[start:start + step], :].mean(-2)
    return out


def seed_mean(samples: np.ndarray, present: np.ndarray | None = None) -> np.ndarray:
    """Mean over the present seeds (axis -2) of (..., S, G) samples; NaN where none is present.
    ``present`` None: every seed is (a product grid), the plain mean."""
    if present is None:
        return samples.mean(-2)
    count = present.sum(-2)
    total = np.where(present, samples, 0.0).sum(-2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def held_means(samples: np.ndarray, present: np.ndarray, resamples: int,
               seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap means (R, G) of one row's (S, G) samples whose values hold different seeds, and
    where each draw holds a value (R, G).

    Each draw takes the row's S seeds (those held at some value) with replacement, as for a product
    grid, and each value's mean is over the drawn seeds it holds (a ratio mean). Values that share
    seeds share their draws (paired, as common random numbers make them), and to first order each
    value's mean varies as the plain bootstrap of its own m seeds does, (m - 1)/m of s^2/m.
    Resampling each group of seeds held at the same values within itself (a stratified bootstrap)
    keeps only (m - H)/(m - 1) of that with H groups among the m seeds: a design that adds seeds a
    few at a time (many small groups) would look more precise than it is. A draw that holds none
    of a value's seeds leaves that value out of its curve.
    """
    used = np.flatnonzero(present.any(-1))
    m = len(used)
    picks = np.random.default_rng(seed).integers(0, m, size=(resamples, m))
    weights = np.bincount((picks + m * np.arange(resamples)[:, None]).ravel(), minlength=resamples * m)
    weights = weights.reshape(resamples, m).astype(float)  # times each draw takes each seed
    total = weights @ np.where(present[used], samples[used], 0.0)
    count = weights @ present[used]
    held = count > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(held, total / np.where(held, count, 1.0), np.nan), held


def error_bars(estimate: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """matplotlib's (2, N) ``yerr`` of an interval [low, high] around ``estimate``, clipped at 0;
    a NaN end (the interval reaches past the grid, or none was given) draws no bar on its side."""
    return np.clip(np.nan_to_num(np.vstack([estimate - low, high - estimate])), 0, None)


def interval_variables(name: str, dims: tuple[str, ...], found: CrossingInterval, long_name: str,
                       units: str = "1", scale: np.ndarray | float = 1.0) -> dict[str, tuple]:
    """A boundary ``name`` over ``dims`` as Dataset variables: the estimate, its 95% interval
    ``<name>_low``, ``<name>_high``, and how it was made: ``<name>_seeds`` (the fewest seeds of the
    values the crossing is read from), ``<name>_spacing`` (the grid interval holding it) and
    ``<name>_flag`` (why an end is NaN, CF flags). ``scale`` multiplies the abscissae (a unit)."""
    def variable(values: np.ndarray, what: str, unit: str = units, **attrs) -> tuple:
        return dims, values, {"long_name": what, "units": unit, **attrs}

    ends = f"of the 95% confidence interval of {name} (NaN: see {name}_flag)"
    return {
        name: variable(found.estimate * scale, long_name, interval_method=METHOD),
        f"{name}_low": variable(found.low * scale, f"lower end {ends}"),
        f"{name}_high": variable(found.high * scale, f"upper end {ends}"),
        f"{name}_seeds": variable(found.seeds, f"fewest seeds at the grid values {name} is interpolated from", "1"),
        f"{name}_spacing": variable(found.spacing * scale, f"grid spacing of the values bracketing {name}"),
        f"{name}_flag": (dims, found.flag.astype(np.int8), {
            "long_name": f"how the interval of {name} ends", "units": "1", "flag_values": list(range(len(FLAGS))),
            "flag_meanings": " ".join(FLAGS)}),
    }


#: What :func:`interval_variables` adds to a boundary's name: ``<name>_<part>``.
INTERVAL_PARTS = ("low", "high", "seeds", "spacing", "flag")


def interval_columns(name: str) -> list[str]:
    """The interval variables of the boundary ``name``, in order: its ``boundary.zarr`` variables
    after ``name`` and, by the same names, its ``boundary.csv`` columns."""
    return [f"{name}_{part}" for part in INTERVAL_PARTS]
