"""The figures of mixture_training (paper 002) and their report captions (the figures themselves:
:mod:`.figures`).

Text only: Snakemake builds every caption when it plans the run, so this module imports neither
matplotlib nor torch.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import FigureSpec


def specs(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    """The figures for a grid and options; captions name the slice shown."""
    at = ", ".join(f"{a} = {grid[a][0]:g}" for a in ("L", "omega", "m", "lr", "b"))
    modes = ", ".join(options["modes"])
    if options["source"] == "digits":
        data = (f"digit images of classes {options['classes']} as v_k, random unit c_k, {options['samples']} "
                f"sequences from {options['image_file'] or 'scikit-learn digits'}; v_k in the alignments and scores: "
                "the unit class mean")
        losses, overlay = f"Fig. 8 (real data: {data})", ""
    else:
        losses = "Figs. 1a, 3, 5-7"
        overlay = "; grey: the stage-1 closed form of the population loss (infinite width, L = 3)"
    out = [
        FigureSpec("losses", f"{losses}: easy, hard and population loss over flow time per K ({modes}; {at}), seed "
                             "mean with a band of 2 standard errors; dotted: (1/2) log 2; grey dashed: the ends of "
                             f"stages 1 and 2 of Algorithm 1{overlay}."),
        FigureSpec("alignment", f"Fig. 1b: neuron alignments w_+^T c_k and w_+^T v_k over flow time ({modes}; {at})"
                                f"{'; grey: the stage-1 closed form' if overlay else ''}."),
        FigureSpec("scores", f"Figs. 1c, 5-7: s_same = mean c_k^T S_+ v_k and s_cross = mean c_k^T S_+ v_j (j != k) "
                             f"over flow time, with the hard loss ({modes}; {at})."),
        FigureSpec("score_grid", f"Fig. 4: every score mu^T S_+ nu (key mu, query nu) of the smallest K over flow "
                                 f"time, first mode ({at})."),
        FigureSpec("attention", f"Fig. 2: attention maps p^(+) (query rows, key columns) on the sample types at the "
                                f"stored steps, smallest K, first mode, first seed ({at})."),
        FigureSpec("margin", f"Max-margin gamma of the attention features (Eq. 2) and the head-symmetry residuals "
                             f"of Lemma C.4 over flow time ({modes}; {at})."),
    ]
    if len(grid["K"]) > 1 or len(grid["omega"]) > 1 or len(grid["m"]) > 1:
        out.append(FigureSpec("boundary", "t*: first flow time at which the seed-mean hard loss falls below "
                                          "(1/2) log 2, with 95% confidence intervals over seeds, against K per "
                                          "omega (lines: the fit t* = B (K - K_0); dotted: the joint-GD "
                                          "reference fit at infinite width, docs/papers/002.md §6) and against m "
                                          "per K."))
    return out


def figures(grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
    return specs(grid, options)
