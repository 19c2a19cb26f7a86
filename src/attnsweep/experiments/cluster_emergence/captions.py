"""The report captions of paper 004's figures (the figures themselves: :mod:`.figures`), and what
both show: the line width of P_ij = 1 and the number of lines a panel draws.

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import FigureSpec
from attnsweep.experiments.cluster_emergence import reads_checkpoint
from attnsweep.experiments.cluster_emergence.cases import QUERY_KEYS, VALUES
from attnsweep.experiments.cluster_emergence.good_triples import PAPER_SCORES
from attnsweep.grid import format_value, format_values

EQUATIONS = {"rescaled": "z = e^{-tV} x of Eq. 3.1", "original": "x of Eq. 1.1",
             "discrete": "z = R^{-k} x of Remark 3.4 (R = I + V dt)", "nonlinear": "z of Eq. 12.1"}
WIDTH = 3.0  # line width of P_ij = 1 in the leaders figure (points)
MAX_LINES = 6


def _setting(options: dict[str, Any]) -> str:
    network = ""
    if options["equation"] == "nonlinear":
        w = "random W, U[-1, 1] entries" if options["weight"] == "uniform" else "W = I"
        network = f" with sigma = {options['activation']}, {w}"
    trained = ""
    if "checkpoint" in (options["value"], options["query_key"]):
        trained = f" (h = {options['head']} of {options['checkpoint']})"
    return (f"{VALUES[options['value']]}; {QUERY_KEYS[options['query_key']]}{trained}; "
            f"{EQUATIONS[options['equation']]}{network} integrated by {options['integrator']} with "
            f"h = {format_value(options['dt'])}; tokens i.i.d. U[-a, a]^d")


def _first(grid: dict[str, list[float]], axis: str) -> str:
    return format_value(grid[axis][0])


def caption_rank(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        "Figures 3, 11 and 12 of paper 004 as curves: top, the seed mean of the numerical rank of P(t) (singular "
        f"values above {format_value(options['rank_tol'])} sigma_max; solid, shaded one standard error) and of the "
        "number of leaders |{argmax_j P_ij}| (dashed); bottom, the seed mean of the Boolean defect "
        "b(t) = 1 - min_i max_j P_ij with the level 1/2 (dotted) and the measured t* (vertical line). One "
        f"panel column per d in {{{format_values(grid['d'])}}}, "
        f"one colour per (n, a) with n in {{{format_values(grid['n'])}}} "
        f"and a in {{{format_values(grid['scale'])}}} (at most {MAX_LINES}). Black dotted: rank 2 of the Boolean limit "
        f"(Theorem 2.1, d = 1 with V > 0, QK > 0). Grey background, if any: from the first time the scores of some "
        f"realisation no longer fix P against their rounding error (numbers there are not to be trusted). "
        f"{_setting(options)}."
    )


def caption_coordinates(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        "Figures 7b and 15 of paper 004: eigen-coordinates phi_j^*(z_i(t)) (dual basis of V) of one realisation "
        f"(first seed) at n = {_first(grid, 'n')}, a = {_first(grid, 'scale')}, for the {options['modes']} modes "
        "of V of largest real part (at most 6 drawn in the top row). Top, modes with Re(lambda_j) > 0: mean over "
        "the tokens with phi_j^* > 0 (solid) and over those with phi_j^* < 0 (dashed), shaded +- one standard "
        "deviation within each group; Theorem 4.2 predicts each group's spread to vanish and its mean to settle "
        "(7b). Bottom: variance over all tokens on a log scale, solid for Re(lambda_j) > 0, dashed otherwise "
        f"(15: these grow). One column per d in {{{format_values(grid['d'])}}}. {_setting(options)}."
    )


def caption_boundary(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        "Emergence time t* at which the seed-mean Boolean defect b(t) = 1 - min_i max_j P_ij(t) falls below 1/2 "
        "(points, 95% confidence interval over realisations; band: b falls below 0.9 to below 0.1; t* = 0 where b "
        f"starts below 1/2), against the swept axis, one line per remaining (n, d, a) with n in "
        f"{{{format_values(grid['n'])}}}, d in {{{format_values(grid['d'])}}}, "
        f"a in {{{format_values(grid['scale'])}}}. "
        f"{_setting(options)}."
    )


def caption_attention(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    times = ", ".join(format_value(t) for t in options["snapshot_times"])
    return (
        f"Figures 3, 11 and 12 of paper 004: the attention matrix P(t) of one realisation (first seed) at t = {times} "
        f"(columns), n = {_first(grid, 'n')}, a = {_first(grid, 'scale')}, one row per d in "
        f"{{{format_values(grid['d'])}}}; rows and columns ordered by phi_1^*(z_i) at t = "
        f"{format_value(options['snapshot_times'][0])} (the token value itself for d = 1 and V = 1), grey scale "
        f"from 0 (white) to 1 (black); titles give the numerical rank. {_setting(options)}."
    )


def caption_leaders(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    times = ", ".join(format_value(t) for t in options["snapshot_times"])
    return (
        f"Figure 4 of paper 004: the queries Q x_i(t) (purple) and the keys K x_j(t) (green) of one realisation "
        f"(first seed) at t = {times} (columns; each panel has its own scale), joined by lines of width "
        f"{format_value(WIDTH)} P_ij(t) points, n = {_first(grid, 'n')}, a = {_first(grid, 'scale')}, one row per d in "
        f"{{{format_values(grid['d'])}}}: the first two coordinates (d = 1: queries on the upper line, "
        "keys on the lower). "
        "Few keys, the leaders, come to hold every line: P(t) turns Boolean and of rank <= 2. (The paper's caption "
        "names the clouds K x_i and Q x_j; P_ij pairs the query of i with the key of j.) "
        f"{_setting(options)}."
    )


def caption_snapshots(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    times = ", ".join(format_value(t) for t in options["snapshot_times"])
    row = (" (a row of Figure 18: Eq. 12.1; the axes through 0 mark the positive orthant the tokens reach with "
           "ReLU and W = I)" if options["equation"] == "nonlinear" else "")
    return (
        f"Figures 5-8{row} of paper 004: the rescaled tokens z_i(t) of one realisation (first seed) at t = {times} "
        f"(columns; each panel has its own scale), n = {_first(grid, 'n')}, a = {_first(grid, 'scale')}, one row "
        f"per d in {{{format_values(grid['d'])}}}: d = 1 as z_i against the rank of z_i at the first time, "
        "d = 2 in the "
        "plane, d >= 3 as the first three coordinates. Colour: the token's leader argmax_j P_ij at the last time. "
        "Grey crosses (V = lambda I): vertices of the hull at the first time (Theorem 3.1). Black (d = 2, "
        "good-triple spectrum): the arrow phi_1 and the dashed lines phi_1^*(x) in {min_i, 0, max_i} phi_1^*(z_i) "
        f"(Theorem 4.2). {_setting(options)}."
    )


def caption_value_spectra(grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    paper = ", ".join(f"{score:.4f} for head {h}" for h, score in PAPER_SCORES.items())
    return (
        f"Figure 10 of paper 004: the eigenvalues of every head's value matrix V_h = W_V[s_h, :] W_O[:, s_h] "
        f"(d_h x d_h) of the checkpoint {options['checkpoint']} in the complex plane, one panel per head h "
        "(numbered from 1, as the paper does); the star is lambda_1, the eigenvalue of largest modulus, the dotted "
        "circle has radius |lambda_2|. Titles give lambda_1, |lambda_2|/|lambda_1| and <Q_h phi_1, K_h phi_1> "
        "with phi_1 the leading eigenvector of norm 1 in model space (in the head's own coordinates in brackets). "
        "Green: a good triple (Definition 4.1: lambda_1 real, positive, simple, above |lambda_2|, and "
        "<Q_h phi_1, K_h phi_1> > 0); red: not. Heads 5 and 14, where the checkpoint has them, are framed, with "
        f"the paper's numbers for ALBERT-xlarge-v2 ({paper}) beside the measured ones. Biases and layer norms are "
        "left out (docs/papers/004.md §7)."
    )


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    specs = [FigureSpec("rank", caption_rank(grid, options)),
             FigureSpec("coordinates", caption_coordinates(grid, options)),
             FigureSpec("boundary", caption_boundary(grid, options))]
    if options["snapshot_times"]:
        specs += [FigureSpec("attention", caption_attention(grid, options)),
                  FigureSpec("leaders", caption_leaders(grid, options)),
                  FigureSpec("snapshots", caption_snapshots(grid, options))]
    if reads_checkpoint(options):
        specs.append(FigureSpec("value_spectra", caption_value_spectra(grid, options)))
    return specs
