"""Figures 1-3 of paper 003 (final positions, Renyi centres, captured fractions), the
meta-stable cluster counts, their beta scaling and the collapse boundary, drawn from the
reduced datasets."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure
from matplotlib.ticker import LogLocator

from attnsweep.experiments.causal_clustering.captions import MASK, MAX_VALUES, shown_ds, shown_pairs, shown_values
from attnsweep.grid import format_value
from attnsweep.reduce.crossing import error_bars

STYLE = {1: "-", 0: "--"}
FILL = {1: "full", 0: "none"}  # markers: filled causal, open full
KINDS = {"renyi": ("Renyi centres", "k"), "strong": ("strong Renyi centres", "tab:red")}


def _log(ax: Any, which: str, subs: tuple[float, ...] = (2.0, 3.0, 5.0)) -> None:
    """Log scale on ``which`` ("x" or "y") in plain numbers, ticks at the powers of ten and at
    ``subs`` times them."""
    ax.set(**{f"{which}scale": "log"})
    axis = getattr(ax, f"{which}axis")
    axis.set_minor_locator(LogLocator(subs=subs))
    axis.set_major_formatter("{x:g}")
    axis.set_minor_formatter("{x:g}")


def _time(ax: Any, summary: xr.Dataset) -> None:
    """Time axis, log for log-spaced outputs."""
    if summary.attrs["spacing"] == "log":
        _log(ax, "x", ())
    ax.set_xlabel("t")


def captured(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Captured fractions over t: rows per capture radius, columns per (d, beta)."""
    data = summary.isel(n=0, value=0)
    pairs, captures, t = shown_pairs(data["d"].values, data["beta"].values), data["capture"].values, data["t"].values
    fig = Figure(figsize=(3.0 * len(pairs), 2.7 * len(captures)), layout="constrained")
    axes = fig.subplots(len(captures), len(pairs), squeeze=False, sharex=True, sharey=True)
    for row, c in zip(axes, captures):
        for ax, (d, beta) in zip(row, pairs):
            for mask in data["causal"].values:
                at = {"d": d, "beta": beta, "causal": mask, "capture": c}
                for kind, (label, color) in KINDS.items():
                    var = f"captured_{kind}"
                    ax.fill_between(t, data[f"{var}_q10"].sel(at).values, data[f"{var}_q90"].sel(at).values,
                                    color=color, alpha=0.12, lw=0)
                    ax.plot(t, data[var].sel(at).values, STYLE[int(mask)], color=color, lw=1.2,
                            label=f"{label}, {MASK[int(mask)]}")
            ax.set(title=rf"d = {int(d)}, $\beta$ = {format_value(beta)}, r = {format_value(c)} $\beta^{{-1/2}}$",
                   ylim=(0, 1.02))
            ax.title.set_fontsize(9)
        row[0].set_ylabel("fraction captured")
    for ax in axes[-1]:
        _time(ax, summary)
    axes[0, 0].legend(fontsize=7, loc="lower right")
    return fig


