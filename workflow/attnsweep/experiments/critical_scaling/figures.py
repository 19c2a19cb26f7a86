"""Figures 1-2 of paper 000 and the finite-size view of the measured boundary."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from attnsweep.crossing import error_bars
from attnsweep.grid import format_value, format_values

LABELS = {
    "lambda": r"angle ratio $\lambda$ (Eq. 26)",
    "eta": r"Jacobian norm $\eta$ (Eq. 27)",
}


def caption_lambda(n: int, grid: dict[str, list[float]]) -> str:
    return (
        f"Figure 1 of paper 000 at n = {n}: seed-mean angle ratio lambda (Eq. 26) over (rho, gamma), "
        f"one panel per d in {{{format_values(grid['d'])}}}, alpha = {format_value(grid['alpha'][0])}. "
        "Dashed: gamma = 1/(1 - rho) (Theorem 2.1). Markers: measured gamma* where lambda crosses "
        "1/(1 + 3 rho) (Eq. 7), with a 95% bootstrap-over-seeds interval."
    )


def caption_eta(n: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    method = ("exact, from Gram matrices" if options["eta_method"] == "exact"
              else f"Hutchinson with {options['probes']} Rademacher probes, as in the paper")
    return (
        f"Figure 2 of paper 000 at n = {n}: seed-mean Jacobian norm eta (Eq. 27, {method}) "
        f"over (rho, gamma), one panel per d in {{{format_values(grid['d'])}}}, alpha = 0. "
        "Dashed: gamma = 1/(1 - rho) (Theorem 2.3). Markers: measured gamma* where eta over its "
        "supercritical plateau (1 - 1/d) mean 1/||x_i||^2 crosses 1/4, with a 95% bootstrap interval."
    )


def caption_finite_size(grid: dict[str, list[float]]) -> str:
    return (
        "Finite-size approach to the critical line: median over rho of gamma* (1 - rho) against d, one "
        f"line per n in {{{format_values(grid['n'])}}} (solid: from lambda, dashed: from eta; bars: interquartile "
        "range over rho). Theorem 2.1 predicts 1 as n and d grow."
    )


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
    for ax, d in zip(axes, ds):
        panel = data.sel(d=d).transpose("gamma", "rho").values
        vmax = 1.0 if observable == "lambda" else max(float(np.nanmax(panel)), 1e-12)
        mesh = ax.pcolormesh(rho, gamma, panel, shading="nearest", cmap="viridis", vmin=0, vmax=vmax)
        fig.colorbar(mesh, ax=ax)
        line = 1 / (1 - rho_line)
        keep = line <= gamma.max()
        ax.plot(rho_line[keep], line[keep], "w--", lw=1.5, label=r"$\gamma = 1/(1-\rho)$")
        star = bnd[f"gamma_star_{observable}"].sel(d=d).values
        low = bnd[f"gamma_star_{observable}_low"].sel(d=d).values
        high = bnd[f"gamma_star_{observable}_high"].sel(d=d).values
        err = error_bars(star, low, high)
        ax.errorbar(rho, star, yerr=err, fmt="o", ms=3.5, color="tab:red", ecolor="tab:red",
                    capsize=2, label=r"measured $\gamma^*$")
        if refined:  # a union of blocks: white is not simulated; dots are, sized by their seeds
            held = seeds.sel(d=d).transpose("gamma", "rho").values
            g, r = np.nonzero(held)
            ax.scatter(rho[r], gamma[g], s=4 * np.sqrt(held[g, r] / held.max()), c="k", lw=0,
                       label="simulated (size: seeds)")
        ax.set(xlabel=r"$\rho$", ylabel=r"$\gamma$", title=f"d = {int(d)}", ylim=(gamma.min(), gamma.max()))
    axes[0].legend(loc="upper left", fontsize=7, framealpha=0.7)
    fig.suptitle(f"{LABELS[observable]}, n = {n}")
    return fig


def finite_size(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """Median over rho of gamma*(1 - rho) against d, one line per n; the limit is 1."""
    fig = Figure(figsize=(5.2, 3.8), layout="constrained")
    ax = fig.subplots()
    alpha = 0.0 if 0.0 in boundary["alpha"].values else float(boundary["alpha"][0])
    ds = boundary["d"].values
    for k, n in enumerate(boundary["n"].values):
        for obs, style in (("lambda", "-o"), ("eta", "--s")):
            scaled = boundary[f"gamma_star_{obs}_scaled"].sel(n=n, alpha=alpha)
            q = scaled.quantile([0.25, 0.5, 0.75], dim="rho", skipna=True).transpose("quantile", "d").values
            ax.errorbar(ds, q[1], yerr=np.nan_to_num([q[1] - q[0], q[2] - q[1]]), fmt=style,
                        color=f"C{k}", capsize=2, label=f"n = {int(n)}, {obs}")
    ax.axhline(1.0, color="k", lw=1, ls=":", label="Theorem 2.1")
    ax.set(xscale="log", xlabel="d", ylabel=r"median$_\rho$ $\gamma^*(1-\rho)$")
    ax.legend(fontsize=7)
    return fig
