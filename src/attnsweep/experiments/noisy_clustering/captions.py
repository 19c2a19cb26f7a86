"""The report captions of noisy_clustering's figures (the figures themselves: :mod:`.figures`).

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import FigureSpec
from attnsweep.grid import format_value, format_values

MODEL = {"usa": "USA (e^{beta <x_i, x_j>}/n)", "sa": "SA (softmax)"}
UNIT = {"K_sharp": "K/K_#(beta, d)", "one": "K"}


def _setting(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    clock = "sigma^2 t" if options["clock"] == "noise" else "t"
    starts = " and ".join("uniform tokens" if s == "uniform" else "one point" for s in options["starts"])
    return (f"{MODEL[options['normalisation']]}, {options['noise']} noise, from {starts}; time averages over "
            f"{clock} in ({format_value(options['burn_in'])}, "
            f"{format_value(options['burn_in'] + options['window'])}], Euler-Maruyama step "
            f"{format_value(options['dt'])} in {clock}; d in {{{format_values(grid['d'])}}}, n in "
            f"{{{format_values(grid['n'])}}}")


def _theory(options: dict[str, Any]) -> str:
    if options["normalisation"] != "usa":
        return "No mean-field theory is drawn for SA."
    return ("Lines: K_# (closed form), K_c and the spinodal K_s of the clustered branch (the project's mean-field "
            "solver), beta_* (dotted).")


def caption_phase(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"Phase diagram in (beta, {UNIT[options['K_unit']]}), one panel per d, at the largest n: the coupling "
            f"where the seed-mean time-averaged |m| crosses {format_value(options['level'])} from each start "
            f"(filled: uniform tokens, open: one point; 95% confidence intervals over realisations). "
            f"{_theory(options)} {_setting(grid, options)}.")


def caption_hysteresis(n: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"Order parameter |m| (time average, seed mean, one standard error) against "
            f"{UNIT[options['K_unit']]} at n = {n}, one panel per (d, beta), solid from uniform tokens, dashed "
            f"from one point: where they differ, the run remembers its start (hysteresis). Thin lines: the "
            f"mean-field |m| from each start (USA), grey: the level. {_setting(grid, options)}.")


def caption_finite_size(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"The crossing couplings against n, one panel per d, one colour per beta (filled: from uniform "
            f"tokens; open: from one point), with their mean-field values as n -> oo (lines: solid uniform, "
            f"dashed point). {_setting(grid, options)}.")


def caption_burn_in(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"Burn-in: |m| of the seed-mean trace against time at the largest n and the first beta, at the "
            f"three couplings nearest the crossing from uniform tokens, one panel per d (solid: uniform, "
            f"dashed: one point); the grey line ends the burn-in, after which the averages are taken. "
            f"{_setting(grid, options)}.")


def caption_susceptibility(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (f"n <|m|^2> (time average, seed mean) from uniform tokens against K/K_#, one panel per d, one "
            f"colour per n, against the mean-field 1 / (1 - K/K_#) (black) below K_#: independent tokens "
            f"give 1, and the uniform state's fluctuations grow as K nears K_#. {_setting(grid, options)}.")


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    specs = [FigureSpec("phase", caption_phase(grid, options))]
    for n in grid["n"]:
        specs.append(FigureSpec(f"hysteresis_n~{format_value(n)}", caption_hysteresis(int(n), grid, options),
                                "hysteresis", {"n": int(n)}))
    if len(grid["n"]) > 1:
        specs.append(FigureSpec("finite_size", caption_finite_size(grid, options)))
    specs.append(FigureSpec("burn_in", caption_burn_in(grid, options)))
    if options["normalisation"] == "usa" and "uniform" in options["starts"] and options["noise"] == "independent":
        specs.append(FigureSpec("susceptibility", caption_susceptibility(grid, options)))
    return specs
