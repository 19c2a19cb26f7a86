"""The report captions of paper 000's figures (the figures themselves: :mod:`.figures`).

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import FigureSpec
from attnsweep.grid import format_value, format_values


def caption_lambda(n: int, grid: dict[str, list[float]]) -> str:
    return (
        f"Figure 1 of paper 000 at n = {n}: seed-mean angle ratio lambda (Eq. 26) over (rho, gamma), "
        f"one panel per d in {{{format_values(grid['d'])}}}, alpha = {format_value(grid['alpha'][0])}. "
        "Dashed: gamma = 1/(1 - rho) (Theorem 2.1). Markers: measured gamma* where lambda crosses "
        "1/(1 + 3 rho) (Eq. 7), with a 95% confidence interval over seeds."
    )


def caption_eta(n: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    method = ("exact, from Gram matrices" if options["eta_method"] == "exact"
              else f"Hutchinson with {options['probes']} Rademacher probes, as in the paper")
    return (
        f"Figure 2 of paper 000 at n = {n}: seed-mean Jacobian norm eta (Eq. 27, {method}) "
        f"over (rho, gamma), one panel per d in {{{format_values(grid['d'])}}}, alpha = 0. "
        "Dashed: gamma = 1/(1 - rho) (Theorem 2.3). Markers: measured gamma* where eta over its "
        "supercritical plateau (1 - 1/d) mean 1/||x_i||^2 crosses 1/4, with a 95% confidence interval over seeds."
    )


def caption_finite_size(grid: dict[str, list[float]], across: str, with_eta: bool = True) -> str:
    along = {"d": "d, one panel per n", "n": "n, one panel per d"}[across]
    rows = "top: from lambda, bottom: from eta" if with_eta else "from lambda; eta not computed"
    return (
        f"Finite-size approach to the critical line: gamma* (1 - rho) against {along} ({rows}), "
        "for up to six rho (colour, each drawn slightly apart along the axis so that the bars do not "
        f"overlap; ticks at the {across} run), with 95% confidence intervals over seeds. Thin dashed, the same "
        "colour: the same boundary on the finite-n simplex (exact for d >= n; below, the formula "
        "continued in d). Dotted: 1, the limit of Theorem 2.1 as n grows."
    )


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    specs, with_eta = [], options["eta_method"] != "none"
    for n in grid["n"]:
        tag = f"n~{format_value(n)}"
        specs.append(FigureSpec(f"lambda_{tag}", caption_lambda(int(n), grid), "heatmaps",
                                {"observable": "lambda", "n": int(n)}))
        if with_eta:
            specs.append(FigureSpec(f"eta_{tag}", caption_eta(int(n), grid, options), "heatmaps",
                                    {"observable": "eta", "n": int(n)}))
    observables = {} if with_eta else {"observables": ["lambda"]}
    specs.append(FigureSpec("finite_size", caption_finite_size(grid, "d", with_eta), "finite_size",
                            observables))
    if len(grid["n"]) > 1:
        specs.append(FigureSpec("finite_size_n", caption_finite_size(grid, "n", with_eta), "finite_size",
                                {"across": "n", **observables}))
    return specs
