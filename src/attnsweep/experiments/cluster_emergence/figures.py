"""Figures 3-8, 10, 11, 12, 18 and 7b/15 of paper 004 (rank of P(t), P(t) itself, queries and keys
joined by P, token snapshots, a checkpoint's value spectra, eigen-coordinates) and the boundary view,
drawn from the reduced datasets."""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.patches import Circle

from attnsweep.experiments.cluster_emergence import theory
from attnsweep.experiments.cluster_emergence.captions import MAX_LINES, WIDTH
from attnsweep.experiments.cluster_emergence.good_triples import PAPER_SCORES
from attnsweep.grid import format_value
from attnsweep.reduce.crossing import error_bars


def _combos(summary: xr.Dataset) -> list[dict[str, float]]:
    combos = [{"n": n, "scale": a} for n in summary["n"].values for a in summary["scale"].values]
    return combos[:MAX_LINES]


def rank(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    """Rank and leaders (top) and Boolean defect (bottom) over t, one column per d."""
    ds, t = summary["d"].values, summary["t"].values
    fig = Figure(figsize=(3.6 * len(ds), 5.6), layout="constrained")
    axes = fig.subplots(2, len(ds), squeeze=False, sharex=True)
    for col, d in enumerate(ds):
        top, bottom = axes[0, col], axes[1, col]
        for k, at in enumerate(_combos(summary)):
            sel = {"d": d, **at}
            color, label = f"C{k}", f"n = {int(at['n'])}, a = {format_value(at['scale'])}"
            for ax, var in ((top, "rank"), (bottom, "defect")):
                m, s = summary[var].sel(sel).values, np.nan_to_num(summary[f"{var}_se"].sel(sel).values)
                ax.plot(t, m, color=color, label=label if var == "rank" else None)
                ax.fill_between(t, m - s, m + s, color=color, alpha=0.2, lw=0)
            top.plot(t, summary["leaders"].sel(sel).values, "--", color=color)
            star = float(boundary["t_star"].sel(sel))
            if np.isfinite(star):
                bottom.axvline(star, color=color, lw=0.8)
        lost = boundary["t_unresolved"].sel(d=d).values
        if np.isfinite(lost).any():
            for ax in (top, bottom):
                ax.axvspan(np.nanmin(lost), t[-1], color="0.85", lw=0)
        bound = summary["rank_bound"].sel(d=d).values
        if np.isfinite(bound).any():
            top.axhline(np.nanmax(bound), color="k", ls=":", lw=1, label="Thm 2.1 limit")
        bottom.axhline(0.5, color="0.4", ls=":", lw=1)
        top.set(title=f"d = {int(d)}", ylabel="rank P(t) (solid), leaders (dashed)")
        bottom.set(xlabel="t", ylabel=r"$b(t) = 1 - \min_i \max_j P_{ij}$", ylim=(-0.02, 1.02))
    axes[0, 0].legend(fontsize=7)
    return fig


def coordinates(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Eigen-coordinates of the first seed: sign-group means +- std for Re(lambda) > 0 (top),
    variance over all tokens (bottom)."""
    ds, t = summary["d"].values, summary["t"].values
    fig = Figure(figsize=(3.8 * len(ds), 5.6), layout="constrained")
    axes = fig.subplots(2, len(ds), squeeze=False, sharex=True)
    for col, d in enumerate(ds):
        sel = _shown(summary, d)
        mean = summary["coordinate_mean"].sel(sel).transpose("t", "mode", "sign")
        std = np.sqrt(summary["coordinate_var"].sel(sel).transpose("t", "mode", "sign"))
        real = summary["eigenvalue_real"].sel(sel).values
        imag = summary["eigenvalue_imag"].sel(sel).values
        top, bottom = axes[0, col], axes[1, col]
        for j in np.flatnonzero(np.isfinite(real)):
            color = f"C{j % 10}"
            value = f"{real[j]:.3g}" + (f"{imag[j]:+.3g}i" if imag[j] else "")
            label = rf"$\lambda_{{{j + 1}}}$ = {value}" if j < MAX_LINES else None
            if real[j] > 0 and j < MAX_LINES:
                for sign, style in ((1, "-"), (-1, "--")):
                    m, s = mean.sel(mode=j, sign=sign).values, std.sel(mode=j, sign=sign).values
                    top.plot(t, m, style, color=color, label=label if sign > 0 else None)
                    top.fill_between(t, m - s, m + s, color=color, alpha=0.2, lw=0)
            var = std.sel(mode=j, sign=0).values ** 2
            bottom.plot(t, np.where(var > 0, var, np.nan), "-" if real[j] > 0 else "--", color=color, label=label)
        top.set(title=f"d = {int(d)}", ylabel=r"$\varphi_j^*(z_i)$, tokens with $\varphi_j^* > 0$ / $< 0$")
        bottom.set(xlabel="t", ylabel=r"variance over all i of $\varphi_j^*(z_i)$", yscale="log")
        bottom.legend(fontsize=7)
    return fig


def boundary(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """t* with its interval and the 0.9-0.1 band against the axis with most values."""
    sizes = {axis: bnd.sizes[axis] for axis in ("n", "scale", "d")}
    axis = max(sizes, key=lambda a: (sizes[a], -list(sizes).index(a)))
    others = [a for a in sizes if a != axis]
    fig = Figure(figsize=(5.4, 4.0), layout="constrained")
    ax = fig.subplots()
    x = bnd[axis].values
    pairs = [(u, w) for u in bnd[others[0]].values for w in bnd[others[1]].values][:MAX_LINES]
    for k, (u, w) in enumerate(pairs):
        b = bnd.sel({others[0]: u, others[1]: w})
        color = f"C{k}"
        ax.fill_between(x, b["t_90"].values, b["t_10"].values, color=color, alpha=0.15, lw=0)
        star = b["t_star"].values
        err = error_bars(star, b["t_star_low"].values, b["t_star_high"].values)
        ax.errorbar(x, star, yerr=err, fmt="o-", ms=3, color=color, capsize=1.5,
                    label=f"{others[0]} = {format_value(u)}, {others[1]} = {format_value(w)}")
    ax.set(xlabel={"n": "n", "scale": "a (initial box half-width)", "d": "d"}[axis], ylabel=r"$t^*$")
    ax.legend(fontsize=7)
    return fig


def _snapshot_at(summary: xr.Dataset, d: float) -> xr.Dataset:
    return summary.sel(_shown(summary, d))


def _shown(summary: xr.Dataset, d: float) -> dict[str, float]:
    """The point shown for ``d``: the first (n, scale) that holds the first seed (in a refined
    sweep some rows hold none; on a product grid the first (n, scale))."""
    held = summary["multiplicity"].sel(d=d).notnull().transpose("n", "scale").values
    i, j = np.argwhere(held)[0] if held.any() else (0, 0)
    return {"d": d, "n": summary["n"].values[i], "scale": summary["scale"].values[j]}


def _order(view: xr.Dataset) -> np.ndarray:
    """Tokens by phi_1^*(z_i) at the first snapshot time."""
    return np.argsort(view["coordinate_snapshot"].isel(snapshot_t=0, mode=0).values, kind="stable")


def attention(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """P(t) of the first seed at the snapshot times (columns), one row per d."""
    ds, times = summary["d"].values, summary["snapshot_t"].values
    tol = float(summary.attrs["rank_tol"])
    fig = Figure(figsize=(2.6 * len(times), 2.7 * len(ds)), layout="constrained")
    axes = fig.subplots(len(ds), len(times), squeeze=False)
    for row, d in zip(axes, ds):
        view = _snapshot_at(summary, d)
        order = _order(view)
        for ax, t in zip(row, times):
            p = view["attention_snapshot"].sel(snapshot_t=t).values[np.ix_(order, order)]
            rank = np.linalg.matrix_rank(p, tol=tol * np.linalg.norm(p, 2)) if np.isfinite(p).all() else "NaN"
            ax.imshow(p, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
            ax.set(xticks=[], yticks=[], title=f"d = {int(d)}, t = {format_value(t)}, rank {rank}")
    return fig


def leaders(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Queries Q x_i and keys K x_j of the first seed joined by lines of width ~ P_ij (Fig. 4)."""
    ds, times = summary["d"].values, summary["snapshot_t"].values
    fig = Figure(figsize=(2.9 * len(times), 2.9 * len(ds)), layout="constrained")
    axes = fig.subplots(len(ds), len(times), squeeze=False)
    for row, d in zip(axes, ds):
        view = _snapshot_at(summary, d)
        for ax, t in zip(row, times):
            at = view.sel(snapshot_t=t)
            query, key = at["query_snapshot"].values[:, :2], at["key_snapshot"].values[:, :2]
            p = at["attention_snapshot"].values
            if int(d) == 1:
                query, key = np.c_[query[:, 0], np.ones(len(p))], np.c_[key[:, 0], np.zeros(len(p))]
            i, j = np.nonzero(p > 1e-3)
            segments = np.stack([query[i], key[j]], axis=1)
            ax.add_collection(LineCollection(segments, linewidths=WIDTH * p[i, j], colors="0.35", alpha=0.6))
            ax.scatter(*query.T, color="#7b3294", s=12, zorder=3, label="Q x_i")
            ax.scatter(*key.T, color="#1b9e3e", s=12, zorder=3, label="K x_j")
            ax.set_title(f"d = {int(d)}, t = {format_value(t)}, {len(np.unique(p.argmax(-1)))} leaders", fontsize=9)
            ax.tick_params(labelsize=6)
            if int(d) == 1:
                ax.set_yticks([0, 1], ["keys", "queries"])
    axes[0, 0].legend(fontsize=7)
    return fig


def _hyperplanes(ax: Any, view: xr.Dataset, t: float) -> None:
    """d = 2, good-triple spectrum: phi_1 and the lines phi_1^*(x) = c, c in {min, 0, max}."""
    phi = view["eigenvector"].isel(mode=0).values[:2]
    dual = view["dual_functional"].isel(mode=0).values[:2]
    c = view["coordinate_snapshot"].sel(snapshot_t=t).isel(mode=0).values
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    normal = dual / np.dot(dual, dual)
    along = np.array([-dual[1], dual[0]]) * 4 * max(x1 - x0, y1 - y0) / np.linalg.norm(dual)
    for level in (np.nanmin(c), 0.0, np.nanmax(c)):
        base = level * normal
        ax.plot(*np.stack([base - along, base + along]).T, color="k", lw=0.7, ls="--")
    span = 0.25 * max(x1 - x0, y1 - y0)
    ax.annotate("", xy=tuple(span * phi), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "k"})
    ax.set(xlim=(x0, x1), ylim=(y0, y1))


def snapshots(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Tokens of the first seed at the snapshot times (columns), one row per d."""
    ds, times = summary["d"].values, summary["snapshot_t"].values
    fig = Figure(figsize=(2.9 * len(times), 2.9 * len(ds)), layout="constrained")
    grid = fig.add_gridspec(len(ds), len(times))
    for r, d in enumerate(ds):
        view = _snapshot_at(summary, d)
        dim = min(int(d), 3)
        leader = view["attention_snapshot"].isel(snapshot_t=-1).values.argmax(-1)
        colors = np.unique(leader, return_inverse=True)[1] % 10
        k = int(view["multiplicity"])
        first = view["snapshot"].isel(snapshot_t=0).values[:, :dim]
        vertices = first[theory.hull_vertices(first)] if k == int(d) and 1 < int(d) <= 3 else None
        for col, t in enumerate(times):
            z = view["snapshot"].sel(snapshot_t=t).values[:, :dim]
            ax = fig.add_subplot(grid[r, col], projection="3d" if dim == 3 else None)
            if dim == 1:
                rank_at_start = np.argsort(np.argsort(first[:, 0], kind="stable"), kind="stable")
                ax.scatter(z[:, 0], rank_at_start, c=colors, cmap="tab10", vmin=0, vmax=9, s=10)
                ax.set(xlabel="z", ylabel="rank of z at the first time")
            else:
                shade = {"depthshade": False} if dim == 3 else {}
                ax.scatter(*z.T, c=colors, cmap="tab10", vmin=0, vmax=9, s=10, **shade)
                if vertices is not None:
                    ax.scatter(*vertices.T, marker="x", color="0.5", s=25, lw=0.8)
                if dim == 2:
                    ax.set_aspect("equal", adjustable="datalim")
                if dim == 2 and summary.attrs.get("equation") == "nonlinear":
                    for line in (ax.axhline, ax.axvline):
                        line(0, color="0.6", lw=0.6)
                if dim == 2 and k == 1:
                    _hyperplanes(ax, view, t)
            ax.set_title(f"d = {int(d)}, t = {format_value(t)}", fontsize=9)
            ax.tick_params(labelsize=6)
    return fig


def value_spectra(summary: xr.Dataset, bnd: xr.Dataset) -> Figure:
    """Fig. 10: the spectrum of every head's V_h in the complex plane, a panel per head."""
    view = _snapshot_at(summary, summary["d"].values[0])
    heads = view["head"].values
    cols = int(np.ceil(np.sqrt(len(heads))))
    rows = int(np.ceil(len(heads) / cols))
    fig = Figure(figsize=(2.9 * cols, 2.9 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(heads):]:
        ax.remove()
    for ax, h in zip(axes.flat, heads):
        at = view.sel(head=h)
        real, imag = at["head_eigenvalue_real"].values, at["head_eigenvalue_imag"].values
        good = bool(at["head_good_triple"])
        color = "#1b7837" if good else "#b2182b"
        ax.axhline(0, color="0.8", lw=0.6)
        ax.axvline(0, color="0.8", lw=0.6)
        ax.scatter(real[1:], imag[1:], s=8, color="0.3", lw=0)
        ax.scatter(real[:1], imag[:1], marker="*", s=90, color=color, zorder=3)
        if len(real) > 1:
            ax.add_patch(Circle((0, 0), float(np.hypot(real[1], imag[1])), fill=False, ls=":", color="0.5"))
        ax.set_aspect("equal", adjustable="datalim")
        score, score_head = float(at["head_phi1_score"]), float(at["head_phi1_score_head"])
        form = r"$\langle Q\varphi_1, K\varphi_1\rangle$ = "
        lines = [f"head {int(h)}: " + ("good triple" if good else "not a good triple"),
                 rf"$\lambda_1$ = {real[0]:.4g}" + (f"{imag[0]:+.3g}i" if imag[0] else "")
                 + rf", $|\lambda_2|/|\lambda_1|$ = {float(at['head_gap']):.3f}",
                 form + (f"{score:.4f} ({score_head:.4g})" if np.isfinite(score) else r"none: $\lambda_1$ complex")]
        if int(h) in PAPER_SCORES:
            lines[-1] += f", paper {PAPER_SCORES[int(h)]:.4f}"
            for spine in ax.spines.values():
                spine.set(linewidth=2.5, color="#e08214")
        ax.set_title("\n".join(lines), fontsize=7, color=color)
        ax.set_xlabel(r"Re $\lambda$", fontsize=7)
        ax.set_ylabel(r"Im $\lambda$", fontsize=7)
        ax.tick_params(labelsize=6)
    return fig
