"""normalized_attention: multi-head attention dynamics under six normalisation schemes, past the papers.

Karagodin, Ge, Polyanskiy, Rigollet, *Normalization in Attention Dynamics* (arXiv:2510.22026) write
a token as x_i = r_i theta_i and each normalisation scheme of a transformer layer as a speed
regulation of theta_i on the sphere (:mod:`attnsweep.dynamics.normalization`); paper 001 defines
multi-head attention (Eq. 2.7) and leaves it open (:mod:`attnsweep.dynamics.heads`). Per
(n, d, heads, beta, seed) and scheme the job records, at every output time, the fraction of
clustered pairs (001's Fig. 3, simuformer's density), the cluster count, simuformer's Boolean rank,
the minimum cosine and the radii. Boundaries: t*, the time where the probability that a pair is
clustered crosses 1/2 (the time to clustering), and beta*, the beta where it crosses 1/2 at t_max.
With one head, Post-LN, SA and Q = K = V = I, the numbers are sphere_clustering's bit for bit.
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.dynamics.times import check_times
from attnsweep.errors import ConfigError
from attnsweep.grid import Axis

#: The schemes simuformer's step (``integrator: euler_anchor``) implements.
ANCHOR_SCHEMES = ("post_ln", "pre_ln", "peri_ln", "ngpt")


class NormalizedAttention(Experiment):
    name = "normalized_attention"
    title = "Multi-head attention under six normalisation schemes: clustering over (t, beta) per scheme and H"
    paper = ("arXiv:2510.22026 (Karagodin, Ge, Polyanskiy, Rigollet: Normalization in Attention Dynamics); "
             "multi-head attention of arXiv:2312.10794, Eq. 2.7")
    axes = (
        Axis("n", "int", "number of tokens", low=2, default=[64]),
        Axis("d", "int", "token dimension (directions live on the sphere S^{d-1})", low=2, default=[16]),
        Axis("heads", "int", "number of attention heads H (Eq. 2.7 of 001)", low=1, default=[1, 4]),
        Axis("beta", "float", "inverse temperature beta of every head's scores", low=0,
             default={"start": 0.5, "stop": 12.0, "num": 12}),
    )
    options_schema = options_file(__file__)
    default_wildcards = ("n", "d", "heads")
    version = 1
    # t* is located along the output time (more seeds narrow it), a curve of beta; beta* is a
    # crossing along beta.
    targets = (Target("beta_star", crossing="beta"), Target("t_star", crossing=None, curves=("beta",)))

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        for key, ensemble in (("qk_matrices", "qk"), ("v_matrices", "v")):
            if options[ensemble] == "fixed":
                self._check_fixed(options.get(key), key, grid, prefix)
            elif options.get(key) is not None:
                raise ConfigError(f"{prefix}.{key}", f"is used with {ensemble}: fixed only")
        window = options["window"]
        if window is not None and window > max(grid["n"]):
            raise ConfigError(f"{prefix}.window", f"{window} is wider than every n (largest {max(grid['n']):g}): "
                              "it hides nothing; drop it or narrow it")
        if options["integrator"] == "euler_anchor":
            other = [s for s in options["schemes"] if s not in ANCHOR_SCHEMES]
            if other:
                raise ConfigError(f"{prefix}.schemes", f"euler_anchor (simuformer's step) has no {', '.join(other)} "
                                  f"(it has {', '.join(ANCHOR_SCHEMES)})")
        if "clustered" not in options["observables"]:
            raise ConfigError(f"{prefix}.observables", "must include clustered (the boundaries and figures use it)")
        check_times(options | {"snapshot_times": []}, grid, prefix)

    @staticmethod
    def _check_fixed(matrices: list | None, key: str, grid: dict[str, list[float]], prefix: str) -> None:
        """H matrices d x d for the single d and H of the sweep."""
        if matrices is None:
            raise ConfigError(f"{prefix}.{key}", "is needed: H matrices d x d, one per head")
        if len(grid["d"]) != 1 or len(grid["heads"]) != 1:
            raise ConfigError(f"{prefix}.{key}", "fixed matrices need a single d and a single heads")
        d, heads = int(grid["d"][0]), int(grid["heads"][0])
        if len(matrices) != heads:
            raise ConfigError(f"{prefix}.{key}", f"has {len(matrices)} matrices for heads = {heads}")
        for h, matrix in enumerate(matrices):
            if len(matrix) != d or any(len(row) != d for row in matrix):
                raise ConfigError(f"{prefix}.{key}[{h}]", f"head {h}'s matrix is not d x d = {d} x {d}")

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        """The fixed matrices count only where used; alpha only for nGPT, mix_fraction only for Mix-LN."""
        opts = dict(options)
        for key, ensemble in (("qk_matrices", "qk"), ("v_matrices", "v")):
            if opts[ensemble] != "fixed":
                opts[key] = None
        if "ngpt" not in opts["schemes"]:
            opts["alpha"] = None
        if "mix_ln" not in opts["schemes"]:
            opts["mix_fraction"] = None
        return opts

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"outputs": options["outputs"]}
