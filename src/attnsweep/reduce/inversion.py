"""The crossing of a seed-mean curve and its confidence interval, by inverting a t test at each
abscissa (docs/statistics.md).

S seeds give S curves y_s on a grid x; the boundary is where the mean curve first crosses a
level L upward. Between grid values the curves are read through a local interpolant linear in
the data: at an abscissa u, y_s(u) = sum_i w_i(u) y_s(x_i) over a stencil of grid values (the
bracketing pair and its two neighbours for ``order`` 3, Lagrange's cubic; the pair alone for
``order`` 1, the chord). The estimate is where the interpolated seed mean crosses the level. A
crossing at u is tested by Student's t of the seeds' interpolated values,

    t(u) = (ybar(u) - L) / se(u),    se(u)^2 = c * sum_s (sum_i w_i(u) r_si / n_i)^2,

with r_si a seed's residual from its value's mean, n_i the seeds value i holds, c = m / (m - 1)
and m the fewest seeds of the stencil (on a product grid, se is the plain standard error of the
seeds' interpolated values). The confidence set is where |t(u)| <= t_{m-1, (1 + confidence)/2}:
with Gaussian seeds on a product grid it holds the interpolated truth with exactly the stated
confidence at any seed count, however the curve bends (for a straight line it is Fieller's
interval of a ratio, the ED50 problem). The interval runs from the first abscissa not rejected
to the first one past the estimate where the curve is significantly above the level (see
:meth:`_Rows._ends`); an end that reaches the grid's edge is NaN (the data cannot rule out a
crossing beyond the grid), and fewer than ``min_seeds`` seeds give no interval.

Between two grid values the data say only that the curve passes the level somewhere (it is
assumed monotone there): the interval always holds the grid interval of the estimate
(``bracket``), so it never claims more than the grid resolves; a polynomial through grid values
cannot place a step narrower than their spacing (benchmarks/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

#: Fewer seeds than this give no interval: with 4 seeds of a steep curve or of 0/1 outcomes the
#: t interval covers 91-92% (benchmarks/RESULTS.md, issue 63).
MIN_SEEDS = 8
#: Points per grid interval at which t is evaluated before the ends are found by bisection.
SUBDIVISIONS = 16
#: Bisection steps for an estimate or an interval end: 2^-40 of a grid interval.
BISECTIONS = 40
#: The interval's name in a boundary's attrs and boundary.csv.
METHOD = "inverted t test over seeds, cubic interpolation, holding the grid interval (docs/statistics.md)"
#: What each value of :attr:`CrossingInterval.flag` means (CF's ``flag_values``/``flag_meanings``).
FLAGS = ("bounded", "no_crossing", "too_few_seeds", "reaches_grid_start", "reaches_grid_end")


@dataclass(frozen=True)
class CrossingInterval:
    """Per row: the crossing, the interval's ends, the seeds it rests on, the grid spacing of the
    bracket and why an end is NaN (an index into :data:`FLAGS`; a run reaching both grid ends
    is flagged by its start)."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    seeds: np.ndarray
    spacing: np.ndarray
    flag: np.ndarray