def clusters(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Seed-mean cluster count over t, rows per d, columns per mask, one colour per beta."""
    data = summary.isel(n=0, value=0)
    ds, masks, t = data["d"].values, data["causal"].values, data["t"].values
    betas = shown_values(data["beta"].values)
    fig = Figure(figsize=(3.6 * len(masks), 2.9 * len(ds)), layout="constrained")
    axes = fig.subplots(len(ds), len(masks), squeeze=False, sharex=True, sharey=True)
    for row, d in zip(axes, ds):
        for ax, mask in zip(row, masks):
            for k, beta in enumerate(betas):
                at = {"d": d, "causal": mask, "beta": beta}
                m, s = data["clusters"].sel(at).values, np.nan_to_num(data["clusters_se"].sel(at).values)
                ax.plot(t, m, color=f"C{k}", label=rf"$\beta$ = {format_value(beta)}")
                ax.fill_between(t, m - s, m + s, color=f"C{k}", alpha=0.2, lw=0)
            ax.set_title(f"d = {int(d)}, {MASK[int(mask)]}")
            _log(ax, "y")
        row[0].set_ylabel("clusters")
    for ax in axes[-1]:
        _time(ax, summary)
    axes[0, 0].legend(fontsize=7)
    return fig


def _lines(bnd: xr.Dataset) -> list[tuple[int, float, int]]:
    """(colour index, d, mask) of the lines of a boundary panel, d-major."""
    return [(k, d, m) for k, d in enumerate(shown_ds(bnd["d"].values)) for m in bnd["causal"].values]


def boundary(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Median collapse time with its interval (left) and persistence (right) against beta."""
    data = bnd.isel(n=0, value=0)
    beta = data["beta"].values
    fig = Figure(figsize=(9.0, 3.8), layout="constrained")
    left, right = fig.subplots(1, 2, sharex=True)
    for k, d, mask in _lines(data):
        b = data.sel(d=d, causal=mask)
        color, style, label = f"C{k}", STYLE[int(mask)], f"d = {int(d)}, {MASK[int(mask)]}"
        star = b["t_collapse"].values
        err = error_bars(star, b["t_collapse_low"].values, b["t_collapse_high"].values)
        left.errorbar(beta, star, yerr=err, fmt="o" + style, ms=3, color=color, capsize=2, label=label)
        right.plot(beta, b["persistence"].values, "o" + style, ms=3, color=color, label=label)
    if not np.isfinite(data["t_collapse"].values).any():
        left.text(0.5, 0.5, "no run reached one cluster by t_max", transform=left.transAxes, ha="center")
        left.set_yticks([])
    else:
        _log(left, "y")
    left.set(xlabel=r"$\beta$", ylabel="median time to one cluster")
    right.set(xlabel=r"$\beta$", ylabel="longest meta-stable plateau (time)")
    right.legend(fontsize=7, handlelength=3.5)
    return fig


def scaling(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Log-log against beta: meta-stable clusters at t_max with fit and prediction (left),
    centre counts of x(0) with Lemma C.1 (right)."""
    data = bnd.isel(n=0)
    beta = data["beta"].values
    fig = Figure(figsize=(10.0, 4.0), layout="constrained")
    left, right = fig.subplots(1, 2)
    anchored: set[float] = set()
    for k, d, mask in _lines(data):
        b = data.isel(value=0).sel(d=d, causal=mask)
        y = b["clusters_final"].values
        slope, low, high = (float(b[v]) for v in ("exponent", "exponent_low", "exponent_high"))
        fit = np.exp(np.log(y).mean() + slope * (np.log(beta) - np.log(beta).mean()))
        left.plot(beta, y, "o", ms=4, color=f"C{k}", fillstyle=FILL[int(mask)])
        left.plot(beta, fit, STYLE[int(mask)], color=f"C{k}",
                  label=f"d = {int(d)}, {MASK[int(mask)]}: slope {slope:.2f} [{low:.2f}, {high:.2f}]")
        if d not in anchored:
            anchored.add(d)
            left.plot(beta, y[0] * (beta / beta[0]) ** ((d - 1) / 2), ":", color=f"C{k}", lw=1,
                      label=rf"d = {int(d)}: $\propto\beta^{{(d-1)/2}} = \beta^{{{format_value((d - 1) / 2)}}}$")
    for k, d in enumerate(shown_ds(data["d"].values)):
        b = data.sel(d=d)
        right.plot(beta, b["strong_count"].values, "o", color=f"C{k}", label=f"d = {int(d)}, strong")
        right.plot(beta, b["renyi_count"].values, "s", mfc="none", color=f"C{k}", label=f"d = {int(d)}, Renyi")
        right.plot(beta, b["strong_count_theory"].values, "--", color=f"C{k}", label=f"d = {int(d)}, Lemma C.1")
        if np.isfinite(b["renyi_count_saturated"].values).any():
            right.plot(beta, b["renyi_count_saturated"].values, ":", color=f"C{k}",
                       label=rf"d = {int(d)}, $c_R 2\pi/\delta$")
    for ax in (left, right):
        _log(ax, "x")
        _log(ax, "y")
    left.set(xlabel=r"$\beta$", ylabel="clusters at t_max")
    right.set(xlabel=r"$\beta$", ylabel="centres of x(0)")
    left.legend(fontsize=7, handlelength=3.5)
    right.legend(fontsize=7, handlelength=3.5)
    return fig


def _sphere(ax: Any) -> None:
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    ax.plot_wireframe(np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v), color="0.85", lw=0.3)
    ax.set(xlim=(-1, 1), ylim=(-1, 1), zlim=(-1, 1))
    ax.set_box_aspect((1, 1, 1), zoom=1.3)
    ax.set_axis_off()


def _circle(ax: Any) -> None:
    angle = np.linspace(0, 2 * np.pi, 200)
    ax.plot(np.cos(angle), np.sin(angle), color="0.8", lw=0.8, zorder=0)
    ax.set(aspect="equal", xticks=[], yticks=[], xlim=(-1.15, 1.15), ylim=(-1.15, 1.15))


def final_positions(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Tokens of the first seed at the last snapshot time (red) and earlier ones (grey), one
    column per value matrix, one row per mask."""
    snap = summary["snapshot"].isel(n=0, d=0, beta=0)
    dim = 3 if int(summary["d"][0]) >= 3 else 2
    names, masks = summary.attrs["value_names"].split(", ")[:MAX_VALUES], snap["causal"].values
    fig = Figure(figsize=(2.8 * len(names), 2.9 * len(masks)), layout="constrained")
    grid = fig.add_gridspec(len(masks), len(names))
    for r, mask in enumerate(masks):
        for v, name in enumerate(names):
            x = snap.sel(causal=mask).isel(value=v).values[..., :dim]  # (snapshot_t, token, dim)
            ax = fig.add_subplot(grid[r, v], projection="3d" if dim == 3 else None)
            (_sphere if dim == 3 else _circle)(ax)
            shade = {"depthshade": False} if dim == 3 else {}
            ax.scatter(*x[:-1].reshape(-1, dim).T, s=6, color="0.55", alpha=0.5, lw=0, **shade)
            ax.scatter(*x[-1].T, s=20, color="tab:red", **shade)
            ax.set_title(f"{name}, {MASK[int(mask)]}", fontsize=9)
    return fig


def centres(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Tokens of the first seed at every snapshot time (columns) on the circle, one row per
    mask, with the Renyi (black) and strong Renyi (red) centres."""
    data = summary.isel(n=0, d=0, beta=0, value=0)
    times, masks = data["snapshot_t"].values, data["causal"].values
    fig = Figure(figsize=(2.6 * len(times), 2.8 * len(masks)), layout="constrained")
    axes = fig.subplots(len(masks), len(times), squeeze=False)
    for row, mask in zip(axes, masks):
        at = data.sel(causal=mask)
        renyi, strong = at["renyi_centre"].values == 1, at["strong_centre"].values == 1
        for ax, t in zip(row, times):
            xy = at["snapshot"].sel(snapshot_t=t).values[:, :2]
            _circle(ax)
            ax.scatter(*xy.T, s=8, color="tab:blue", alpha=0.6, lw=0)
            ax.scatter(*xy[renyi].T, s=28, color="k")
            ax.scatter(*xy[strong].T, s=16, color="tab:red")
            ax.set_title(f"{MASK[int(mask)]}, t = {format_value(t)}", fontsize=9)
    return fig
