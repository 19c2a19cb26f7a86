"""The report captions of normalized_attention's figures (the figures themselves: :mod:`.figures`).

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import FigureSpec
from attnsweep.experiments.normalized_attention.matrices import definition
from attnsweep.grid import format_value, format_values

WEIGHTS = {"sa": "softmax weights (SA)", "usa": "weights e^{score}/n (USA)"}
RADIAL = ("pre_ln", "mix_ln", "peri_ln")


def setting(options: dict[str, Any]) -> str:
    """The model's settings in one sentence."""
    mask = options["mask"] + ("" if options["window"] is None else f" with a window of width {options['window']}")
    text = (f"{WEIGHTS[options['weights']]}, heads {'summed' if options['reduction'] == 'sum' else 'averaged'}, "
            f"{definition(options)}, {mask} mask, {options['integrator']} with dt = {format_value(options['dt'])}")
    if "ngpt" in options["schemes"]:
        text += f", nGPT alpha = {format_value(options['alpha'])}"
    if "mix_ln" in options["schemes"]:
        text += f", Mix-LN tau = {format_value(options['mix_fraction'] * options['t_max'])}"
    return text


def caption_phase(n: int, heads: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        f"Figure 3 of paper 001 per normalisation scheme, n = {n}, H = {heads} heads: probability that a pair "
        f"of tokens is clustered, <theta_i, theta_j> >= 1 - {format_value(options['delta'])}, over (t, beta), "
        f"estimated from all pairs of every realisation; one column per scheme, one row per d in "
        f"{{{format_values(grid['d'])}}}. Red: the time to clustering t*(beta), where the probability crosses "
        f"1/2, with a 95% confidence interval over realisations. {setting(options)}."
    )


def caption_heads(n: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        f"The boundary against the number of heads, n = {n}: beta*, the inverse temperature where the "
        f"probability of a clustered pair at t = {format_value(options['t_max'])} crosses 1/2 (95% confidence "
        f"interval), against H in {{{format_values(grid['heads'])}}}, one line per scheme, one panel per d. "
        f"Above beta* the tokens have not clustered by t_max; none drawn where no crossing lies on the beta grid. "
        f"{setting(options)}."
    )


def caption_radius(n: int, grid: dict[str, list[float]], options: dict[str, Any]) -> str:
    return (
        f"Growth of the radii r_i = |x_i| of the schemes that carry one, n = {n}, H = "
        f"{format_value(grid['heads'][0])}: seed mean of the mean radius over t, one line per scheme and beta "
        f"(at most three), one panel per d; dashed: 1 + t, which a radius moving at |r'| <= 1 cannot pass "
        f"(Peri-LN always; Pre-LN when |A| <= 1). {setting(options)}."
    )


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    specs = []
    for n in grid["n"]:
        tag = f"n~{format_value(n)}"
        for h in grid["heads"]:
            specs.append(FigureSpec(f"phase_{tag}_heads~{format_value(h)}",
                                    caption_phase(int(n), int(h), grid, options), "phase",
                                    {"n": int(n), "heads": int(h)}))
        specs.append(FigureSpec(f"heads_{tag}", caption_heads(int(n), grid, options), "heads",
                                {"n": int(n)}))
        if "radius" in options["observables"] and set(options["schemes"]) & set(RADIAL):
            specs.append(FigureSpec(f"radius_{tag}", caption_radius(int(n), grid, options), "radius", {"n": int(n)}))
    return specs
