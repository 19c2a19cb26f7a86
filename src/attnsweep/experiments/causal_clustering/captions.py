"""The report captions of paper 003's figures (the figures themselves: :mod:`.figures`), and what
both show: the (d, beta) pairs, the d and the beta drawn as lines.

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnsweep.contract import FigureSpec
from attnsweep.experiments.causal_clustering.cases import VALUES
from attnsweep.grid import format_value, format_values

MAX_LINES = 6  # lines per panel, and panel columns of the captured fractions
MAX_VALUES = 5  # panel columns of the final positions (Fig. 1 a-e)
MASK = {1: "causal (CSA)", 0: "full (SA)"}


def _first(grid: dict[str, list[float]], axis: str) -> str:
    """``axis = v``, naming the other values when there are several."""
    text = f"{axis} = {format_value(grid[axis][0])}"
    return text if len(grid[axis]) == 1 else f"{text} (first of {{{format_values(grid[axis])}}})"


def _value(options: dict[str, Any]) -> str:
    names = options["values"]
    text = VALUES[names[0]]
    return text if len(names) == 1 else f"{text}, the first of V in {{{', '.join(names)}}}"


def _masks(options: dict[str, Any]) -> str:
    return " and ".join(f"{'solid' if m == 'causal' else 'dashed'}: {MASK[int(m == 'causal')]}"
                        for m in options["masks"])


def _setting(options: dict[str, Any]) -> str:
    return (f"Q = K = I, tokens i.i.d. uniform on S^{{d-1}}, {options['integrator']} with "
            f"dt = {format_value(options['dt'])} to t_max = {format_value(options['t_max'])}; centres of x(0) "
            f"at separation delta = {format_value(options['separation'])} beta^{{-1/2}}, clusters the connected "
            f"components of <x_i, x_j> >= 1 - {format_value(options['cluster_delta'])}")


def shown_pairs(ds: list[float], betas: list[float]) -> list[tuple[float, float]]:
    return [(d, b) for d in ds for b in betas][:MAX_LINES]


def shown_ds(values: Any) -> Any:
    """The d drawn as colours beside a linestyle per mask: at most MAX_LINES lines in all."""
    return values[:MAX_LINES // 2]


def shown_values(values: np.ndarray) -> np.ndarray:
    """At most MAX_LINES of ``values``, evenly spread, ends kept."""
    return values[np.unique(np.linspace(0, len(values) - 1, min(MAX_LINES, len(values))).round().astype(int))]


def caption_captured(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    pairs = ", ".join(f"({format_value(d)}, {format_value(b)})" for d, b in shown_pairs(grid["d"], grid["beta"]))
    return (
        "Figure 3 of paper 003: fraction of tokens captured by the Renyi centres (black) and by the strong Renyi "
        f"centres (red) of x(0), followed by index, over t ({options['spacing']} time axis): seed mean (line) and "
        "0.1-0.9 quantiles over seeds (band). A token is captured when its geodesic distance to the current "
        "position of the nearest such centre is at most r = c beta^{-1/2} (centres capture themselves); one panel "
        "row per c in "
        f"{{{format_values(options['capture'])}}}, one panel column per (d, beta) in {{{pairs}}}; {_masks(options)}. "
        f"{_first(grid, 'n')}, {_value(options)}. {_setting(options)}."
    )


def caption_clusters(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    betas = format_values(shown_values(np.asarray(grid["beta"])))
    return (
        "Meta-stable clusters (Section 5 of paper 003): seed mean of the number of clusters over t "
        f"({options['spacing']} time axis, log count axis), shaded one standard error over seeds; one panel row "
        f"per d in {{{format_values(grid['d'])}}}, one column per mask in {{{', '.join(options['masks'])}}}, "
        "one colour "
        f"per beta in {{{betas}}}. {_first(grid, 'n')}, {_value(options)}. {_setting(options)}."
    )


def caption_boundary(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        "Collapse of paper 003 (Section 5: full collapse at t = exp(Omega(sqrt(beta)))). Left: median collapse "
        "time, when the fraction of seeds down to one cluster crosses 1/2 (interpolated between output times), "
        "with a 95% confidence interval over seeds, against beta (log time axis); a missing point: fewer than half "
        "the seeds reached one cluster by t_max. Right: seed mean of the longest time the cluster count stays constant "
        "strictly between 1 and n (meta-stable persistence). One colour per d in "
        f"{{{format_values(shown_ds(grid['d']))}}}; "
        f"{_masks(options)}. {_first(grid, 'n')}, {_value(options)}. {_setting(options)}."
    )


def caption_scaling(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        "Scaling with beta of paper 003 (Section 5: Theta(beta^{(d-1)/2}) meta-stable clusters, "
        "docs/papers/003.md §5 item 3; "
        "Lemma C.1). Left, log-log: seed mean of the cluster count at t_max (points) with the least-squares "
        "line of log mean count against log beta (legend: slope and 95% bootstrap-over-seeds interval) and "
        "the prediction beta^{(d-1)/2} (dotted) anchored at the first point of each d; "
        f"{_masks(options)} (markers filled for causal, open for full); {_value(options)}. Right, log-log: seed "
        "mean of the number of strong Renyi centres (circles) and Renyi centres (squares) of x(0), which depend on "
        "neither V nor the mask, against (1 - (1 - p)^n)/p of Lemma C.1 (dashed, "
        "p the normalised cap measure of radius delta) and, d = 2 only, the saturated Renyi count c_R 2 pi / "
        "delta (dotted, an infinite sequence; above the finite-n count); both go like delta^{-(d-1)} ~ "
        f"beta^{{(d-1)/2}}. One colour per d in {{{format_values(shown_ds(grid['d']))}}}; {_first(grid, 'n')}. "
        f"{_setting(options)}."
    )


def caption_final_positions(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    names, times = options["values"][:MAX_VALUES], sorted(set(options["snapshot_times"]))
    earlier = f", with their positions at the earlier snapshot times t in {{{format_values(times[:-1])}}} (faint grey)"
    view = ("in 3-D with a faint unit sphere (the first three coordinates, a projection for d > 3)"
            if grid["d"][0] >= 3 else "on the unit circle")
    return (
        "Figure 1 of paper 003: tokens of one realisation (first seed) at the last snapshot time "
        f"t = {format_value(times[-1])} (red){earlier if len(times) > 1 else ''}, {view}; one panel column per V: "
        f"{'; '.join(f'{n}: {VALUES[n]}' for n in names)}; one row per mask in {{{', '.join(options['masks'])}}}. "
        f"{_first(grid, 'n')}, {_first(grid, 'd')}, {_first(grid, 'beta')}. {_setting(options)}."
    )


def caption_centres(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    d = grid["d"][0]
    view = "on the unit circle" if d == 2 else f"projected on their first two coordinates (d = {format_value(d)} > 2)"
    delta = options["separation"] / np.sqrt(grid["beta"][0])
    return (
        "Figure 2 of paper 003: tokens of one realisation (first seed, blue) at the snapshot times t in "
        f"{{{format_values(sorted(set(options['snapshot_times'])))}}} (columns) {view}, with the Renyi centres (black) "
        "and the strong Renyi centres (red, a subset) of x(0) followed by index, so that they move; one row per "
        f"mask in {{{', '.join(options['masks'])}}}. delta = {format_value(options['separation'])} beta^{{-1/2}} "
        f"= {delta:.3g} rad. {_first(grid, 'n')}, {_first(grid, 'd')}, {_first(grid, 'beta')}, "
        f"{_value(options)}. {_setting(options)}."
    )


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    specs = [FigureSpec("captured", caption_captured(grid, options)),
             FigureSpec("clusters", caption_clusters(grid, options)),
             FigureSpec("boundary", caption_boundary(grid, options))]
    if len(grid["beta"]) > 1:
        specs.append(FigureSpec("scaling", caption_scaling(grid, options)))
    if options["snapshot_times"]:
        specs += [FigureSpec("final_positions", caption_final_positions(grid, options)),
                  FigureSpec("centres", caption_centres(grid, options))]
    return specs
