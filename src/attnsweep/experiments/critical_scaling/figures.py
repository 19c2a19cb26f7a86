"""Figures 1-2 of paper 000 and the finite-size view of the measured boundary."""

from __future__ import annotations

import matplotlib
import numpy as np
import xarray as xr
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from attnsweep.grid import format_value
from attnsweep.reduce.crossing import error_bars

SCALED = {"lambda": r"$\gamma^*_\lambda (1-\rho)$", "eta": r"$\gamma^*_\eta (1-\rho)$"}
LABELS = {
    "lambda": r"angle ratio $\lambda$ (Eq. 26)",
    "eta": r"Jacobian norm $\eta$ (Eq. 27)",
}


def column_edges(values: np.ndarray) -> np.ndarray:
    """Cell edges for sorted ``values``: the midpoints between neighbours, and half a gap beyond
    each end (``shading="nearest"``'s cells, for values unevenly spaced); one value gets the
    width 1, centred, so that a sweep of a single rho still draws its column."""
    if values.size == 1:
        return np.array([values[0] - 0.5, values[0] + 0.5])
    mid = (values[1:] + values[:-1]) / 2
    return np.concatenate([[values[0] - (values[1] - values[0]) / 2], mid,
                           [values[-1] + (values[-1] - values[-2]) / 2]])


def heatmaps(summary: xr.Dataset, boundary: xr.Dataset, observable: str, n: int) -> Figure:
    """One panel per d: the seed mean over (rho, gamma), gamma = 1/(1-rho) and gamma* on top."""
    alpha = 0.0 if observable == "eta" else float(summary["alpha"][0])
    data = summary[observable].sel(n=n, alpha=alpha)
    bnd = boundary.sel(n=n, alpha=alpha)
    ds = summary["d"].values
    fig = Figure(figsize=(4.2 * len(ds), 3.6), layout="constrained")
    axes = fig.subplots(1, len(ds), squeeze=False)[0]
    rho, gamma = summary["rho"].values, summary["gamma"].values
    seeds = summary["seeds_held"].sel(n=n, alpha=alpha) if "seeds_held" in summary else None
    refined = seeds is not None and bool((seeds != seeds.max()).any())
    rho_line = np.linspace(rho.min(), rho.max(), 200)
    rho_edges = column_edges(rho)
    for ax, d in zip(axes, ds):
        panel = data.sel(d=d).transpose("gamma", "rho").values
        vmax = 1.0 if observable == "lambda" else max(float(np.nanmax(panel)), 1e-12)
        norm = Normalize(0.0, vmax)
        # Each rho column over the gamma values it holds: a refined column shows finer cells near
        # its crossing, and no column has a hole that is only another column's refinement.
        for k in range(rho.size):
            held = np.isfinite(panel[:, k])
            if held.sum() >= 2:
                ax.pcolormesh(rho_edges[k:k + 2], column_edges(gamma[held]), panel[held, k][:, None],
                              shading="flat", cmap="viridis", norm=norm)
        fig.colorbar(ScalarMappable(norm, "viridis"), ax=ax)
        line = 1 / (1 - rho_line)
        keep = line <= gamma.max()
        ax.plot(rho_line[keep], line[keep], "w--", lw=1.5, label=r"$\gamma = 1/(1-\rho)$")
        star = bnd[f"gamma_star_{observable}"].sel(d=d).values
        low = bnd[f"gamma_star_{observable}_low"].sel(d=d).values
        high = bnd[f"gamma_star_{observable}_high"].sel(d=d).values
        err = error_bars(star, low, high)
        ax.errorbar(rho, star, yerr=err, fmt="o", ms=3.5, color="tab:red", ecolor="tab:red",
                    capsize=2, label=r"measured $\gamma^*$")
        if refined:  # the simulated points, sized by their seeds
            held = seeds.sel(d=d).transpose("gamma", "rho").values
            g, r = np.nonzero(held)
            ax.scatter(rho[r], gamma[g], s=4 * np.sqrt(held[g, r] / held.max()), c="k", lw=0,
                       label="simulated (size: seeds)")
        ax.set(xlabel=r"$\rho$", ylabel=r"$\gamma$", title=f"d = {int(d)}", ylim=(gamma.min(), gamma.max()))
    axes[0].legend(loc="upper left", fontsize=7, framealpha=0.7)
    fig.suptitle(f"{LABELS[observable]}, n = {n}")
    return fig


def finite_size(summary: xr.Dataset, boundary: xr.Dataset, across: str = "d",
                observables: tuple[str, ...] = ("lambda", "eta")) -> Figure:
    """gamma*(1 - rho) against ``across`` (d or n), a panel per value of the other and a row per
    observable, for up to six rho, beside the same boundary on the finite-n simplex; the limit is 1."""
    other = "n" if across == "d" else "d"
    alpha = 0.0 if 0.0 in boundary["alpha"].values else float(boundary["alpha"][0])
    bnd = boundary.sel(alpha=alpha)
    rhos = bnd["rho"].values[bnd["gamma_star_lambda"].notnull().any(("n", "d")).values]  # with a crossing
    if rhos.size:  # up to six, evenly over those
        rhos = rhos[np.unique(np.linspace(0, rhos.size - 1, min(6, rhos.size)).round().astype(int))]
    panels = bnd[other].values
    fig = Figure(figsize=(3.6 * len(panels), 0.6 + 2.5 * len(observables)), layout="constrained")
    axes = fig.subplots(len(observables), len(panels), squeeze=False, sharex=True)
    colour = rho_colours(rhos)
    x = bnd[across].values
    for col, value in enumerate(panels):
        for row, obs in enumerate(observables):
            ax = axes[row, col]
            for i, rho in enumerate(rhos):
                sel = bnd.sel({other: value, "rho": rho})
                scale = 1 - rho
                star = sel[f"gamma_star_{obs}"].values * scale
                err = error_bars(star, sel[f"gamma_star_{obs}_low"].values * scale,
                                 sel[f"gamma_star_{obs}_high"].values * scale)
                dodge = 10 ** (0.012 * (i - (len(rhos) - 1) / 2))  # side by side, not one bar over another
                ax.errorbar(x * dodge, star, yerr=err, fmt="-o", ms=3.5, capsize=2, color=colour(rho),
                            label=rf"$\rho$ = {format_value(rho)}")
                simplex = sel[f"gamma_star_{obs}_simplex"].broadcast_like(sel[f"gamma_star_{obs}"]).values * scale
                ax.plot(x, simplex, "--", lw=0.8, color=colour(rho))
            ax.axhline(1.0, color="k", lw=1, ls=":")
            ax.set(xscale="log", title=f"{obs}, {other} = {int(value)}")
            ax.set_xticks(x, [format_value(v) for v in x])  # the sizes run, not powers of ten between them
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel(SCALED[obs])
        axes[-1, col].set_xlabel(across)
    axes[0, 0].legend(fontsize=7)
    return fig


def rho_colours(rhos: np.ndarray):
    """rho -> a colour of ``plasma`` over the rho values drawn."""
    norm = Normalize(float(rhos.min()), float(rhos.max())) if rhos.size else Normalize(0, 1)
    cmap = matplotlib.colormaps["plasma"]
    return lambda rho: cmap(0.85 * norm(rho))
