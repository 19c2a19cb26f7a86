"""The report captions of paper 001's figures (the figures themselves: :mod:`.figures`), and the
axis both draw as the temperature.

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import FigureSpec
from attnsweep.dynamics.ensembles import ENSEMBLES
from attnsweep.grid import format_value, format_values

MODEL = {"sa": "SA (softmax, Eq. 2.6)", "usa": "USA (1/n, Section 3)"}


def temperature(values: dict[str, Any]) -> str:
    """The axis drawn as the temperature: beta, unless only gamma has several values."""
    return "gamma" if len(values["beta"]) == 1 and len(values["gamma"]) > 1 else "beta"


def _setting(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"{MODEL[options['normalisation']]}, {ENSEMBLES[options['matrices']]}, {options['integrator']} "
            f"with dt = {format_value(options['dt'])}, rho = {format_value(grid['rho'][0])}")


def caption_phase(n: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    axis = temperature(grid)
    other = "gamma" if axis == "beta" else "beta"
    return (
        f"Figure 3 of paper 001 at n = {n} (Figure 5 for random Q, K, V): probability that a pair of "
        f"tokens is clustered, <x_i, x_j> >= 1 - {format_value(options['delta'])}, over (t, {axis}) with "
        f"{other} = {format_value(grid[other][0])}, estimated from all pairs of every realisation; one panel per "
        f"d in {{{format_values(grid['d'])}}}. {_setting(grid, options)}. White: Gamma_inf,delta of Eq. 6.12 "
        "(Q = K = V = I only); red: the measured t* where the probability crosses 1/2, with a 95% "
        "confidence interval over realisations."
    )


def caption_clusters(n: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        f"Figure 4 of paper 001 at n = {n}: mean number of clusters (connected components of "
        f"<x_i, x_j> >= 1 - {format_value(options['cluster_delta'])}) over time, one line per temperature, "
        f"one panel per d in {{{format_values(grid['d'])}}}; shaded: one standard error over realisations. "
        f"Metastable plateaus above 1 precede the final merge. {_setting(grid, options)}."
    )


def caption_boundary(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        f"Measured boundary t*(beta) (clustered-pair probability 1/2, 95% confidence interval; band: "
        f"probability 0.1 to 0.9) against Gamma_inf,delta of Eq. 6.12 (black), one line per d in "
        f"{{{format_values(grid['d'])}}}, n in {{{format_values(grid['n'])}}}. {_setting(grid, options)}."
    )


def caption_snapshots(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    times = ", ".join(format_value(t) for t in options["snapshot_times"])
    return (
        f"Figure 4 of paper 001 (snapshots): the tokens of one realisation (seed 0) at t = {times}, "
        f"first two coordinates, one row per temperature. {_setting(grid, options)}."
    )


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    specs = []
    for n in grid["n"]:
        tag = f"n~{format_value(n)}"
        specs.append(FigureSpec(f"phase_{tag}", caption_phase(int(n), grid, options), "phase",
                                {"n": int(n)}))
        if "clusters" in options["observables"]:
            specs.append(FigureSpec(f"clusters_{tag}", caption_clusters(int(n), grid, options),
                                    "clusters", {"n": int(n)}))
    specs.append(FigureSpec("boundary", caption_boundary(grid, options)))
    if options["snapshot_times"]:
        specs.append(FigureSpec("snapshots", caption_snapshots(grid, options)))
    return specs
