"""float32, the dtype the default config runs sphere_clustering and causal_clustering in (and
critical_scaling on a GPU), against float64 on the same job: whole simulate jobs of each engine,
compared observable by observable.

Truth: the float64 run of the same job. Draws are made in float64 on the CPU for both, so the
runs differ only by rounding. Every tolerance comes from one of the arguments below, written out
in u = 2^-24 (float32's unit roundoff), the number N of steps, the step dt, the size of one count
step, or the float64 curve of the same run; none is a value read off one machine (the float32
error of these engines depends on the CPU's vector code and BLAS kernels: issue 31).

- Rounding. A step of the dynamics applies about ten operations to each token (the Gram
  product, the shifted exponential, the row sum, the weighted sum and the division by the row
  sum, the Euler update, the norm and the division by it), each adding an error of about u
  relative to the numbers of size 1 it handles (a sum over n <= 32 unit-size terms, in the
  blocked order of BLAS and SIMD code, counts as one). Where the flow does not expand distances
  these errors at most add up: a token, and so a cosine or a geodesic distance, is off by at
  most ``STEP_ROUNDINGS * N * u`` after N steps (1.8e-4 after 300 steps, 1.2e-3 after 2000).
- Lag. Where the flow does expand distances, at the exit of a metastable cluster configuration
  through a saddle (the late merges at beta = 9, the slow merges at beta = 64 of
  causal_clustering), a rounding-size displacement along the unstable direction becomes a shift
  of the exit in time, which no multiple of N u bounds. An Euler scheme of step dt places
  events in time only to O(dt), so float32 counts as agreeing with float64 where it runs up to
  one step ahead or behind: a value may also differ by dt times the local rate of the float64
  curve of the same run (:func:`rate`).
- Counts. A pair's status (clustered or not, captured or not) can differ only where its cosine
  or distance lies within the rounding above of the threshold at an output time. Two pairs of
  one realisation straddle a threshold at the same output time only if their cosines agree with
  each other and with the threshold to within float32's rounding (a sub-cluster tighter than
  the rounding meeting a token just at an output time), so at most one pair per realisation
  and output time differs: the premise of every count check below. A pair is two
  ordered entries (the float32 Gram matrix need not be symmetric); it joins or separates at
  most two connected components, and changes the rank of a 0/1 matrix by at most 2 (one per
  entry). How often such a pair occurs has no bound in u, N or dt: no test limits the fraction
  of outputs that differ.
- arccos. A geodesic distance is the arccos of a d-term float32 dot product of two tokens whose
  norms are 1 to within 2u each: a cosine off by (d + 4) u, which near distance 0 is a distance
  off by sqrt(2 (d + 4) u) (``arccos_resolution``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import xarray as xr

from attnsweep.plan.config import load_sweep
from attnsweep.registry import get

U32 = 2.0**-24  # float32 unit roundoff
CPU = torch.device("cpu")
STEP_ROUNDINGS = 10  # rounded operations a step applies to a token (module docstring: Rounding)


def both(name: str, section: dict) -> tuple[xr.Dataset, xr.Dataset]:
    """One job holding the whole section, simulated in float64 and in float32."""
    (job,) = load_sweep({"experiments": {name: {**section, "wildcards": []}}}).plans[name].jobs().values()
    return tuple(get(name).simulate(job, CPU, dtype, progress=False) for dtype in (torch.float64, torch.float32))


def crossing(t: np.ndarray, y: np.ndarray, level: float) -> float:
    """First upward crossing of ``level`` by ``y`` on ``t``, linearly interpolated (NaN if none)."""
    for k in range(1, len(t)):
        if y[k - 1] < level <= y[k]:
            return float(t[k - 1] + (level - y[k - 1]) / (y[k] - y[k - 1]) * (t[k] - t[k - 1]))
    return math.nan


def crossing_window(t: np.ndarray, y: np.ndarray, level: float, width: float) -> tuple[float, float]:
    """Where the first crossing of ``level`` by any curve within ``width`` of ``y`` at every
    output lies. Both curves are linear between outputs, so they stay within ``width`` of each
    other everywhere; the other curve is below ``level`` wherever ``y < level - width`` and at or
    above it wherever ``y >= level + width``: its first crossing lies between ``y``'s first reach
    of ``level - width`` and of ``level + width`` (NaN: never reached; a NaN start means the
    other curve never crosses). Where ``y`` is straight there, that is ``width / slope`` on
    either side of ``y``'s own crossing: the slope is the float64 curve's, of the same run."""
    assert y[0] + width < level  # both start below: first reaches are first upward crossings
    return crossing(t, y + width, level), crossing(t, y - width, level)


def in_window(x: float, window: tuple[float, float]) -> bool:
    """Whether a crossing time ``x`` (NaN: none) lies in a :func:`crossing_window`."""
    low, high = window
    if math.isnan(low):
        return math.isnan(x)
    if math.isnan(x):
        return math.isnan(high)
    return low <= x and not x > high


def rate(y: xr.DataArray) -> xr.DataArray:
    """|dy/dt| at every output time: the larger of the difference quotients of ``y`` over the
    two output intervals next to it (the only one, at either end)."""
    t = y["t"]
    slopes = abs(y.diff("t")) / t.diff("t")  # labelled with the interval's end
    ending = slopes.reindex(t=t, fill_value=0.0)
    starting = slopes.assign_coords(t=t.values[:-1]).reindex(t=t, fill_value=0.0)
    return np.maximum(ending, starting)


def assert_within(got: xr.DataArray, want: xr.DataArray, bound: xr.DataArray | float, what: str) -> None:
    """|got - want| <= bound everywhere (aligned by dimension name; a NaN fails)."""
    excess = float((abs(got - want) / bound).max(skipna=False))
    assert excess <= 1, f"{what}: {excess:.3g} of its bound"


def arccos_resolution(d: xr.DataArray) -> xr.DataArray:
    """The geodesic distance a float32 arccos of a d-term cosine resolves (module docstring)."""
    return np.sqrt(2 * (d + 4) * U32)


def test_sphere_clustering_float32_matches_float64() -> None:
    """The default config's regime (n = 32, d in {2, 8, 32}, dt = 0.1 to t = 30: N = 300 Euler
    steps), 3 beta x 8 realisations: the values within rounding and one step's lag, the counts
    within one pair per realisation, and t* within what one pair per realisation can move it."""
    steps, dt = 300, 0.1
    f64, f32 = both("sphere_clustering", {"n": [32], "d": [2, 8, 32], "beta": [1.0, 4.0, 9.0], "seeds": 8,
                                          "dt": dt, "t_max": steps * dt, "outputs": 31})
    assert float(f64["clustered"].isel(t=-1).mean()) > 0.3  # the runs reach the clustered phase
    assert (f32["energy"] != f64["energy"]).any()  # float32 arithmetic ran
    cosine = STEP_ROUNDINGS * steps * U32  # Rounding
    # energy (1/(2 beta n^2)) sum e^{beta <x_i, x_j>}: each term off by the factor e^{beta dcos}, so
    # relatively beta times the cosines' error (logsumexp's own rounding, (beta + 8) u, is far below)
    energy = f64["energy"]
    assert_within(f32["energy"], energy, cosine * energy.beta * np.abs(energy) + dt * rate(energy), "energy")
    assert_within(f32["min_cosine"], f64["min_cosine"], cosine + dt * rate(f64["min_cosine"]), "min_cosine")

    # the boundary's input: t* of the seed-mean clustered fraction, per (d, beta). Every realisation
    # within one pair (2 of 32 * 31 ordered entries, checked below) of float64 keeps the seed means
    # within that too, plus float32's rounding of a fraction (u): t* stays in crossing_window. The
    # count check below implies this one; t*, what the workflow reports, is asserted first
    pairs = 32 * 31
    width = 2 / pairs + U32
    mean64, mean32 = (ds["clustered"].mean("seed").squeeze() for ds in (f64, f32))
    t = f64["t"].values
    for d in (2, 8, 32):
        for beta in (1.0, 4.0, 9.0):
            window = crossing_window(t, mean64.sel(d=d, beta=beta).values, 0.5, width)
            star = crossing(t, mean32.sel(d=d, beta=beta).values, 0.5)
            assert in_window(star, window), (d, beta, star, window)

    # Counts: one pair at most (two ordered entries), counted: float32's fraction 128/992 is only within
    # u of it, so a difference of 2/992 can be a little more
    counted = [np.rint(ds["clustered"] * pairs) for ds in (f32, f64)]
    flipped = abs(counted[0] - counted[1])
    assert float(flipped.max()) <= 2
    # the clusters are components of the graph of the same threshold on the same Gram matrix
    # (delta = cluster_delta here): they differ only where that one pair does, by one component
    assert f64.attrs["delta"] == f64.attrs["cluster_delta"]
    clusters = abs(f32["clusters"] - f64["clusters"])
    assert float(clusters.max()) <= 1 and not bool(((clusters > 0) & (flipped == 0)).any())
    # the Boolean rank (threshold 0.9999): one pair, two entries, two rank-one changes
    assert float(abs(f32["boolean_rank"] - f64["boolean_rank"]).max()) <= 2


def test_causal_clustering_float32_matches_float64() -> None:
    """The default config's horizon (dt = 0.1 to t = 200: N = 2000 projected Euler steps), d in
    {2, 3}, beta in {16, 64}, V = I and top_simple, causal and full, 4 realisations of 32 tokens:
    centre counts identical (found on the float64 draws), cluster counts and captured fractions
    within one pair or token, drifts within rounding, arccos's resolution and one step's lag."""
    steps, dt = 2000, 0.1
    f64, f32 = both("causal_clustering", {"n": [32], "d": [2, 3], "beta": [16.0, 64.0], "seeds": 4,
                                          "values": ["identity", "top_simple"], "dt": dt, "t_max": steps * dt,
                                          "outputs": 21, "snapshot_times": []})
    first, last = (float(f64["clusters"].isel(t=t).mean()) for t in (0, -1))
    assert last < first / 2  # clusters formed
    assert (f32["strong_drift"] != f64["strong_drift"]).any()  # float32 arithmetic ran
    for var in ("renyi_count", "strong_count"):  # from the float64 draws in both runs
        np.testing.assert_array_equal(f32[var], f64[var], err_msg=var)
    # Counts: one pair (one component) or one token (1/32 of a captured fraction)
    for var, step in (("clusters", 1), ("captured_renyi", 1 / 32), ("captured_strong", 1 / 32)):
        assert float(abs(f32[var] - f64[var]).max()) <= step, var
    # geodesic distances from the start: Rounding of both ends, arccos, Lag
    resolution = arccos_resolution(f64["d"])
    for var in ("first_drift", "strong_drift"):
        drift = f64[var]
        assert_within(f32[var], drift, resolution + STEP_ROUNDINGS * steps * U32 + dt * rate(drift), var)
    # Lemma 3.1 in float32: under the causal mask with V = I the first token does not move; its distance
    # from its start is arccos's resolution at most
    fixed = f32["first_drift"].sel(causal=1).isel(value=0)
    assert bool((fixed <= arccos_resolution(fixed["d"])).all())


def test_critical_scaling_span_coordinates_float32_matches_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    """d > n + 1, the default d = 1024 against n = 256: the exact path moves the tokens to their
    (n + 1)-dimensional span and passes d only as a number. Whole jobs at n = 16 (d = 64, 1024)
    and n = 64 (d = 1024), rho up to 0.95, gamma up to 12, alpha 0 and 0.5.

    One layer, no steps: a score beta <y_i, y_j> is a dot product over the n + 1 span coordinates
    of two tokens normalised to within u, off by about beta (n + 3) u; the softmax makes that
    the relative error of a weight, and the sums over the n tokens add about n u. Every
    observable (a ratio of pair distances formed from centred tokens, a participation ratio, a
    Jacobian norm from the weights and Gram sums) is a well-conditioned function of these: within
    ``(beta (n + 3) + n) u`` at the job's largest beta, relatively (absolutely for the cosine
    quantiles, which can be 0)."""
    from attnsweep.experiments.critical_scaling import kernel

    spans: list[tuple[int, ...]] = []
    span = kernel.span_coordinates
    monkeypatch.setattr(kernel, "span_coordinates", lambda z0, z: spans.append(tuple(z.shape)) or span(z0, z))
    gammas = [0.5, 2.0, 5.0, 12.0]
    for n, ds in ((16, [64, 1024]), (64, [1024])):
        f64, f32 = both("critical_scaling", {"n": [n], "d": ds, "rho": [0.0, 0.5, 0.9, 0.95],
                                             "gamma": gammas, "alpha": [0.0, 0.5], "seeds": 2})
        assert not f32["lambda"].isnull().any() and (f32["eta"] != f64["eta"]).any()  # float32 arithmetic ran
        tol = (max(gammas) * math.log(n) * (n + 3) + n) * U32
        for var in f64.data_vars:
            atol = tol if var.startswith("cos") else 0.0
            np.testing.assert_allclose(f32[var], f64[var], rtol=tol, atol=atol, err_msg=f"n = {n}: {var}")
    assert set(spans) == {(16, 64), (16, 1024), (64, 1024)}  # every job took the span path
