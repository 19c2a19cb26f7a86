"""(Q_h^T K_h, V_h) of every head of one realisation: the ensembles of simuformer's ``--randomKQ``
and ``--randomV`` (its modes 0 to 4; mode 3 of KQ, mode 2 but for V's scale, is left out), or
fixed by the config.

Head h of realisation k draws from its own streams, keyed by (d, seed, h): the first H heads of a
sweep with more heads are the heads of a sweep with H, and nothing depends on the job cut.
Drawn on the CPU in float64. torch is imported by the draws alone: the captions, which Snakemake
builds when it plans a run, name the ensembles.

The value convention: with ``integrator: euler`` or ``rk4`` a head's matrix M_h is V_h of 001's
Eq. 2.7, token j contributing M_h x_j. With ``euler_anchor`` it is read as simuformer's code reads
its ``V`` (``SM @ (M @ V)``, the tokens as rows): token j contributes M_h^T x_j, so Eq. 2.7's V_h
is M_h^T. The two differ where M_h is not symmetric (Gaussian or GPT-2 draws, ``+-Q_h^T K_h`` of a
non-symmetric ``qk``, fixed matrices). The scores are alike in both: <x_i, Q_h^T K_h x_j>.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor

NAME = "normalized_attention"
#: The std of GPT-2's initialisation (simuformer's modes 4).
GPT2_STD = 0.02

QK_ENSEMBLES = {
    "identity": "Q_h^T K_h = I",
    "ginibre": "Q_h^T K_h = G1 G2 / sqrt(d)",
    "symmetric": "Q_h^T K_h = (G + G^T) / sqrt(2)",
    "gpt2": f"Q_h^T K_h = {GPT2_STD} G",
    "fixed": "Q_h^T K_h given in the config",
}
V_ENSEMBLES = {
    "identity": "V_h = I",
    "gaussian": "V_h = G / sqrt(d)",
    "qk": "V_h = Q_h^T K_h / c",
    "minus_qk": "V_h = -Q_h^T K_h / c",
    "gpt2": f"V_h = {GPT2_STD} G",
    "fixed": "V_h given in the config",
}


def draw(opts: dict[str, Any], d: int, heads: int, seed: int) -> tuple[Tensor | None, Tensor | None]:
    """(Q_h^T K_h, V_h) of Eq. 2.7, each (H, d, d) float64, or None where every head's is the
    identity; V_h is the drawn matrix, transposed under ``euler_anchor`` (simuformer's convention)."""
    import torch

    from attnsweep.run import rng

    def gaussian(generator: torch.Generator) -> Tensor:
        return torch.randn(d, d, generator=generator, dtype=torch.float64)

    qk, v = [], []
    for h in range(heads):
        g = rng.generator(NAME, {"d": d}, seed, f"qk{h}")
        if opts["qk"] == "ginibre":
            qk.append(gaussian(g) @ gaussian(g) / math.sqrt(d))
        elif opts["qk"] == "symmetric":
            a = gaussian(g)
            qk.append((a + a.T) / math.sqrt(2))
        elif opts["qk"] == "gpt2":
            qk.append(GPT2_STD * gaussian(g))
        elif opts["qk"] == "fixed":
            qk.append(torch.tensor(opts["qk_matrices"][h], dtype=torch.float64))
        else:
            qk.append(torch.eye(d, dtype=torch.float64))
        g = rng.generator(NAME, {"d": d}, seed, f"v{h}")
        if opts["v"] in ("qk", "minus_qk"):
            scale = math.sqrt(d) if opts["qk"] in ("ginibre", "symmetric") else 1.0
            v.append(qk[-1] / scale * (1 if opts["v"] == "qk" else -1))
        elif opts["v"] == "gaussian":
            v.append(gaussian(g) / math.sqrt(d))
        elif opts["v"] == "gpt2":
            v.append(GPT2_STD * gaussian(g))
        elif opts["v"] == "fixed":
            v.append(torch.tensor(opts["v_matrices"][h], dtype=torch.float64))
        else:
            v.append(torch.eye(d, dtype=torch.float64))
    identity_qk = opts["qk"] == "identity"
    identity_v = opts["v"] == "identity" or (opts["v"] == "qk" and identity_qk)
    values = None if identity_v else torch.stack(v)
    if values is not None and simuformer_values(opts):
        values = values.transpose(-1, -2)
    return (None if identity_qk else torch.stack(qk)), values


def simuformer_values(opts: dict[str, Any]) -> bool:
    """Whether a head's value matrix is read as simuformer reads it (x_j^T M_h, Eq. 2.7's V_h = M_h^T)."""
    return opts["integrator"] == "euler_anchor"


def definition(opts: dict[str, Any]) -> str:
    """The ensembles in words, for the captions and the store's attrs."""
    text = f"{QK_ENSEMBLES[opts['qk']]}, {V_ENSEMBLES[opts['v']]}"
    if opts["v"] in ("qk", "minus_qk"):
        text += f" (c = {'sqrt(d)' if opts['qk'] in ('ginibre', 'symmetric') else '1'})"
    if opts["v"] != "identity" and simuformer_values(opts):
        text += ", token j contributing V_h^T x_j (simuformer's convention)"
    return text + ", G_ij ~ N(0, 1)" if {opts["qk"], opts["v"]} & {"ginibre", "symmetric", "gpt2", "gaussian"} else text