def crossing_interval(x: np.ndarray, samples: np.ndarray, level: np.ndarray | float,
                      present: np.ndarray | None = None, confidence: float = 0.95, order: int = 3,
                      bracket: bool = True, min_seeds: int = MIN_SEEDS,
                      chunk: int = 1 << 23) -> CrossingInterval:
    """The first upward crossing of ``level`` by the seed mean of ``samples`` (..., S, G) on the
    increasing grid ``x`` (G,), and its ``confidence`` interval (module docstring).

    ``present`` (broadcasting against ``samples``) marks the (seed, value) pairs computed in a
    refined sweep, where values hold different seeds; each row is read on the values it holds.
    A NaN at a held value means no crossing. ``order`` 3 reads the curves through the cubic, 1
    through the chord; ``bracket`` False leaves out the grid interval, giving the test's own
    interval (benchmarks/interval_coverage.py compares them). ``chunk`` bounds the seeds x abscissae
    evaluated at once (memory only: the result does not depend on it)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 1 or np.any(np.diff(x) <= 0):
        at = int(np.argmax(np.diff(x) <= 0)) if x.ndim == 1 else 0
        raise ValueError(f"crossing_interval: the grid must increase strictly (a cubic cannot span a jump): "
                         f"x[{at}] = {x.ravel()[at]} is followed by {x.ravel()[at + 1:at + 2]}")
    samples = np.asarray(samples, dtype=float)
    lead = samples.shape[:-2]
    n_seeds, size = samples.shape[-2:]
    y = samples.reshape(-1, n_seeds, size)
    rows = y.shape[0]
    held = (np.ones(y.shape, dtype=bool) if present is None
            else np.broadcast_to(present, samples.shape).reshape(y.shape))
    lv = np.broadcast_to(np.asarray(level, dtype=float), lead).reshape(rows)
    out = {name: np.full(rows, np.nan) for name in ("estimate", "low", "high", "seeds", "spacing")}
    out["flag"] = np.full(rows, FLAGS.index("no_crossing"))
    values = held.any(1)  # (R, G): the values each row holds
    nan_held = (np.isnan(y) & held).any((1, 2))
    usable = (values.sum(1) >= 2) & ~nan_held & np.isfinite(lv)
    patterns, group = np.unique(values[usable], axis=0, return_inverse=True)
    which = np.flatnonzero(usable)
    for p, pattern in enumerate(patterns):
        r = which[group.ravel() == p]
        cols = np.flatnonzero(pattern)
        found = _Rows(x[cols], y[r][:, :, cols], held[r][:, :, cols], lv[r], confidence, order).solve(
            min_seeds, bracket, chunk)
        for name, array in found.items():
            out[name][r] = array
    return CrossingInterval(**{k: v.reshape(lead) for k, v in out.items()})


class _Rows:
    """Rows that hold the same grid values (all of them held by some seed)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, held: np.ndarray, level: np.ndarray,
                 confidence: float, order: int) -> None:
        self.x, self.level = x, level
        count = held.sum(1)  # (R, G) seeds per value
        self.count = count
        self.mean = np.where(held, y, 0.0).sum(1) / count
        self.scaled = np.where(held, y - self.mean[:, None, :], 0.0) / count[:, None, :]  # r_si / n_i
        self.width = min(order + 1, len(x))
        with np.errstate(invalid="ignore"):  # Student's quantile by the fewest seeds: NaN below 2
            self.critical = special.stdtrit(np.arange(count.max() + 1) - 1.0, (1 + confidence) / 2)

    def stencil(self, interval: np.ndarray) -> np.ndarray:
        """The grid values (..., width) each grid interval is read from: the bracketing pair and
        its neighbours, moved inwards at the grid's ends."""
        first = np.clip(interval - (self.width - 2) // 2, 0, len(self.x) - self.width)
        return first[..., None] + np.arange(self.width)

    def weights(self, interval: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The stencil of each grid interval and its Lagrange weights (..., width) at abscissae u."""
        idx = self.stencil(interval)
        nodes = self.x[idx]
        w = np.ones(idx.shape)
        for i in range(idx.shape[-1]):
            for j in range(idx.shape[-1]):
                if i != j:
                    w[..., i] *= (u - nodes[..., j]) / (nodes[..., i] - nodes[..., j])
        return idx, w

    def distance(self, interval: np.ndarray, u: np.ndarray) -> np.ndarray:
        """The interpolated mean minus the level at abscissae u (R, Q) in grid intervals ``interval``."""
        idx, w = self.weights(interval, u)
        return (w * self.mean[np.arange(len(u))[:, None, None], idx]).sum(-1) - self.level[:, None]

    def statistic(self, interval: np.ndarray, u: np.ndarray, chunk: int,
                  at: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """At abscissae u (R, Q) in grid intervals ``interval`` of rows ``at`` (default: every
        row): Student's t of a crossing at u and its critical value (rejected where |t| >
        critical; NaN without a variance: nothing rejected)."""
        idx, w = self.weights(interval, u)
        at = np.arange(len(u)) if at is None else at
        rows = at[:, None, None]
        z = (w * self.mean[rows, idx]).sum(-1) - self.level[at][:, None]
        fewest = self.count[rows, idx].min(-1)
        second = np.empty(u.shape)
        n_seeds = self.scaled.shape[1]
        step = max(1, chunk // max(1, n_seeds * u.shape[1] * idx.shape[-1]))
        for a in range(0, len(u), step):
            b = slice(a, a + step)
            each = np.einsum("rqws,rqw->rqs", self.scaled[rows[b], :, idx[b]], w[b])  # (r, Q, S)
            second[b] = np.square(each).sum(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            kappa2 = fewest / (fewest - 1.0) * second  # the mean's variance, unbiased on a product grid
            t = np.where(z == 0, 0.0, z / np.sqrt(kappa2))
        return t, self.critical[fewest]

    def solve(self, min_seeds: int, bracket: bool, chunk: int) -> dict[str, np.ndarray]:
        x, mean, lv = self.x, self.mean, self.level
        rows = len(mean)
        above = mean >= lv[:, None]
        up = ~above[:, :-1] & above[:, 1:]
        has = up.any(1) & ~above[:, 0]
        k = np.where(has, up.argmax(1), 0)
        estimate = self._bisect(k, x[k], x[k + 1])
        seeds = self.count[np.arange(rows)[:, None], self.stencil(k)].min(-1).astype(float)  # the fewest of the stencil
        low, high = np.full(rows, np.nan), np.full(rows, np.nan)
        flag = np.where(has, FLAGS.index("bounded"), FLAGS.index("no_crossing"))
        flag = np.where(has & (seeds < min_seeds), FLAGS.index("too_few_seeds"), flag)
        ok = flag == FLAGS.index("bounded")
        if ok.any():
            lo, hi, f = self._ends(k[ok], estimate[ok], np.flatnonzero(ok), chunk)
            low[ok], high[ok], flag[ok] = lo, hi, f
        if bracket:  # between its two grid values the data do not place the crossing: the interval holds them
            low, high = np.minimum(low, x[k]), np.maximum(high, x[k + 1])
        spacing = np.where(has, x[np.minimum(k + 1, len(x) - 1)] - x[k], np.nan)
        return {"estimate": np.where(has, estimate, np.nan), "low": low, "high": high,
                "seeds": np.where(has, seeds, np.nan), "spacing": spacing, "flag": flag}

    def _ends(self, k: np.ndarray, estimate: np.ndarray, rows: np.ndarray,
              chunk: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's interval and flag: from the first abscissa whose crossing is not rejected
        to the first past the estimate where the curve is significantly above the level.

        The first crossing x* of the expected curve lies in it unless x* itself is rejected
        (probability 1 - confidence) or the curve tests significantly above the level somewhere
        below x*, where it is below in expectation (less likely still): so a curve that returns
        to the level later (a bump) or crosses it again in its noise is covered as a whole."""
        x = self.x
        frac = np.arange(SUBDIVISIONS) / SUBDIVISIONS
        grid = np.r_[(x[:-1, None] + np.diff(x)[:, None] * frac).ravel(), x[-1]]
        interval = np.r_[np.repeat(np.arange(len(x) - 1), SUBDIVISIONS), len(x) - 2]
        n, size = len(rows), len(grid)
        t, critical = self.statistic(np.broadcast_to(interval, (n, size)), np.broadcast_to(grid, (n, size)), chunk,
                                     rows)
        order = np.arange(size)
        accepted = ~(abs(t) > critical)  # NaN (no variance estimate) rejects nothing
        first = np.where(accepted, order, size).min(1)
        stop = np.where((t > critical) & (grid > estimate[:, None]), order, size).min(1)

        def accepts(iv, u):
            t, critical = self.statistic(iv, u, chunk, rows)
            return ~(abs(t) > critical)

        def below_or_accepts(iv, u):
            t, critical = self.statistic(iv, u, chunk, rows)
            return ~(t > critical)

        # the estimate is accepted (z = 0) even where no abscissa of the subdivision near it is
        inside = np.minimum(grid[np.minimum(first, size - 1)], estimate)
        outside = grid[np.maximum(np.where(grid[None, :] < inside[:, None], order, -1).max(1), 0)]
        low = self._boundary(outside, inside, accepts)
        high = self._boundary(grid[np.minimum(stop, size - 1)], np.maximum(grid[np.maximum(stop - 1, 0)], estimate),
                              below_or_accepts)
        flag = np.full(n, FLAGS.index("bounded"))
        flag = np.where(stop == size, FLAGS.index("reaches_grid_end"), flag)
        start = (first == 0) & (grid[0] <= estimate)
        flag = np.where(start, FLAGS.index("reaches_grid_start"), flag)
        return np.where(start, np.nan, low), np.where(stop == size, np.nan, high), flag

    def _interval_of(self, u: np.ndarray) -> np.ndarray:
        return np.clip(np.searchsorted(self.x, u, side="right") - 1, 0, len(self.x) - 2)

    def _boundary(self, outside: np.ndarray, inside: np.ndarray, accept) -> np.ndarray:
        """Bisection between a rejected and an accepted abscissa per row: the accepted end."""
        out, inn = outside.copy(), inside.copy()
        for _ in range(BISECTIONS):
            mid = (out + inn) / 2
            ok = accept(self._interval_of(mid)[:, None], mid[:, None])[:, 0]
            inn = np.where(ok, mid, inn)
            out = np.where(ok, out, mid)
        return inn

    def _bisect(self, k: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Where the interpolated mean crosses the level in grid interval k = [a, b], per row
        (below it at a, at or above it at b: every stencil holding both reads them as they are)."""
        for _ in range(BISECTIONS):
            mid = (a + b) / 2
            neg = self.distance(k[:, None], mid[:, None])[:, 0] < 0
            a = np.where(neg, mid, a)
            b = np.where(neg, b, mid)
        return (a + b) / 2
