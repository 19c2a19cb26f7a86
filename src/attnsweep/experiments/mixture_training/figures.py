"""Figures of mixture_training (paper 002) from the reduced data.

Curves are plotted against flow time t = lr step, one column per K, one line style per mode, at
the first value of every other axis (the captions name them); the boundary figure uses them all.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from attnsweep.experiments.mixture_training import theory

STYLES = {"joint": "-", "three_stage": "--", "attention_only": ":"}
SIGNAL = ("c", "v")


def _first(da: xr.DataArray, keep: tuple[str, ...]) -> xr.DataArray:
    """``da`` at the first value of every grid dimension not in ``keep`` (engine too)."""
    drop = [d for d in ("K", "L", "omega", "m", "lr", "b", "mode", "engine") if d in da.dims and d not in keep]
    return da.isel({d: 0 for d in drop})


def _modes(summary: xr.Dataset) -> list[str]:
    return summary.attrs["mode_names"].split()


def _columns(summary: xr.Dataset, rows: int, height: float = 2.6) -> tuple[Figure, np.ndarray]:
    cols = summary.sizes["K"]
    fig = Figure(figsize=(3.6 * cols, height * rows), layout="constrained")
    return fig, np.asarray(fig.subplots(rows, cols, squeeze=False))


def _band(ax: Any, t: np.ndarray, mean: np.ndarray, se: np.ndarray, **style: Any) -> None:
    ax.plot(t, mean, **style)
    ax.fill_between(t, mean - 2 * se, mean + 2 * se, alpha=0.2, color=style.get("color"), lw=0)


def _time(summary: xr.Dataset) -> np.ndarray:
    return _first(summary["t"], ()).values


def losses(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    fig, axes = _columns(summary, 1, 3.2)
    t = _time(summary)
    colours = {"loss_easy": "C0", "loss_hard": "C3", "loss_pop": "k"}
    for j, K in enumerate(summary["K"].values):
        ax = axes[0, j]
        for i, mode in enumerate(_modes(summary)):
            for var, colour in colours.items():
                pick = _first(summary[var].sel(K=K).isel(mode=i), ())
                se = _first(summary[f"{var}_se"].sel(K=K).isel(mode=i), ())
                _band(ax, t, pick.values, se.values, color=colour, ls=STYLES[mode],
                      label=f"{var.split('_')[1]} ({mode})")
            if mode == "three_stage":
                n_1, n_2 = _first(summary["stage_steps"].sel(K=K).isel(mode=i), ()).values
                for end in (n_1, n_1 + n_2):
                    ax.axvline(end * float(_first(summary["lr"], ())), color="0.5", ls="--", lw=0.6)
        if "stage1_loss_pop" in summary:
            ax.plot(t, _first(summary["stage1_loss_pop"].sel(K=K), ()).values, color="0.6", lw=3, alpha=0.5,
                    label="stage 1 closed form")
        ax.axhline(summary.attrs["loss_floor"], color="k", ls=":", lw=0.8)
        ax.set(title=f"K = {K}", xlabel="flow time t", ylabel="loss", ylim=(0, 0.75))
    axes[0, 0].legend(fontsize=6)
    return fig


def alignment(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    fig, axes = _columns(summary, 1, 3.2)
    t = _time(summary)
    for j, K in enumerate(summary["K"].values):
        ax = axes[0, j]
        for i, mode in enumerate(_modes(summary)):
            align = _first(summary["align"].sel(K=K, head=0).isel(mode=i), ())
            for kind, colour in ((0, "C2"), (1, "C1")):
                for k in range(1, int(K) + 1):
                    ax.plot(t, align.sel(kind=kind, k=k).values, color=colour, ls=STYLES[mode], lw=1,
                            label=f"w+ {SIGNAL[kind]}_k ({mode})" if k == 1 else None)
        for var in ("stage1_a", "stage1_c"):
            if var in summary:
                ax.plot(t, _first(summary[var].sel(K=K), ()).values, color="0.6", lw=3, alpha=0.5)
        ax.set(title=f"K = {K}", xlabel="flow time t", ylabel="w_+^T mu")
    axes[0, 0].legend(fontsize=6)
    return fig


def scores(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    fig, axes = _columns(summary, 2)
    t = _time(summary)
    for j, K in enumerate(summary["K"].values):
        for i, mode in enumerate(_modes(summary)):
            for var, colour in (("s_same", "C0"), ("s_cross", "C3")):
                mean = _first(summary[var].sel(K=K, head=0).isel(mode=i), ())
                se = _first(summary[f"{var}_se"].sel(K=K, head=0).isel(mode=i), ())
                _band(axes[0, j], t, mean.values, se.values, color=colour, ls=STYLES[mode], label=f"{var} ({mode})")
            hard = _first(summary["loss_hard"].sel(K=K).isel(mode=i), ())
            axes[1, j].plot(t, hard.values, color="C3", ls=STYLES[mode], label=mode)
        axes[0, j].set(title=f"K = {K}", ylabel="score (+ head)")
        axes[1, j].axhline(summary.attrs["loss_floor"], color="k", ls=":", lw=0.8)
        axes[1, j].set(xlabel="flow time t", ylabel="hard loss")
    axes[0, 0].legend(fontsize=6)
    return fig


def score_grid(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    K = int(summary["K"].values[0])
    score = _first(summary["score"].isel(K=0, head=0), ())
    t = _time(summary)
    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.subplots()
    styles = {(0, 0): ":", (0, 1): "-", (1, 0): "--", (1, 1): "-."}
    for (a, b), ls in styles.items():
        for k in range(1, K + 1):
            for j in range(1, K + 1):
                ax.plot(t, score.sel(key_kind=a, key_k=k, query_kind=b, query_k=j).values, ls=ls, lw=1,
                        label=f"{SIGNAL[a]}{k}^T S {SIGNAL[b]}{j}")
    ax.set(xlabel="flow time t", ylabel="mu^T S_+ nu", title=f"K = {K}, every score of the + head")
    ax.legend(fontsize=5, ncols=max(1, K))
    return fig


def attention(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    maps = _first(summary["attention"].isel(K=0, head=0), ()).dropna("sample", how="all")
    L = int(_first(summary["L"], ()).values)
    maps = maps.isel(query=slice(0, L), key=slice(0, L))
    steps, samples = maps.sizes["map_step"], maps.sizes["sample"]
    fig = Figure(figsize=(1.9 * samples, 1.9 * steps), layout="constrained")
    axes = np.asarray(fig.subplots(steps, samples, squeeze=False))
    labels = ["c1", "y v1"] + [f"e{i} v2" for i in range(1, L - 1)]
    for r in range(steps):
        for s in range(samples):
            ax = axes[r, s]
            image = ax.imshow(maps.isel(map_step=r, sample=s).values, vmin=0, vmax=1, cmap="viridis")
            y = "+" if s < samples // 2 else "-"
            signs = format(s % (samples // 2), f"0{L - 2}b").replace("0", "+").replace("1", "-")
            ax.set_title(f"step {int(maps['map_step'][r])}, y {y}, eps {signs}", fontsize=6)
            ax.set_xticks(range(L), labels, fontsize=5)
            ax.set_yticks(range(L), labels, fontsize=5)
    fig.colorbar(image, ax=axes, shrink=0.6, label="p (query row, key column)")
    return fig


def margin(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    fig, axes = _columns(summary, 2)
    t = _time(summary)
    for j, K in enumerate(summary["K"].values):
        for i, mode in enumerate(_modes(summary)):
            gamma = _first(summary["gamma"].sel(K=K).isel(mode=i), ())
            axes[0, j].plot(t, gamma.values, ls=STYLES[mode], color="C0", label=mode)
            for var, colour in (("sym_score", "C1"), ("sym_align", "C2")):
                axes[1, j].plot(t, _first(summary[var].sel(K=K).isel(mode=i), ()).values, ls=STYLES[mode],
                                color=colour, label=f"{var} ({mode})")
        axes[0, j].set(title=f"K = {K}", ylabel="max-margin gamma")
        axes[1, j].set(xlabel="flow time t", ylabel="residual (Lemma C.4)", yscale="symlog")
    axes[0, 0].legend(fontsize=6)
    axes[1, 0].legend(fontsize=6)
    return fig


def boundary(summary: xr.Dataset, boundary: xr.Dataset) -> Figure:
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    by_K, by_m = fig.subplots(1, 2)
    bnd = _first(boundary, ("K", "omega", "m"))
    K, widest = bnd["K"].values.astype(float), bnd["m"].max()  # inf where swept: the reference fit is at m = inf
    for i, omega in enumerate(bnd["omega"].values):
        row = bnd.sel(omega=omega, m=widest)
        est = row["t_star"].values
        err = np.abs(np.stack([row["t_star_low"].values, row["t_star_high"].values]) - est)
        by_K.errorbar(K, est, yerr=np.nan_to_num(err), fmt="o", color=f"C{i}", capsize=2, label=f"omega = {omega:g}")
        B, K0 = float(row["fit_B"]), float(row["fit_K0"])
        if np.isfinite(B):
            by_K.plot(K, B * (K - K0), color=f"C{i}", lw=1, label=f"B = {B:.0f}, K0 = {K0:.2f}")
        if summary.attrs["source"] == "synthetic":
            by_K.plot(K, theory.tstar_fit(K, omega), color=f"C{i}", ls=":", lw=1,
                      label="reference joint-GD fit, m = inf" if i == 0 else None)
    by_K.set(xlabel="K", ylabel="t*", title=f"t* against K (m = {float(widest):g})")
    by_K.legend(fontsize=6)
    m = bnd["m"].values.astype(float)
    finite = np.where(np.isinf(m), np.nan, m)
    position = np.where(np.isinf(m), np.nanmax(finite, initial=1) * 4 if np.isfinite(finite).any() else 1, m)
    for j, k in enumerate(K):
        row = bnd.sel(K=k).isel(omega=0)
        est = row["t_star"].values
        err = np.abs(np.stack([row["t_star_low"].values, row["t_star_high"].values]) - est)
        by_m.errorbar(position, est, yerr=np.nan_to_num(err), fmt="o-", color=f"C{j}", capsize=2, label=f"K = {k:g}")
    by_m.set(xscale="log", xlabel="width m (rightmost: inf)" if np.isinf(m).any() else "width m", ylabel="t*",
             title=f"t* against m (omega = {bnd['omega'].values[0]:g})")
    by_m.legend(fontsize=6)
    return fig
