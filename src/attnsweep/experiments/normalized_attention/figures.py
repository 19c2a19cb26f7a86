"""normalized_attention's figures: 001's Fig. 3 per scheme, the boundary against H, the radii."""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.figure import Figure

from attnsweep.experiments.normalized_attention.captions import RADIAL
from attnsweep.reduce.crossing import error_bars

LABELS = {"post_ln": "Post-LN", "pre_ln": "Pre-LN", "mix_ln": "Mix-LN", "peri_ln": "Peri-LN", "ngpt": "nGPT",
          "ln_scaling": "LN-Scaling"}


def _schemes(data: xr.Dataset) -> list[tuple[int, str]]:
    """(flag, name) of every scheme of ``data``, in its order."""
    names = data["scheme"].attrs["flag_meanings"].split()
    return [(int(flag), names[int(flag)]) for flag in data["scheme"].values]


def phase(summary: xr.Dataset, boundary: xr.Dataset, n: int, heads: int) -> Figure:
    """One column per scheme, one row per d: the clustered-pair probability over (t, beta), t* on top."""
    data = summary["clustered"].sel(n=n, heads=heads)
    bnd = boundary.sel(n=n, heads=heads)
    schemes, ds = _schemes(summary), summary["d"].values
    fig = Figure(figsize=(2.8 * len(schemes) + 0.8, 2.6 * len(ds)), layout="constrained")
    axes = fig.subplots(len(ds), len(schemes), squeeze=False, sharex=True, sharey=True)
    t, beta = summary["t"].values, summary["beta"].values
    for row, d in zip(axes, ds):
        for ax, (flag, name) in zip(row, schemes):
            mesh = ax.pcolormesh(t, beta, data.sel(d=d, scheme=flag).transpose("beta", "t").values,
                                 shading="nearest", cmap="magma", vmin=0, vmax=1)
            at = bnd.sel(d=d, scheme=flag)
            star = at["t_star"].values
            ax.errorbar(star, beta, xerr=error_bars(star, at["t_star_low"].values, at["t_star_high"].values),
                        fmt="o", ms=2.5, color="tab:red", ecolor="tab:red", capsize=1.5)
            ax.set_title(f"{LABELS[name]}, d = {int(d)}", fontsize=9)
    for ax in axes[-1]:
        ax.set_xlabel("t")
    for ax in axes[:, 0]:
        ax.set_ylabel(r"$\beta$")
    fig.colorbar(mesh, ax=axes[:, -1], label=r"$P(\langle\theta_1, \theta_2\rangle \geq 1-\delta)$")
    fig.suptitle(f"clustered pairs per scheme, n = {n}, H = {heads}")
    return fig


def heads(summary: xr.Dataset, boundary: xr.Dataset, n: int) -> Figure:
    """One panel per d: beta* against H, one line per scheme."""
    bnd = boundary.sel(n=n)
    ds, h = summary["d"].values, summary["heads"].values
    fig = Figure(figsize=(3.8 * len(ds), 3.4), layout="constrained")
    axes = fig.subplots(1, len(ds), squeeze=False)[0]
    for ax, d in zip(axes, ds):
        for k, (flag, name) in enumerate(_schemes(summary)):
            at = bnd.sel(d=d, scheme=flag)
            star = at["beta_star"].values
            shift = h * 1.03 ** (k - 2.5)  # schemes side by side at each H
            ax.errorbar(shift, star, yerr=error_bars(star, at["beta_star_low"].values, at["beta_star_high"].values),
                        fmt="o-", ms=3.5, capsize=2, label=LABELS[name])
        ax.set(xscale="log", xlabel="heads H", ylabel=r"$\beta^*$", title=f"d = {int(d)}")
        ax.set_xticks(h, [str(int(v)) for v in h])
        ax.minorticks_off()
    axes[0].legend(fontsize=7, framealpha=0.7)
    fig.suptitle(rf"$\beta^*$ (t = {boundary.attrs['t_max']:g}), n = {n}")
    return fig


def radius(summary: xr.Dataset, boundary: xr.Dataset, n: int) -> Figure:
    """One panel per d: the seed-mean radius over t of each radial scheme, at up to three beta."""
    data = summary["radius"].sel(n=n).isel(heads=0)
    t, ds = summary["t"].values, summary["d"].values
    betas = summary["beta"].values[np.unique(np.linspace(0, summary.sizes["beta"] - 1, 3).round().astype(int))]
    fig = Figure(figsize=(3.8 * len(ds), 3.4), layout="constrained")
    axes = fig.subplots(1, len(ds), squeeze=False)[0]
    styles = ("-", "--", ":")
    for ax, d in zip(axes, ds):
        for k, (flag, name) in enumerate(s for s in _schemes(summary) if s[1] in RADIAL):
            for style, b in zip(styles, betas):
                ax.plot(t, data.sel(d=d, scheme=flag, beta=b).values, style, color=f"C{k}", lw=1.2,
                        label=rf"{LABELS[name]}, $\beta$ = {b:g}")
        ax.plot(t, 1 + t, "k--", lw=0.8, label="1 + t")
        ax.set(xlabel="t", ylabel="mean radius", title=f"d = {int(d)}", yscale="log")
    axes[0].legend(fontsize=6, framealpha=0.7)
    fig.suptitle(f"radii, n = {n}, H = {int(summary['heads'].values[0])}")
    return fig
