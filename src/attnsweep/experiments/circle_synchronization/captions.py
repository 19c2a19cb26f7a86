"""The report captions of circle_synchronization's figures (the figures themselves: :mod:`.figures`).

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import FigureSpec
from attnsweep.grid import format_value, format_values

WEIGHTS = {"usa": "USA", "sa": "SA"}
BOUNDS = ("Dashed lines: the proven bounds, beta = -2/3 (below it a spurious attractor exists for some n) "
          "and beta = -0.16 (at or above it none exists, for every n).")


def _setting(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    weights = " and ".join(WEIGHTS[x] for x in options["normalisations"])
    return (f"{weights} flow from uniform random angles (Euler, dt = {format_value(options['courant'])}/rate(beta), "
            f"to t = {format_value(options['t_max'])} or rest), each end polished by Newton's method and "
            f"classified with a Newton-Kantorovich certificate; n in {{{format_values(grid['n'])}}}; structured "
            f"search: families of 2 to {options['k_max']} clusters with masses within {options['spread']} of n/k, "
            f"and the equal-mass families up to the splay state, on beta from {format_value(options['scan']['start'])} "
            f"to {format_value(options['scan']['stop'])} by {format_value(options['scan']['step'])}, thresholds "
            f"bisected to {format_value(options['threshold_tol'])}")


def caption_beta_c(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"beta_c(n), the largest beta with a spurious attractor (a strict local maximum of E_beta that is "
            f"not synchronised), against n: from the random starts (bars: the largest grid beta with a certified "
            f"spurious attractor to the next grid beta, one colour per weighting) and from the structured search "
            f"(black: the largest family threshold, a lower bound of the true beta_c(n)). {BOUNDS} "
            f"{_setting(grid, options)}.")


def caption_basins(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"Basin fraction of the spurious attractors, the fraction of random starts ending at a certified "
            f"one, against beta, one line per n (95% Clopper-Pearson intervals), one panel per weighting; "
            f"vertical ticks: each n's structured beta_c. {BOUNDS} {_setting(grid, options)}.")


def caption_families(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"The stable families per n: each point a family of cluster configurations (its masses in "
            f"circular order) at its threshold, the largest beta at which it is a spurious attractor; colour: "
            f"its number of clusters k; a triangle where its branch ends in a fold, a circle where an "
            f"eigenvalue crosses 0. {BOUNDS} {_setting(grid, options)}.")


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    return [FigureSpec("beta_c", caption_beta_c(grid, options)),
            FigureSpec("basins", caption_basins(grid, options)),
            FigureSpec("families", caption_families(grid, options))]
