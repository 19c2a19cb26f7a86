"""circle_synchronization's figures: beta_c(n) against the proven bounds, basin fractions, families."""

from __future__ import annotations

import matplotlib
import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

#: The proven bounds: a spurious attractor exists below -2/3 (for some n); none at or above -0.16.
BOUNDS = {-2 / 3: "-2/3", -0.16: "-0.16"}
COLOURS = {"usa": "tab:blue", "sa": "tab:orange"}


def _bounds(ax, horizontal: bool = True) -> None:
    for value, text in BOUNDS.items():
        (ax.axhline if horizontal else ax.axvline)(value, color="grey", ls="--", lw=0.8)
        if horizontal:
            ax.annotate(text, (1.0, value), xycoords=("axes fraction", "data"), fontsize=7, color="grey",
                        ha="right", va="bottom")


def _weightings(data: xr.Dataset) -> list[tuple[int, str]]:
    names = data["normalisation"].attrs["flag_meanings"].split()
    return [(int(flag), names[int(flag)]) for flag in data["normalisation"].values]


def beta_c(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """beta_c(n): random-start brackets per weighting, the structured search's values, the bounds."""
    fig = Figure(figsize=(6.0, 3.8), layout="constrained")
    ax = fig.subplots()
    n = boundary["n"].values
    for k, (flag, name) in enumerate(_weightings(boundary)):
        at = boundary.sel(normalisation=flag)
        low, high = at["beta_c_low"].values, at["beta_c_high"].values
        top = np.where(np.isfinite(high), high, low)
        x = n + 0.12 * (k - 0.5)
        found = np.isfinite(low)
        ax.vlines(x[found], low[found], top[found], color=COLOURS[name], lw=2.5, label=f"random starts ({name})")
        ax.plot(x[~found], high[~found], "v", color=COLOURS[name], ms=4)
    ax.plot(n, summary["beta_c_structured"].sel(n=n).values, "k_", ms=10, mew=1.5, label="structured search")
    _bounds(ax)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("n")
    ax.set_ylabel(r"$\beta_c(n)$")
    ax.legend(fontsize=7, loc="lower right")
    return fig


def basins(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """Fraction of starts ending at a spurious attractor against beta, one line per n and panel per weighting."""
    weightings = _weightings(summary)
    fig = Figure(figsize=(4.2 * len(weightings), 3.4), layout="constrained")
    axes = fig.subplots(1, len(weightings), squeeze=False, sharey=True)[0]
    beta = summary["beta"].values
    cmap = matplotlib.colormaps["viridis"]
    ns = summary["n"].values
    for ax, (flag, name) in zip(axes, weightings):
        for i, n in enumerate(ns):
            at = summary.sel(n=n, normalisation=flag)
            p = at["p_spurious"].values
            colour = cmap(i / max(len(ns) - 1, 1))
            ax.plot(beta, p, "o-", ms=2.5, color=colour, label=f"n = {int(n)}")
            ax.fill_between(beta, at["p_spurious_low"].values, at["p_spurious_high"].values, color=colour, alpha=0.15)
            structured = float(summary["beta_c_structured"].sel(n=n))
            if np.isfinite(structured):
                ax.axvline(structured, ymax=0.06, color=colour, lw=1.5)
        _bounds(ax, horizontal=False)
        ax.set_xlabel(r"$\beta$")
        ax.set_title(name.upper(), fontsize=9)
    axes[0].set_ylabel("fraction of starts at a spurious attractor")
    axes[-1].legend(fontsize=6, ncol=2)
    return fig


def families(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """Every stable family's threshold against n, coloured by its number of clusters."""
    fig = Figure(figsize=(6.0, 3.8), layout="constrained")
    ax = fig.subplots()
    masses = summary["family_masses"].values
    k = np.isfinite(masses).sum(-1).astype(float)
    beta = summary["family_beta"].values
    n = np.broadcast_to(summary["n"].values[:, None], beta.shape)
    fold = summary["family_fold"].values == 1
    kept = np.isfinite(beta)
    scatter = None
    for mask, marker in ((kept & ~fold, "o"), (kept & fold, "^")):
        if mask.any():
            scatter = ax.scatter(n[mask], beta[mask], c=k[mask], cmap="plasma", vmin=2, vmax=max(k.max(), 3),
                                 s=14, marker=marker)
    if scatter is not None:
        fig.colorbar(scatter, ax=ax, label="clusters k", ticks=MaxNLocator(integer=True))
    _bounds(ax)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("n")
    ax.set_ylabel("family threshold")
    return fig
