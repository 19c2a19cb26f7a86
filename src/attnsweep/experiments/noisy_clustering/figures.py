"""noisy_clustering's figures: the phase diagram in (beta, K), the hysteresis loops, the crossings
against n, the burn-in traces and the susceptibility; each ``(summary, boundary, **params) -> Figure``."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from attnsweep.experiments.noisy_clustering import theory
from attnsweep.experiments.noisy_clustering.resources import STARTS
from attnsweep.grid import format_value
from attnsweep.reduce.crossing import error_bars

FILL = {"uniform": None, "point": "none"}  # marker faces: filled from uniform tokens, open from one point
LINE = {"uniform": "-", "point": "--"}


def _starts(summary: xr.Dataset) -> list[tuple[int, str]]:
    return [(int(s), STARTS[int(s)]) for s in summary["start"].values]


def _unit(summary: xr.Dataset) -> str:
    return r"$K/K_\#$" if summary.attrs["K_unit"] == "K_sharp" else "K"


def _panels(count: int, width: float = 3.6, height: float = 3.2) -> tuple[Figure, np.ndarray]:
    fig = Figure(figsize=(width * count, height), layout="constrained")
    return fig, fig.subplots(1, count, squeeze=False)[0]


def phase(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """One panel per d: the crossings from each start against beta at the largest n, with K_#, K_c,
    K_s and beta_*."""
    ds, betas = summary["d"].values, summary["beta"].values
    fig, axes = _panels(len(ds))
    n = boundary["n"].values[-1]
    usa = summary.attrs["normalisation"] == "usa"
    for ax, d in zip(axes, ds):
        if usa:
            fine = np.linspace(betas.min(), betas.max(), 200)
            k_sharp = theory.k_sharp(fine, int(d))
            scale = theory.k_sharp(fine, int(d)) if summary.attrs["K_unit"] == "K_sharp" else 1.0
            ax.plot(fine, k_sharp / scale, "k-", lw=1, label=r"$K_\#$")
            at = summary.sel(d=d)
            ax.plot(betas, at["K_c"].values, "C3-", lw=1, label=r"$K_c$ (mean field)")
            ax.plot(betas, at["K_s"].values, "C3:", lw=1, label=r"$K_s$ (spinodal)")
            star = float(at["beta_star"])
            if betas.min() <= star <= betas.max():
                ax.axvline(star, color="0.5", ls=":", lw=1, label=r"$\beta_*$")
        for s, start in _starts(summary):
            b = boundary.sel(n=n, d=d)
            est = b[f"K_{start}"].values
            ax.errorbar(betas, est, yerr=error_bars(est, b[f"K_{start}_low"].values, b[f"K_{start}_high"].values),
                        fmt="o", mfc=FILL[start], color=f"C{s}", ms=4, capsize=2, label=f"from {start}")
        ax.set(xlabel=r"$\beta$", ylabel=_unit(summary), title=f"d = {int(d)}, n = {int(n)}")
    axes[0].legend(fontsize=7)
    return fig


def hysteresis(summary: xr.Dataset, boundary: xr.Dataset, n: int) -> Figure:
    """One panel per (d, beta): |m| against K from each start, with the mean-field |m| and the level."""
    ds, betas, k = summary["d"].values, summary["beta"].values, summary["K"].values
    fig = Figure(figsize=(max(3.0 * len(betas), 4.5), 2.7 * len(ds)), layout="constrained")  # room for the title
    axes = fig.subplots(len(ds), len(betas), squeeze=False)
    for row, d in zip(axes, ds):
        for ax, beta in zip(row, betas):
            at = summary.sel(n=n, d=d, beta=beta)
            for s, start in _starts(summary):
                mean, se = at["order"].sel(start=s).values, np.nan_to_num(at["order_se"].sel(start=s).values)
                ax.plot(k, mean, LINE[start], color=f"C{s}", marker="o", ms=3, label=f"from {start}")
                ax.fill_between(k, mean - se, mean + se, color=f"C{s}", alpha=0.2, lw=0)
                ax.plot(summary["K_curve"].values, at["order_mean_field"].sel(start=s).values, LINE[start],
                        color=f"C{s}", lw=0.8, alpha=0.7)
            ax.axhline(summary.attrs["level"], color="0.6", lw=0.8)
            ax.set(xlabel=_unit(summary), ylabel="|m|", ylim=(0, 1.02),
                   title=rf"d = {int(d)}, $\beta$ = {format_value(beta)}")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"order parameter from each start, n = {n}")
    return fig


def finite_size(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """One panel per d: the crossing from each start against n, one colour per beta, with its
    mean-field value."""
    ds, ns = boundary["d"].values, boundary["n"].values
    fig, axes = _panels(len(ds))
    for ax, d in zip(axes, ds):
        for j, beta in enumerate(boundary["beta"].values):
            b = boundary.sel(d=d, beta=beta)
            for i, (_, start) in enumerate(_starts(summary)):
                est = b[f"K_{start}"].values
                ax.errorbar(ns, est, yerr=error_bars(est, b[f"K_{start}_low"].values, b[f"K_{start}_high"].values),
                            fmt="o", mfc=FILL[start], color=f"C{j}", ms=4, capsize=2,
                            label=rf"$\beta$ = {format_value(beta)}" if i == 0 else None)
                ax.axhline(float(b[f"K_{start}_mean_field"]), color=f"C{j}", ls=LINE[start], lw=0.8)
        ax.set(xscale="log", xlim=(ns.min() / 1.5, ns.max() * 1.5), xlabel="n", ylabel=_unit(summary),
               title=f"d = {int(d)}")  # the limits from n: no crossing at all (common noise) leaves no point
    axes[0].legend(fontsize=7)
    return fig


def burn_in(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """One panel per d: the seed-mean |m| traces at the three couplings nearest the crossing from
    uniform tokens (the first beta, the largest n), from each start, and the end of the burn-in."""
    ds, k = summary["d"].values, summary["K"].values
    n, beta = summary["n"].values[-1], summary["beta"].values[0]
    fig, axes = _panels(len(ds))
    t = summary["trace_t"].values
    for ax, d in zip(axes, ds):
        at = summary["order_trace"].sel(n=n, d=d, beta=beta)
        first = _starts(summary)[0][1]
        centre = boundary[f"K_{first}"].sel(n=n, d=d, beta=beta).values
        centre = float(k[len(k) // 2]) if np.isnan(centre) else float(centre)
        near = np.sort(np.argsort(np.abs(k - centre))[:3])
        for j, i in enumerate(near):
            for s, start in _starts(summary):
                ax.plot(t, at.sel(start=s).isel(K=i).values, LINE[start], color=f"C{j}", lw=1,
                        label=f"K = {format_value(k[i])}" if s == _starts(summary)[0][0] else None)
        ax.axvline(summary.attrs["burn_in"], color="0.6", lw=1)
        clock = r"$\sigma^2 t$" if summary.attrs["clock"] == "noise" else "t"
        ax.set(xlabel=clock, ylabel="|m|", ylim=(0, 1.02), title=rf"d = {int(d)}, $\beta$ = {format_value(beta)}")
    axes[0].legend(fontsize=7)
    return fig


def susceptibility(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """One panel per d: n <|m|^2> from uniform tokens against K/K_#, one colour per n and beta,
    with 1 / (1 - K/K_#)."""
    ds = summary["d"].values
    fig, axes = _panels(len(ds))
    uniform = STARTS.index("uniform")
    for ax, d in zip(axes, ds):
        at = summary.sel(d=d, start=uniform)
        ratio = at["K_absolute"] / xr.DataArray(theory.k_sharp(at["beta"].values, int(d)), dims="beta")
        for i, n in enumerate(summary["n"].values):
            for beta in summary["beta"].values:
                ax.plot(ratio.sel(beta=beta).values, at["susceptibility"].sel(n=n, beta=beta).values, "o", ms=3,
                        color=f"C{i}", label=f"n = {int(n)}" if beta == summary["beta"].values[0] else None)
        x = np.linspace(0, 0.95, 100)
        ax.plot(x, 1 / (1 - x), "k-", lw=1, label=r"$1/(1 - K/K_\#)$")
        ax.set(xlabel=r"$K/K_\#$", ylabel=r"$n\langle|m|^2\rangle$", yscale="log", xlim=(0, 1.05),
               title=f"d = {int(d)}")
    axes[0].legend(fontsize=7)
    return fig
