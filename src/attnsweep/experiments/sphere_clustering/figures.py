"""Figures 3-5 of paper 001 (phase diagrams, cluster counts, snapshots) and the boundary view."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from attnsweep.experiments.sphere_clustering import theory
from attnsweep.experiments.sphere_clustering.captions import temperature
from attnsweep.grid import format_value
from attnsweep.reduce.crossing import error_bars


def _pick(data: xr.DataArray, axis: str) -> xr.DataArray:
    """Keep ``axis`` and the panel dims; first value of rho and of the other temperature axis."""
    other = "gamma" if axis == "beta" else "beta"
    return data.isel({other: 0, "rho": 0})


def gamma_line(summary: xr.Dataset, n: int, axis: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Gamma_inf,delta on a fine temperature grid: (hitting times, temperatures); None unless
    Q = K = V = I."""
    if summary.attrs.get("matrices") != "identity":
        return None
    temps = np.linspace(float(summary[axis].min()), float(summary[axis].max()), 200)
    other = float(summary["gamma" if axis == "beta" else "beta"][0])
    beta, gamma = (temps, other) if axis == "beta" else (other, temps)
    model = "usa" if summary.attrs.get("normalisation") == "usa" else "sa"
    return theory.hitting_time(beta + gamma * np.log(n), n, float(summary.attrs["delta"]), model), temps


def phase(summary: xr.Dataset, boundary: xr.Dataset, n: int) -> Figure:
    """One panel per d: the clustered-pair probability over (t, temperature), theory and t* on top."""
    axis = temperature({c: summary[c].values for c in ("beta", "gamma")})
    data = _pick(summary["clustered"].sel(n=n), axis)
    bnd = _pick(boundary.sel(n=n), axis)
    ds = summary["d"].values
    fig = Figure(figsize=(3.6 * len(ds), 3.4), layout="constrained")
    axes = fig.subplots(1, len(ds), squeeze=False)[0]
    t, temp = summary["t"].values, summary[axis].values
    line = gamma_line(summary, n, axis)
    for ax, d in zip(axes, ds):
        mesh = ax.pcolormesh(t, temp, data.sel(d=d).transpose(axis, "t").values, shading="nearest",
                             cmap="magma", vmin=0, vmax=1)
        if line is not None:
            ax.plot(*line, "w-", lw=1.5, label=r"$\Gamma_{\infty,\delta}$")
        star = bnd["t_star"].sel(d=d).values
        err = error_bars(star, bnd["t_star_low"].sel(d=d).values, bnd["t_star_high"].sel(d=d).values)
        ax.errorbar(star, temp, xerr=err, fmt="o", ms=2.5, color="tab:red", ecolor="tab:red", capsize=1.5,
                    label=r"measured $t^*$")
        ax.set(xlabel="t", ylabel=rf"$\{axis}$", title=f"d = {int(d)}", xlim=(t.min(), t.max()))
    fig.colorbar(mesh, ax=axes[-1], label=r"$P(\langle x_1, x_2\rangle \geq 1-\delta)$")
    axes[0].legend(loc="lower right", fontsize=7, framealpha=0.7)
    fig.suptitle(f"clustered pairs, n = {n}")
    return fig


def clusters(summary: xr.Dataset, bnd: xr.Dataset, n: int) -> Figure:
    """One panel per d: mean cluster count over time, one line per temperature (at most 6 shown)."""
    axis = temperature({c: summary[c].values for c in ("beta", "gamma")})
    mean = _pick(summary["clusters"].sel(n=n), axis)
    se = _pick(summary["clusters_se"].sel(n=n), axis)
    temps = summary[axis].values
    shown = temps[np.unique(np.linspace(0, len(temps) - 1, min(6, len(temps))).round().astype(int))]
    ds = summary["d"].values
    fig = Figure(figsize=(3.6 * len(ds), 3.2), layout="constrained")
    axes = fig.subplots(1, len(ds), squeeze=False)[0]
    t = summary["t"].values
    for ax, d in zip(axes, ds):
        for k, value in enumerate(shown):
            m = mean.sel({"d": d, axis: value}).values
            s = np.nan_to_num(se.sel({"d": d, axis: value}).values)
            ax.plot(t, m, color=f"C{k}", label=rf"$\{axis}$ = {format_value(value)}")
            ax.fill_between(t, m - s, m + s, color=f"C{k}", alpha=0.2, lw=0)
        ax.set(xlabel="t", ylabel="clusters", title=f"d = {int(d)}", yscale="log")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"number of clusters, n = {n}")
    return fig


def boundary(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """t*(temperature) per (n, d) with its interval and the 0.1-0.9 band, and Gamma_inf,delta."""
    axis = temperature({c: bnd[c].values for c in ("beta", "gamma")})
    fig = Figure(figsize=(5.4, 4.0), layout="constrained")
    ax = fig.subplots()
    temp = bnd[axis].values
    for i, n in enumerate(bnd["n"].values):
        for j, d in enumerate(bnd["d"].values):
            b = _pick(bnd.sel(n=n, d=d), axis)
            color = f"C{(i * len(bnd['d']) + j) % 10}"
            ax.fill_betweenx(temp, b["t_10"].values, b["t_90"].values, color=color, alpha=0.15, lw=0)
            star = b["t_star"].values
            err = error_bars(star, b["t_star_low"].values, b["t_star_high"].values)
            ax.errorbar(star, temp, xerr=err, fmt="o-", ms=3, color=color, capsize=1.5,
                        label=f"n = {int(n)}, d = {int(d)}")
        line = gamma_line(bnd, int(n), axis)
        if line is not None:
            ax.plot(*line, "k-", lw=1.2, label=rf"$\Gamma_{{\infty,\delta}}$, n = {int(n)}")
    ax.set(xlabel=r"$t^*$", ylabel=rf"$\{axis}$")
    ax.legend(fontsize=7)
    return fig


def snapshots(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Tokens of seed 0 at the snapshot times (columns), one row per temperature (at most 3)."""
    axis = temperature({c: summary[c].values for c in ("beta", "gamma")})
    snap = _pick(summary["snapshot"].isel(n=0, d=0), axis)
    temps = summary[axis].values[np.unique(np.linspace(0, summary.sizes[axis] - 1, min(3, summary.sizes[axis]))
                                           .round().astype(int))]
    times = summary["snapshot_t"].values
    fig = Figure(figsize=(2.6 * len(times), 2.6 * len(temps)), layout="constrained")
    axes = fig.subplots(len(temps), len(times), squeeze=False)
    circle = np.linspace(0, 2 * np.pi, 200)
    for row, value in zip(axes, temps):
        for ax, t in zip(row, times):
            xy = snap.sel({axis: value, "snapshot_t": t}).values
            ax.plot(np.cos(circle), np.sin(circle), color="0.8", lw=0.8)
            ax.scatter(xy[:, 0], xy[:, 1], s=12, color="tab:blue")
            ax.set(aspect="equal", xticks=[], yticks=[],
                   title=rf"$\{axis}$ = {format_value(value)}, t = {format_value(t)}")
    return fig
