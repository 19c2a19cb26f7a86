"""causal_clustering: paper 003, *Clustering in causal attention masking*.

n tokens on S^{d-1} follow the attention dynamics of 001 (SA, Q = K = I) under the causal mask
(CSA, Section 2: token k attends to j <= k, itself included), side by side with full attention
on the same tokens: the ``masks`` option gives the ``causal`` dimension (1: CSA, 0: SA). V is one
of the Table 1 classes (``values``, the ``value`` dimension). Per (n, d, beta, seed, value, mask)
the job records, at every output time, the fraction of tokens captured by the Renyi and by the
strong Renyi centres of x(0) (Section 5.1; "captured" is defined below), the number of clusters,
and how far token 1 and the strong centres have moved. Theory (``theory.py``): Lemma 3.1 (the
first token), the two-token ODE, Lemma C.1 (strong-centre count), Renyi's constant, and the
beta^{(d-1)/2} scaling of the number of meta-stable clusters.

Captured (the paper leaves it open, docs/papers/003.md §6): a token is captured by a kind of centre at
time t when its geodesic distance to the current position of the nearest such centre is at most
r = capture beta^{-1/2} (default capture = 1, the interaction length ~ tau*_beta, and 2 = delta/2
for the default separation c = 4, which cannot count a token twice while centres stay delta
apart). A centre captures itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.dynamics.times import check_times
from attnsweep.grid import Axis

SERIES = ("captured_renyi", "captured_strong", "clusters", "first_drift", "strong_drift")


def separation(beta: Any, c: float) -> Any:
    """delta = c beta^{-1/2} (radians; Figs. 2, 3 use c = 4)."""
    return c / np.sqrt(beta)


class CausalClustering(Experiment):
    name = "causal_clustering"
    title = "Causal attention masking: Renyi centres, meta-stable clusters, causal vs full (Figures 1-3)"
    paper = "arXiv:2411.04990 (Karagodin, Polyanskiy, Rigollet: Clustering in causal attention masking)"
    axes = (
        Axis("n", "int", "number of tokens", low=2, default=[200], note="Figs. 2, 3 use 200, Fig. 1 uses 32"),
        Axis("d", "int", "token dimension (tokens live on the sphere S^{d-1})", low=2, default=[2]),
        Axis("beta", "float", "inverse temperature beta (CSA)", low=0, low_open=True, default=[64.0],
             note="64 in Figs. 2 and 3, 9 in Fig. 1"),
    )
    options_schema = options_file(__file__)
    # One job per (n, d): betas, seeds, value matrices and masks batched in it.
    default_wildcards = ("n", "d")
    version = 2
    # The median collapse time is located along the output time (more seeds narrow it), a curve
    # of beta (Fig. 3, the boundary figure). Rows also run over the value matrix and the mask.
    targets = (Target("t_collapse", crossing=None, curves=("beta",)),)

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        check_times(options, grid, prefix)


    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"outputs": options["outputs"], "snapshot_times": len(options["snapshot_times"])}


