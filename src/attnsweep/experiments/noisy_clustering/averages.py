"""Long-time averages of a run's recorded series, with honest standard errors.

For a stationary series f_1..f_N recorded every ``interval``, the variance of its mean is
Var(f) tau / N, with tau = 1 + 2 sum_{k>=1} rho(k) the integrated autocorrelation time in
records; tau is estimated by Sokal's automatic window (the window is the first M with
M >= c tau(M), c = 5), as ``emcee.autocorr.integrated_time`` does. A series shorter than
about 50 tau gives a biased-low tau: the window should be long against it (the burn-in
figure shows the traces, the store keeps tau beside every mean).
"""

from __future__ import annotations

import warnings

import numpy as np
from emcee.autocorr import integrated_time

#: Sokal's window constant.
WINDOW_C = 5


def window_statistics(series: np.ndarray, interval: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, standard error of the mean and integrated autocorrelation time (in the units of
    ``interval``) of each row of ``series`` (B, N). A constant row has tau = ``interval`` and a
    standard error of 0."""
    series = np.asarray(series, float)
    # Row by row: numpy's reductions of a (B, N) array need not add in the order they add one row,
    # and a row's numbers must not depend on the rows beside it (the chunk it ran in).
    mean = np.array([row.mean() for row in series])
    var = np.array([row.var() for row in series])
    tau = np.ones(len(series))
    with warnings.catch_warnings():  # "chain shorter than 50 tau": kept, tau is stored beside the mean
        warnings.simplefilter("ignore")
        for i in np.flatnonzero(var > 0):
            tau[i] = integrated_time(series[i], c=WINDOW_C, tol=0, quiet=True)[0]
    # Below 1 (anticorrelated records, or the estimate's own noise on a short series) tau is taken as
    # 1: the standard error is never below that of independent records.
    tau = np.maximum(tau, 1.0)
    se = np.sqrt(var * tau / series.shape[-1])
    return mean, se, tau * interval


def trace_positions(records: int, points: int) -> np.ndarray:
    """Indices of at most ``points`` records, evenly spread from the first to the last."""
    return np.unique(np.rint(np.linspace(0, records - 1, min(points, records))).astype(np.int64))
