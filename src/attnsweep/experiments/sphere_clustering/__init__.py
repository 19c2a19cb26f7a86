"""sphere_clustering: paper 001, *A mathematical perspective on Transformers*.

n tokens on S^{d-1} follow the continuous-time attention dynamics SA or USA (Eqs. 2.3-2.6)
with inverse temperature beta_eff = beta + gamma log n (beta as in 001; gamma log n as in
000), from i.i.d. uniform tokens (rho = 0) or the correlated tokens of 000 Eq. 25. Per
(n, d, rho, beta, gamma, seed) the job records, at every output time, the fraction of
clustered pairs (Fig. 3), the number of clusters (Fig. 4), the minimum cosine and the energy
E_beta (Eq. 3.5). Theory: the curve Gamma_{inf,delta} of Eq. 6.12 (Theorem 6.9), through the
hitting time of gamma_beta(t) (Theorem 6.8).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.dynamics.times import check_times
from attnsweep.errors import ConfigError
from attnsweep.grid import Axis


def beta_eff(beta: Any, gamma: Any, n: Any) -> Any:
    """The inverse temperature of the dynamics: beta + gamma log n."""
    return beta + gamma * np.log(n)


class SphereClustering(Experiment):
    name = "sphere_clustering"
    title = "SA/USA dynamics on the sphere: clustering over (t, beta) (Figures 3-5)"
    paper = "arXiv:2312.10794 (Geshkovski, Letrouit, Polyanskiy, Rigollet: A mathematical perspective on Transformers)"
    axes = (
        Axis("n", "int", "number of tokens", low=2, default=[32]),
        Axis("d", "int", "token dimension (tokens live on the sphere S^{d-1})", low=2, default=[2, 8, 32]),
        Axis("rho", "float", "shared component weight of the initial tokens (000 Eq. 25)", low=0, high=1,
             high_open=True, default=[0.0], note="0 gives i.i.d. uniform tokens, as in 001"),
        Axis("beta", "float", "inverse temperature beta (Eq. 2.3), added to gamma log n", low=0,
             default={"start": 0.1, "stop": 9.0, "num": 30}),
        Axis("gamma", "float", "scaling gamma: gamma log n is added to beta", low=0, default=[0.0],
             note="000's beta = gamma log n with beta 0"),
    )
    options_schema = options_file(__file__)
    default_wildcards = ("n", "d")
    version = 2
    # t* is located along the output time (more seeds narrow it); a curve of the temperature
    # beta_eff = beta + gamma log n, drawn against beta (or gamma where only gamma is swept).
    targets = (Target("t_star", crossing=None, curves=("beta", "gamma")),)

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        if options["matrices"] == "fixed":
            if len(grid["d"]) != 1:
                raise ConfigError(f"{prefix}.d", "matrices: fixed needs a single d (the size of q, k, v)")
            d = int(grid["d"][0])
            for key in ("q", "k", "v"):
                if options.get(key) is None:
                    raise ConfigError(f"{prefix}.{key}", "matrices: fixed needs q, k and v")
                if any(len(row) != d for row in options[key]):
                    raise ConfigError(f"{prefix}.{key}", f"every row needs d = {d} entries")
            if len(options["v"]) != d:
                raise ConfigError(f"{prefix}.v", f"V must be d x d = {d} x {d}")
            if len(options["q"]) != len(options["k"]):
                raise ConfigError(f"{prefix}.k", "Q and K need the same number of rows")
        if "clustered" not in options["observables"]:
            raise ConfigError(f"{prefix}.observables", "must include clustered (the boundary and Fig. 3 use it)")
        check_times(options, grid, prefix)

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        """q, k, v count only under ``matrices: fixed``."""
        opts = dict(options)
        if opts["matrices"] != "fixed":
            opts.update(q=None, k=None, v=None)
        return opts


    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"outputs": options["outputs"], "snapshot_times": len(options["snapshot_times"])}


