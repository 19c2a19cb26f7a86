"""float32, the dtype the default config runs sphere_clustering and causal_clustering in (and
critical_scaling on a GPU), against float64 on the same job: whole simulate jobs of each engine,
compared observable by observable.

Truth: the float64 run of the same job. Draws are made in float64 on the CPU for both, so the
runs differ only by rounding. Tolerances come from float32's unit roundoff u = 2^-24 ~ 6e-8 and
the horizon: N Euler steps of a flow that does not expand distances accumulate about N u per
coordinate (1.8e-5 after 300 steps, 1.2e-4 after 2000), and a geodesic distance near 0, an
arccos of 1 - O(u), is resolved only to sqrt(2u) = 3.5e-4. Counts (clusters, captured tokens)
are thresholds of cosines, so they may only differ where a pair sits within that error of its
threshold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import xarray as xr

from attnsweep.config import load_sweep
from attnsweep.registry import get

U32 = 2.0**-24  # float32 unit roundoff
CPU = torch.device("cpu")


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


def test_sphere_clustering_float32_matches_float64() -> None:
    """The default config's regime (n = 32, d in {2, 8, 32}, dt = 0.1 to t = 30: N = 300 Euler
    steps), 3 beta x 8 realisations. Measured: energy 5e-5 relative, min cosine 6e-5 absolute,
    no cluster count differs, one Boolean rank in 2232; no clustered pair on one machine, one pair
    on an AMD EPYC (float32's rounding depends on the CPU's vector code)."""
    steps = 300
    f64, f32 = both("sphere_clustering", {"n": [32], "d": [2, 8, 32], "beta": [1.0, 4.0, 9.0], "seeds": 8,
                                          "t_max": 30.0, "outputs": 31})
    assert float(f64["clustered"].isel(t=-1).mean()) > 0.3  # the runs reach the clustered phase
    assert (f32["energy"] != f64["energy"]).any()  # float32 arithmetic ran
    # energy ~ e^{beta <x_i, x_j>}: relative error beta_max times the cosines' 10 N u
    np.testing.assert_allclose(f32["energy"], f64["energy"], rtol=9 * 10 * steps * U32)
    np.testing.assert_allclose(f32["min_cosine"], f64["min_cosine"], rtol=0, atol=10 * steps * U32)
    pairs = 32 * 31
    # one pair (two ordered entries) at most: counted, as float32 rounds the fraction 128/992 above 2/992 away
    counted = [np.rint(ds["clustered"].values * pairs) for ds in (f32, f64)]
    assert np.abs(counted[0] - counted[1]).max() <= 2
    for var in ("clusters", "boolean_rank"):
        differ = f32[var] != f64[var]
        assert float(differ.mean()) <= 0.002 and float(abs(f32[var] - f64[var]).max()) <= 2, var
    # the boundary's input: t* of the seed-mean clustered fraction, per (d, beta)
    mean64, mean32 = (ds["clustered"].mean("seed").squeeze() for ds in (f64, f32))
    t = f64["t"].values
    for d in (2, 8, 32):
        for beta in (1.0, 4.0, 9.0):
            a = crossing(t, mean64.sel(d=d, beta=beta).values, 0.5)
            b = crossing(t, mean32.sel(d=d, beta=beta).values, 0.5)
            assert a == pytest.approx(b, abs=1e-3, nan_ok=True), (d, beta)


def test_causal_clustering_float32_matches_float64() -> None:
    """The default config's horizon (dt = 0.1 to t = 200: N = 2000 projected Euler steps), d in
    {2, 3}, beta in {16, 64}, V = I and top_simple, causal and full, 4 realisations of 32 tokens.
    Measured: cluster counts and captured fractions identical, drifts within 3.5e-4 (float32's
    arccos resolution), centre counts identical (found on the float64 draws)."""
    f64, f32 = both("causal_clustering", {"n": [32], "d": [2, 3], "beta": [16.0, 64.0], "seeds": 4,
                                          "values": ["identity", "top_simple"], "t_max": 200.0, "outputs": 21,
                                          "snapshot_times": []})
    first, last = (float(f64["clusters"].isel(t=t).mean()) for t in (0, -1))
    assert last < first / 2  # clusters formed
    assert (f32["strong_drift"] != f64["strong_drift"]).any()  # float32 arithmetic ran
    for var in ("renyi_count", "strong_count"):
        np.testing.assert_array_equal(f32[var], f64[var], err_msg=var)
    for var in ("clusters", "captured_renyi", "captured_strong"):
        differ = f32[var] != f64[var]
        assert float(differ.mean()) <= 0.002, var
        assert float(abs(f32[var] - f64[var]).max()) <= (1 if var == "clusters" else 1 / 32), var
    for var in ("first_drift", "strong_drift"):  # geodesic distances: 2 sqrt(2u) + the trajectories' 2000 u
        np.testing.assert_allclose(f32[var], f64[var], rtol=0, atol=2 * math.sqrt(2 * U32) + 2000 * U32, err_msg=var)
    # Lemma 3.1 in float32: under the causal mask with V = I the first token does not move
    fixed = f32["first_drift"].sel(causal=1).isel(value=0)
    assert float(fixed.max()) <= 2 * math.sqrt(2 * U32)


def test_critical_scaling_span_coordinates_float32_matches_float64(monkeypatch: pytest.MonkeyPatch) -> None:
    """d > n + 1, the default d = 1024 against n = 256: the exact path moves the tokens to their
    (n + 1)-dimensional span and passes d only as a number. Whole jobs at n = 16 (d = 64, 1024)
    and n = 64 (d = 1024), rho up to 0.95, gamma up to 12, alpha 0 and 0.5: every observable
    within 1e-4 relative (the README's claim; measured 3e-5), cosine quantiles also 1e-6 absolute."""
    from attnsweep.experiments.critical_scaling import kernel

    spans: list[tuple[int, ...]] = []
    span = kernel.span_coordinates
    monkeypatch.setattr(kernel, "span_coordinates", lambda z0, z: spans.append(tuple(z.shape)) or span(z0, z))
    for n, ds in ((16, [64, 1024]), (64, [1024])):
        f64, f32 = both("critical_scaling", {"n": [n], "d": ds, "rho": [0.0, 0.5, 0.9, 0.95],
                                             "gamma": [0.5, 2.0, 5.0, 12.0], "alpha": [0.0, 0.5], "seeds": 2})
        assert not f32["lambda"].isnull().any() and (f32["eta"] != f64["eta"]).any()  # float32 arithmetic ran
        for var in f64.data_vars:
            atol = 1e-6 if var.startswith("cos") else 0.0
            np.testing.assert_allclose(f32[var], f64[var], rtol=1e-4, atol=atol, err_msg=f"n = {n}: {var}")
    assert set(spans) == {(16, 64), (16, 1024), (64, 1024)}  # every job took the span path
