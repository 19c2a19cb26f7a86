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
seed-mean Boolean defect falls below 1/2, with a bootstrap interval over seeds. float64 is
the dtype to run it in (scores grow like e^{2 lambda_1 t}; docs/papers/004.md §6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.contract import Experiment, FigureSpec, JobSpec, Target, options_file
from attnsweep.dynamics.times import check_times
from attnsweep.errors import ConfigError
from attnsweep.experiments.cluster_emergence import captions, checkpoint, resources
from attnsweep.experiments.cluster_emergence.good_triples import VARIABLES as HEAD_VARIABLES
from attnsweep.grid import Axis
from attnsweep.reduce.crossing import bootstrap_crossing, first_crossing, interval_variables, seed_mean
from attnsweep.reduce.seeds import presence, seed_statistics

LEVEL = 0.5  # the boundary: the seed-mean Boolean defect falls below 1/2
BAND = (0.9, 0.1)  # the defect levels that show how long the transition to a Boolean P takes

SERIES = ("rank", "defect", "leaders", "clusters", "resolved")
THEORY = ("limit_fraction", "vertex_fraction", "hull_excess", "hypotheses", "rank_bound", "levels",
          "orthant_fraction", "contraction")
FIRST_SEED = ("coordinate_mean", "coordinate_var", "eigenvalue_real", "eigenvalue_imag", "eigenvector",
              "dual_functional", "multiplicity", "phi1_score", "qk_definite", "snapshot", "coordinate_snapshot",
              "attention_snapshot", "query_snapshot", "key_snapshot", *HEAD_VARIABLES)
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
    version = 3  # 2: query_snapshot and key_snapshot (Fig. 4); 3: chunks side by side on CPU threads
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
        if not _reads_checkpoint(options):
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
        if not _reads_checkpoint(opts):
            for key in CHECKPOINT_OPTIONS:
                opts.pop(key, None)
        elif opts["checkpoint"] is not None:
            opts["checkpoint_sha256"] = checkpoint.fingerprint(opts["checkpoint"])
        return opts


    def job_memory_bytes(self, job: JobSpec) -> int:
        return resources.memory_bytes(job)

    def job_seconds(self, job: JobSpec) -> float:
        return resources.seconds(job)

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"outputs": options["outputs"], "snapshot_times": len(options["snapshot_times"])}


    # ------------------------------------------------------------------ reduce
    def reduce(self, sweep: xr.Dataset) -> xr.Dataset:
        k = sweep.sizes["seed"]
        out = seed_statistics(sweep, SERIES, cell_methods="seed: mean (flagged runs left out)")
        out["valid"] = sweep["defect"].notnull().sum("seed")
        out["valid"].attrs.update(long_name="runs not flagged for scores above 1e300 (rd.LOGIT_LIMIT)", units="1")
        for var in FIRST_SEED:
            if var in sweep:
                out[var] = sweep[var].isel(seed=0)  # one realisation shown (V and Q^T K vary by seed)
                out[var].attrs.update(sweep[var].attrs, cell_methods="first seed")
        out = out.compute()
        out.update(self.theory(sweep))
        out.attrs.update(sweep.attrs)
        out.attrs["seeds"] = k
        out.attrs["first_seed"] = int(sweep["seed"].values[0])
        return out

    @staticmethod
    def theory(sweep: xr.Dataset) -> xr.Dataset:
        """The limit-set checks of ``theory.py`` on the first and last snapshots, per (n, d, scale):
        seed means of ``limit_fraction`` (Thms 3.1, 4.2, 5.2), ``vertex_fraction`` (Thm 3.1),
        the seed maximum of ``hull_excess`` (Prop. 8.2, Eq. 9.3) and of ``levels`` (Thm 4.2),
        the fraction of seeds meeting the Q, K hypotheses, the rank bound of Thm 2.1, and the
        observations of Fig. 18 (``orthant_fraction``, ``contraction``, seed means). NaN where a
        check does not apply."""
        from attnsweep.experiments.cluster_emergence import theory  # scipy: only the reduction needs it

        dims = ("n", "d", "scale", "seed")
        shape = tuple(sweep.sizes[dim] for dim in dims)
        checks = {name: np.full(shape, np.nan) for name in THEORY}
        multiplicity = sweep["multiplicity"].transpose(*dims).values
        score = sweep["phi1_score"].transpose(*dims).values
        definite = sweep["qk_definite"].transpose(*dims).values
        d = np.broadcast_to(sweep["d"].values[None, :, None, None], shape)
        k = np.nan_to_num(multiplicity).astype(int)
        checks["hypotheses"] = np.where(k == 0, np.nan, np.where(k == 1, score > 0, definite > 0))
        checks["rank_bound"] = np.where((d == 1) & (k == 1) & (definite > 0), theory.RANK_BOUND_D1, np.nan)
        if "coordinate_snapshot" in sweep and sweep.sizes["snapshot_t"] > 1:
            snaps = sweep["coordinate_snapshot"].transpose(*dims, "snapshot_t", "token", "mode").values
            tokens = sweep["snapshot"].transpose(*dims, "snapshot_t", "token", "coord").values
            radius = float(sweep.attrs["cluster_radius"])
            for at in np.ndindex(shape):
                if d[at] <= tokens.shape[-1] and np.isfinite(tokens[at][-1, :, :d[at]]).all():
                    start, end = tokens[at][0, :, :d[at]], tokens[at][-1, :, :d[at]]
                    size = np.linalg.norm(start[:, None] - start[None], axis=-1).max()
                    checks["orthant_fraction"][at] = theory.orthant_fraction(end, radius * size)
                    checks["contraction"][at] = theory.contraction(end, start)
                first, last = snaps[at][0], snaps[at][-1]
                if not 1 <= k[at] <= first.shape[-1] or not np.isfinite(last[:, :k[at]]).all():
                    continue
                start, end = first[:, :k[at]], last[:, :k[at]]
                size = np.linalg.norm(start[:, None] - start[None], axis=-1).max()  # diameter
                checks["limit_fraction"][at] = theory.limit_fraction(end, radius * size)
                checks["hull_excess"][at] = theory.hull_excess(end, start) / size
                if k[at] == 1:
                    checks["levels"][at] = theory.levels(end[:, 0], radius * size)
                if k[at] == d[at]:
                    checks["vertex_fraction"][at] = theory.vertex_fraction(end, radius * size)
        out = xr.Dataset(coords={dim: sweep[dim].values for dim in dims[:-1]})
        for name, values in checks.items():
            data = xr.DataArray(values, dims=dims)
            out[name] = data.max("seed") if name in ("hull_excess", "levels") else data.mean("seed")
        held = presence(sweep, dims)  # a refined sweep: the minimum over the seeds each point holds
        if held is None:
            out["rank_bound"] = xr.DataArray(checks["rank_bound"], dims=dims).min("seed", skipna=False)
        else:
            least = np.where(held, checks["rank_bound"], np.inf).min(-1)
            out["rank_bound"] = xr.DataArray(np.where(held.any(-1), least, np.nan), dims=dims[:-1])
        long_names = {
            "limit_fraction": "seed mean fraction of tokens whose F-coordinates end within cluster_radius diam of "
                              "the boundary of their hull or 0 (Thms 3.1, 4.2, 5.2 predict 1)",
            "vertex_fraction": "seed mean fraction of tokens ending within cluster_radius diam of a vertex of "
                               "conv z (V = lambda I: Thm 3.1, generic limit, predicts 1)",
            "hull_excess": "seed max distance of the last F-coordinates outside the hull of the first, in units "
                           "of their diameter (Prop. 8.2, Eq. 9.3 predict <= 0)",
            "hypotheses": "fraction of seeds with <Q phi_1, K phi_1> > 0 (k = 1) or Q^T K > 0 (k > 1)",
            "rank_bound": "rank of the Boolean limit of P (Thm 2.1, d = 1, V > 0, QK > 0; almost every start)",
            "levels": "seed max number of levels of phi_1^*(z_i) at the last snapshot, cluster_radius diam apart "
                      "(k = 1; Thm 4.2 and Fig. 18 top predict <= 3)",
            "orthant_fraction": "seed mean fraction of tokens in the closed positive orthant at the last snapshot "
                                "(d <= 3; Fig. 18 top predicts 1)",
            "contraction": "seed mean of max_i |z_i| at the last snapshot over that at the first (d <= 3; Fig. 18 "
                           "middle and bottom predict -> 0)",
        }
        for name, long_name in long_names.items():
            out[name].attrs.update(long_name=long_name, units="1")
        return out

    # ------------------------------------------------------------------ boundary
    def boundary(self, sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
        """t*(n, d, scale): the seed-mean Boolean defect falls below 1/2, with a bootstrap interval;
        the 0.9 and 0.1 crossings; the seed means at t_max; the theory checks.

        Each curve is preceded by b = 1 at t = 0^- (b < 1 always), so a run already Boolean at
        t = 0 crosses at t* = 0; a flagged run keeps its last recorded defect. Crossings are
        upward crossings of -b (``attnsweep.reduce.crossing``)."""
        dims = ("n", "d", "scale")
        t = sweep["t"].values
        defect = _forward_fill(sweep["defect"].transpose(*dims, "seed", "t").values)
        x = np.concatenate([t[:1], t])
        curves = -np.concatenate([np.ones(defect.shape[:-1] + (1,)), defect], -1)
        present = presence(sweep, (*dims, "seed"))  # a refined sweep: points hold different seeds
        present = None if present is None else present[..., None]
        est, low, high = bootstrap_crossing(x, curves, -LEVEL, present=present)
        mean = seed_mean(curves, present)
        out = xr.Dataset(coords={c: sweep[c].values for c in dims})
        out.update(interval_variables("t_star", dims, est, low, high,
                                      "time where the seed-mean Boolean defect falls below 1/2"))
        for level in BAND:
            out[f"t_{int(level * 100)}"] = (dims, first_crossing(x, mean, -level))
        lost = summary["resolved"].transpose(*dims, "t").values < 1
        out["t_unresolved"] = (dims, np.where(lost.any(-1), t[lost.argmax(-1)], np.nan))
        final = summary.isel(t=-1)
        for var in SERIES:
            out[f"{var}_final"] = final[var].transpose(*dims)
        for var in THEORY:
            out[var] = summary[var].transpose(*dims)
        attrs = {
            "t_90": "time where the seed-mean Boolean defect falls below 0.9",
            "t_10": "time where the seed-mean Boolean defect falls below 0.1",
            "t_unresolved": "first output time at which the scores of some realisation no longer fix P "
                            "(rounding, attention.resolved); later numbers are not to be trusted",
            **{f"{var}_final": f"seed mean of {var} at t_max" for var in SERIES},
        }
        for var, long_name in attrs.items():
            out[var].attrs.update(long_name=long_name, units="1")
        out.attrs.update(summary.attrs, level=LEVEL)
        table = out.to_dataframe().reset_index().rename(columns={"t_star_low": "ci_low", "t_star_high": "ci_high"})
        columns = ["n", "d", "scale", "t_star", "ci_low", "ci_high", "t_90", "t_10", "t_unresolved",
                   *(f"{v}_final" for v in SERIES),
                   *THEORY]
        return table[columns], out

    # ------------------------------------------------------------------ figures
    def figures(self, grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
        specs = [FigureSpec("rank", captions.caption_rank(grid, options)),
                 FigureSpec("coordinates", captions.caption_coordinates(grid, options)),
                 FigureSpec("boundary", captions.caption_boundary(grid, options))]
        if options["snapshot_times"]:
            specs += [FigureSpec("attention", captions.caption_attention(grid, options)),
                      FigureSpec("leaders", captions.caption_leaders(grid, options)),
                      FigureSpec("snapshots", captions.caption_snapshots(grid, options))]
        if _reads_checkpoint(options):
            specs.append(FigureSpec("value_spectra", captions.caption_value_spectra(grid, options)))
        return specs


def _reads_checkpoint(options: dict[str, Any]) -> bool:
    """Whether V or (Q, K) comes from the checkpoint (and every head's spectrum is stored)."""
    return "checkpoint" in (options["value"], options["query_key"])



def _forward_fill(a: np.ndarray) -> np.ndarray:
    """NaN entries along the last axis replaced by the last finite value before them."""
    index = np.where(np.isnan(a), 0, np.arange(a.shape[-1]))
    return np.take_along_axis(a, np.maximum.accumulate(index, axis=-1), -1)
