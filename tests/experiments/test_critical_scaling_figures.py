"""critical_scaling's figures drawn from hand-made summaries: a refined sweep's heat map draws each
rho column over the gamma values that column holds, and the finite-size figure plots gamma* (1 - rho)
and the simplex boundary at the coordinates given (read back from the artists)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from matplotlib.collections import QuadMesh

from attnsweep.experiments.critical_scaling import CriticalScaling, figures

RHO = np.array([0.2, 0.5, 0.8])
GAMMA = np.array([1.0, 1.5, 2.0, 2.5, 3.0, 5.0])
#: gamma values each rho column holds (a refined sweep: the union has holes per column)
HELD = {0.2: [1.0, 1.5, 2.0, 3.0], 0.5: [1.0, 2.0, 2.5, 3.0, 5.0], 0.8: [1.0, 3.0, 5.0]}


def refined_summary() -> tuple[xr.Dataset, xr.Dataset]:
    coords = {"n": [64], "d": [8], "rho": RHO, "gamma": GAMMA, "alpha": [0.0]}
    held = np.array([[np.isin(GAMMA, HELD[r]) for r in RHO]]).transpose(0, 2, 1)  # (1, gamma, rho)
    values = np.where(held, np.linspace(0, 1, GAMMA.size)[None, :, None], np.nan)
    cube = values[:, None, :, :, None].transpose(0, 1, 3, 2, 4)  # (n, d, rho, gamma, alpha)
    summary = xr.Dataset({"lambda": (tuple(coords), cube),
                          "seeds_held": (tuple(coords), np.where(np.isfinite(cube), 4, 0) + (cube > 0.5) * 4)},
                         coords=coords)
    star = np.full((1, 1, RHO.size, 1), 2.0)
    bnd = xr.Dataset({f"gamma_star_lambda{s}": (("n", "d", "rho", "alpha"), star + k * 0.1)
                      for k, s in enumerate(("", "_low", "_high"))},
                     coords={c: coords[c] for c in ("n", "d", "rho", "alpha")})
    return summary, bnd


def test_column_edges():
    np.testing.assert_allclose(figures.column_edges(np.array([1.0, 2.0, 4.0])), [0.5, 1.5, 3.0, 5.0])
    np.testing.assert_allclose(figures.column_edges(np.array([1.0, 2.0])), [0.5, 1.5, 2.5])
    np.testing.assert_allclose(figures.column_edges(np.array([0.3])), [-0.2, 0.8])  # one rho: a column


def test_heatmap_draws_each_column_over_its_own_values():
    summary, bnd = refined_summary()
    fig = figures.heatmaps(summary, bnd, "lambda", 64)
    meshes = [a for a in fig.axes[0].get_children() if isinstance(a, QuadMesh)]
    assert len(meshes) == RHO.size
    rho_edges = [0.05, 0.35, 0.65, 0.95]
    for k, (rho, mesh) in enumerate(zip(RHO, meshes)):
        corners = mesh.get_coordinates()  # (gamma edges, 2 rho edges, xy)
        np.testing.assert_allclose(corners[0, :, 0], rho_edges[k:k + 2])
        np.testing.assert_allclose(corners[:, 0, 1], figures.column_edges(np.array(HELD[rho])))
        values = np.asarray(mesh.get_array()).ravel()
        np.testing.assert_allclose(values, summary["lambda"].sel(rho=rho).squeeze().dropna("gamma").values)


def boundary_over_n() -> xr.Dataset:
    n, d, rho = [256, 1024, 4096], [16, 1024], [0.25, 0.5]
    shape = (len(n), len(d), len(rho), 1)
    star = (1.0 + np.arange(np.prod(shape)).reshape(shape) / 100) / (1 - np.array(rho))[None, None, :, None]
    dims = ("n", "d", "rho", "alpha")
    data = {}
    for obs in ("lambda", "eta"):
        data[f"gamma_star_{obs}"] = (dims, star)
        data[f"gamma_star_{obs}_low"] = (dims, star * 0.99)
        data[f"gamma_star_{obs}_high"] = (dims, star * 1.02)
        data[f"gamma_star_{obs}_simplex"] = (dims, star * 0.9)
    return xr.Dataset(data, coords={"n": n, "d": d, "rho": rho, "alpha": [0.0]})


@pytest.mark.parametrize("across", ["n", "d"])
def test_finite_size_plots_scaled_boundary_and_simplex(across):
    bnd = boundary_over_n()
    fig = figures.finite_size(None, bnd, across=across)
    other = "d" if across == "n" else "n"
    assert len(fig.axes) == 2 * bnd.sizes[other]
    ax = fig.axes[0]  # lambda, the first value of the other axis
    lines = [line for line in ax.get_lines() if line.get_linestyle() in ("-", "--")]
    measured = [line for line in lines if line.get_linestyle() == "-"]
    simplex = [line for line in lines if line.get_linestyle() == "--"]
    assert len(measured) == len(simplex) == bnd.sizes["rho"]
    first = bnd.isel({other: 0}).sel(alpha=0.0)
    values = bnd[across].values
    np.testing.assert_array_equal(ax.get_xticks(), values)  # ticks at the sizes run
    offsets = []
    for k, rho in enumerate(bnd["rho"].values):
        want = first["gamma_star_lambda"].sel(rho=rho).values * (1 - rho)
        # each rho's points sit one factor off the values (apart from the other rho's on the log axis)
        ratio = measured[k].get_xdata() / values
        # one multiply by the offset and one divide back: a few ulp (1e-16 each), far inside 1e-12
        np.testing.assert_allclose(ratio, ratio[0], rtol=1e-12)
        offsets.append(ratio[0])
        np.testing.assert_allclose(measured[k].get_ydata(), want)
        np.testing.assert_allclose(simplex[k].get_xdata(), values)
        np.testing.assert_allclose(simplex[k].get_ydata(), want * 0.9)
    # offsets are apart and small: at most 10^(0.012 x 2.5) = 1.07 either way for six rho
    assert len(set(offsets)) == len(offsets) and all(0.9 < r < 1.1 for r in offsets)


def test_finite_size_over_n_only_with_several_n():
    def names(ns):
        grid = {"n": ns, "d": [16], "rho": [0.5], "gamma": [1.0, 2.0], "alpha": [0.0]}
        return [spec.name for spec in CriticalScaling().figures(grid, {"eta_method": "exact", "probes": None})]

    assert "finite_size_n" not in names([256])
    assert "finite_size_n" in names([256, 1024])
