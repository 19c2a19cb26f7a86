"""cluster_emergence: paper 004, *The emergence of clusters in self-attention dynamics*.

n tokens in R^d follow x_i' = sum_j P_ij V x_j (Eq. 1.1), P_ij = softmax_j <Q x_i, K x_j>
(Eq. 1.2), with no normalisation, from i.i.d. U[-a, a]^d tokens (Section 11.1: a = 5; the
dynamics is not scale invariant, Remark 3.3, hence the ``scale`` axis). By default the rescaled
tokens z = e^{-tV} x of Eq. 3.1 are integrated (true RK4, h = 0.1). Per (n, d, scale, seed)
the job records, at every output time, the numerical rank of P(t), its Boolean defect
b(t) = 1 - min_i max_j P_ij, the number of leaders, the number of clusters of z, and the mean
and variance over tokens of the eigen-coordinates phi_j^*(z_i); optionally snapshots of z,
phi^*(z) and P. Theory (``theory.py``): the limit sets of Theorems 2.1, 3.1, 4.2 and 5.2 and the
hull monotonicity of Prop. 8.2, checked on the snapshots. Boundary: the time t* at which the
seed-mean Boolean defect falls below 1/2, with a confidence interval over seeds. float64 is
the dtype to run it in (scores grow like e^{2 lambda_1 t}; docs/papers/004.md §6).
"""

from __future__ import annotations

from typing import Any

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.dynamics.times import check_times
from attnsweep.errors import ConfigError
from attnsweep.experiments.cluster_emergence import checkpoint
from attnsweep.grid import Axis

CHECKPOINT_OPTIONS = ("checkpoint", "head", "checkpoint_layer")


