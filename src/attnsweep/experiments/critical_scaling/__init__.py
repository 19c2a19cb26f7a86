"""critical_scaling: paper 000, *Critical attention scaling in long-context transformers*.

Tokens ``x_i = sqrt(rho) z_0 + sqrt(1 - rho) z_i`` (Eq. 25) pass one pre-layer-norm attention
layer with ``beta = gamma log n`` (Eqs. 3-5). Per (n, d, rho, gamma, alpha, seed) the job stores
the angle ratio lambda (Eq. 26), the Jacobian norm eta (Eq. 27, exact or Hutchinson), the
effective number of attended tokens, and quantiles of the input and output pair cosines.
Theory (simplex closed forms, Theorems 2.1 and 2.3) is evaluated on the same coordinates.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.errors import ConfigError
from attnsweep.grid import Axis


class CriticalScaling(Experiment):
    name = "critical_scaling"
    title = "one attention layer, beta = gamma log n: contraction vs identity (Figures 1-2)"
    paper = ("arXiv:2510.05554 "
             "(Chen, Lin, Polyanskiy, Rigollet: Critical attention scaling in long-context transformers)")
    axes = (
        Axis("n", "int", "number of tokens", low=2, default=[256]),
        Axis("d", "int", "token dimension (tokens live on the sphere S^{d-1})", low=2, default=[16, 128, 1024]),
        Axis("rho", "float", "shared component weight of Eq. 25", low=0, high=1, high_open=True,
             default={"start": 0.0, "stop": 0.9, "num": 10}),
        Axis("gamma", "float", "attention scaling, beta = gamma log n", low=0,
             default={"start": 0.5, "stop": 12.0, "num": 12}, note="Eq. 3"),
        Axis("alpha", "float", "residual weight of Eq. 5", low=0, default=[0.0]),
    )
    options_schema = options_file(__file__)
    default_wildcards = ("n", "d", "seed")
    targets = (Target("gamma_star_lambda", crossing="gamma", curves=("rho",)),
               Target("gamma_star_eta", crossing="gamma", curves=("rho",)))

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        if options["query_tokens"] is not None and max(grid["n"]) > options["query_tokens"] \
                and options["eta_method"] != "none":
            raise ConfigError(f"{prefix}.query_tokens", "samples the layer's query tokens for lambda only: set "
                              f"eta_method: none (eta needs the layer at every token; it is {options['eta_method']})")

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        """Options without effect on a job's grid become None (``probes`` under exact eta,
        ``pair_samples`` and ``quantile_tokens`` where no n exceeds their threshold), and
        ``pair_subsample_n`` becomes the largest job n not above it, which subsamples the same n.
        ``query_tokens`` is left out where no n exceeds it, so that the jobs of sweeps from before
        it keep their stores."""
        opts = dict(options)
        ns = grid["n"]
        if opts["query_tokens"] is None or max(ns) <= opts["query_tokens"]:
            del opts["query_tokens"]
        if opts["eta_method"] != "hutchinson":
            opts["probes"] = None
        if max(ns) <= opts["pair_subsample_n"]:
            opts["pair_samples"] = None
        opts["pair_subsample_n"] = max((n for n in ns if n <= opts["pair_subsample_n"]), default=0)
        if max(ns) <= opts["quantile_tokens"]:
            opts["quantile_tokens"] = None
        return opts

    def targets_for(self, options: dict[str, Any]) -> tuple[Target, ...]:
        """No eta boundary without eta (``eta_method: none``)."""
        if options.get("eta_method") == "none":
            return tuple(t for t in self.targets if t.variable != "gamma_star_eta")
        return self.targets


