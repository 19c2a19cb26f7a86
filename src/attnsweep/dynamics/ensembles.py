"""(Q^T K, V) of one realisation: identity, fixed by the config, or a random ensemble.

The random ensembles are those of 001 Figure 5 with the normalisations the paper leaves out
made explicit (docs/papers/001.md §5 item 4 and §6); they are drawn per realisation, on the CPU in
float64 from the realisation's generator, and fixed in time. torch is imported by the draws alone:
the captions, which Snakemake builds when it plans a run, name the ensembles too.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch
    from torch import Tensor

ENSEMBLES = {
    "identity": "Q = K = V = I (SA/USA of Eq. 2.6)",
    "fixed": "Q, K, V given in the config, the same for every realisation",
    "ginibre": "Fig. 5a: Q^T K = G1 G2 / sqrt(d), V = G3 G3^T / sqrt(d), G_ij ~ N(0, 1)",
    "wigner_psd": "Fig. 5b: Q^T K = (G + G^T) / sqrt(2) (GOE), V = G' G'^T / sqrt(d) (PSD)",
    "ginibre_shared": "Fig. 5c: Q^T K = G1 G2 / sqrt(d), V = Q^T K / sqrt(d)",
    "wigner_shared": "Fig. 5d: Q^T K = (G + G^T) / sqrt(2) (GOE), V = Q^T K / sqrt(d)",
}


def draw(ensemble: str, d: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """(Q^T K, V), each (d, d) float64, of one realisation of a random ``ensemble``."""
    import torch

    def gaussian() -> Tensor:
        return torch.randn(d, d, generator=generator, dtype=torch.float64)

    root = math.sqrt(d)
    if ensemble in ("ginibre", "ginibre_shared"):
        qk = gaussian() @ gaussian() / root
    elif ensemble in ("wigner_psd", "wigner_shared"):
        g = gaussian()
        qk = (g + g.T) / math.sqrt(2)
    else:
        raise ValueError(f"{ensemble!r} is not a random ensemble ({', '.join(ENSEMBLES)})")
    if ensemble.endswith("_shared"):
        return qk, qk / root
    g = gaussian()
    return qk, g @ g.T / root


def fixed(q: list[list[float]], k: list[list[float]], v: list[list[float]]) -> tuple[Tensor, Tensor]:
    """(Q^T K, V) from the config's matrices (Q and K may be m x d)."""
    import torch

    q_, k_, v_ = (torch.tensor(m, dtype=torch.float64) for m in (q, k, v))
    return q_.T @ k_, v_