class ClusterEmergence(Experiment):
    name = "cluster_emergence"
    title = "Un-normalised attention dynamics in R^d: Boolean P(t), leaders, clusters (Figures 3-8, 11, 12)"
    paper = ("arXiv:2305.05465 "
             "(Geshkovski, Letrouit, Polyanskiy, Rigollet: The emergence of clusters in self-attention dynamics)")
    axes = (
        Axis("n", "int", "number of tokens", low=2, default=[40], note="the paper's figures use 20 to 256"),
        Axis("d", "int", "token dimension (tokens live in R^d; d = 1 in Theorem 2.1)", low=1, default=[1, 3],
             note="Figs. 3 and 11 use d = 1"),
        Axis("scale", "float", "half-width a of the initial box: tokens i.i.d. U[-a, a]^d", low=0, low_open=True,
             default=[5.0], note="Section 11.1: a = 5; the dynamics is not scale invariant (Remark 3.3), "
                                 "a acts as an inverse temperature"),
    )
    options_schema = options_file(__file__)
    # One job per (n, d): the systems of a tensor batch share n and d; seeds and scales (which
    # share their draws) are batched in it.
    default_wildcards = ("n", "d")
    version = 3
    # t* is located along the output time (more seeds narrow it); a curve of the box half-width a,
    # the axis the dynamics is not invariant in (Remark 3.3).
    targets = (Target("t_star", crossing=None, curves=("scale",)),)

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        used = {"v": options["value"] == "fixed", "spectrum": options["value"] == "spectrum",
                "q": options["query_key"] == "fixed", "k": options["query_key"] == "fixed"}
        for key, needed in used.items():
            case = "value" if key in ("v", "spectrum") else "query_key"
            if needed and options.get(key) is None:
                raise ConfigError(f"{prefix}.{key}", f"{case}: {options[case]} needs {key}")
            if not needed and options.get(key) is not None:
                raise ConfigError(f"{prefix}.{key}", f"{key} is only used with {case}: "
                                  f"{'spectrum' if key == 'spectrum' else 'fixed'}")
        if any(used.values()) and len(grid["d"]) != 1:
            raise ConfigError(f"{prefix}.d", "a fixed V, spectrum, Q or K needs a single d (their size)")
        d = int(grid["d"][0])
        if used["v"] and (len(options["v"]) != d or any(len(row) != d for row in options["v"])):
            raise ConfigError(f"{prefix}.v", f"V must be d x d = {d} x {d}")
        if used["spectrum"]:
            if any(isinstance(s, list) and s[1] == 0 for s in options["spectrum"]):
                raise ConfigError(f"{prefix}.spectrum", "a pair [a, b] needs b != 0 (a real eigenvalue is a "
                                  "number)")
            count = sum(2 if isinstance(s, list) else 1 for s in options["spectrum"])
            if count != d:
                raise ConfigError(f"{prefix}.spectrum", f"gives {count} eigenvalues (a pair [a, b] counts "
                                  f"for a +- ib), d = {d}")
        if used["q"]:
            for key in ("q", "k"):
                if any(len(row) != d for row in options[key]):
                    raise ConfigError(f"{prefix}.{key}", f"every row needs d = {d} entries")
            if len(options["q"]) != len(options["k"]):
                raise ConfigError(f"{prefix}.k", "Q and K need the same number of rows")
        nonlinear = options["equation"] == "nonlinear"
        if nonlinear and options["activation"] is None:
            raise ConfigError(f"{prefix}.activation", "equation: nonlinear (Eq. 12.1) needs activation: relu or tanh")
        for key in ("activation", "weight"):
            if not nonlinear and options[key] is not None:
                raise ConfigError(f"{prefix}.{key}", f"{key} is only used with equation: nonlinear (Eq. 12.1)")
        if nonlinear and options["basis"] != "standard":
            raise ConfigError(f"{prefix}.basis", "equation: nonlinear needs basis: standard (sigma acts on the "
                              "tokens' own coordinates)")
        if options["equation"] == "discrete" and options["integrator"] != "euler":
            raise ConfigError(f"{prefix}.integrator", "equation: discrete (Remark 3.4) is the Euler map: "
                              "integrator: euler")
        self.check_checkpoint(options, grid, prefix)
        check_times(options, grid, prefix)

    @staticmethod
    def check_checkpoint(options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        """value or query_key checkpoint: the checkpoint's attention weights read (``checkpoint.read``),
        the head among its heads, d its head size; the checkpoint options are refused otherwise."""
        if not reads_checkpoint(options):
            for key in ("checkpoint", "head"):
                if options[key] is not None:
                    raise ConfigError(f"{prefix}.{key}", f"{key} is only used with value: checkpoint or "
                                      "query_key: checkpoint")
            if options["checkpoint_layer"] != "shared":
                raise ConfigError(f"{prefix}.checkpoint_layer", "checkpoint_layer is only used with value: "
                                  "checkpoint or query_key: checkpoint")
            return
        case = "value" if options["value"] == "checkpoint" else "query_key"
        if options["checkpoint"] is None:
            raise ConfigError(f"{prefix}.checkpoint", f"{case}: checkpoint needs checkpoint, the directory of a "
                              "Hugging Face ALBERT checkpoint")
        if options["head"] is None:
            raise ConfigError(f"{prefix}.head", f"{case}: checkpoint needs head, the head whose matrices drive the "
                              "dynamics (numbered from 1)")
        try:
            heads = checkpoint.read(options["checkpoint"], options["checkpoint_layer"])
        except checkpoint.CheckpointError as error:
            raise ConfigError(f"{prefix}.checkpoint", str(error)) from None
        source = f"{options['checkpoint']}/{checkpoint.CONFIG}"
        if options["head"] > heads.count:
            raise ConfigError(f"{prefix}.head", f"head {options['head']} is not in 1..{heads.count} "
                              f"(num_attention_heads of {source}; heads are numbered from 1, as in the paper)")
        if grid["d"] != [heads.size]:
            raise ConfigError(f"{prefix}.d", f"a head of {source} acts on R^{heads.size} (hidden_size / "
                              f"num_attention_heads): d must be [{heads.size}]")

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        """v, spectrum, q and k count only for the cases that use them; the checkpoint options
        only where value or query_key reads the checkpoint (absent otherwise: the stores made
        before they existed keep their identity), the checkpoint by its files' SHA-256 as well
        as its path."""
        opts = dict(options)
        if opts["value"] != "fixed":
            opts["v"] = None
        if opts["value"] != "spectrum":
            opts["spectrum"] = None
        if opts["query_key"] != "fixed":
            opts.update(q=None, k=None)
        if not reads_checkpoint(opts):
            for key in CHECKPOINT_OPTIONS:
                opts.pop(key, None)
        elif opts["checkpoint"] is not None:
            opts["checkpoint_sha256"] = checkpoint.fingerprint(opts["checkpoint"])
        return opts


    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"outputs": options["outputs"], "snapshot_times": len(options["snapshot_times"])}


def reads_checkpoint(options: dict[str, Any]) -> bool:
    """Whether V or (Q, K) comes from the checkpoint (and every head's spectrum is stored)."""
    return "checkpoint" in (options["value"], options["query_key"])


