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
import pandas as pd
import xarray as xr

from attnsweep.contract import Experiment, FigureSpec, JobSpec, Target, options_file
from attnsweep.dynamics.times import check_times
from attnsweep.errors import ConfigError
from attnsweep.experiments.sphere_clustering import captions, resources
from attnsweep.grid import Axis, format_value
from attnsweep.reduce.crossing import bootstrap_crossing, first_crossing, interval_variables
from attnsweep.reduce.seeds import presence, seed_statistics

LEVEL = 0.5  # the boundary: the clustered-pair fraction crosses 1/2 (docs/papers/001.md §6)
BAND = (0.1, 0.9)  # level sets that show the width of the metastable zone


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
    version = 2  # 2: chunks on CPU threads, numpy products, the fused SA kernel, the span of the tokens
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

    def job_memory_bytes(self, job: JobSpec) -> int:
        return resources.memory_bytes(job)

    def job_seconds(self, job: JobSpec) -> float:
        return resources.seconds(job)

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"outputs": options["outputs"], "snapshot_times": len(options["snapshot_times"])}

    # ------------------------------------------------------------------ reduce
    def reduce(self, sweep: xr.Dataset) -> xr.Dataset:
        k = sweep.sizes["seed"]
        out = seed_statistics(sweep, [v for v in ("clustered", "clusters", "boolean_rank", "min_cosine", "energy")
                                      if v in sweep])
        if "snapshot" in sweep:
            out["snapshot"] = sweep["snapshot"].isel(seed=0)  # one trajectory per beta (Fig. 4)
        out = out.compute()
        out.update(self.theory(out, sweep.attrs))
        out.attrs.update(sweep.attrs)
        out.attrs["seeds"] = k
        return out

    @staticmethod
    def theory(summary: xr.Dataset, attrs: dict[str, Any]) -> xr.Dataset:
        """gamma_beta(t) (Theorem 6.8) and the hitting time t*(beta) of 1 - delta (Gamma_{inf,delta},
        Eq. 6.12) at beta_eff; only for Q = K = V = I (NaN otherwise)."""
        from attnsweep.experiments.sphere_clustering import theory  # scipy: only the reduction needs it

        model = "usa" if "usa" in attrs.get("normalisation", "sa") else "sa"
        delta = float(attrs.get("delta", 1e-3))
        identity = attrs.get("matrices") == "identity"
        n, beta, gamma = (summary[c].astype(float) for c in ("n", "beta", "gamma"))
        b = beta_eff(beta, gamma, n)
        b, n_ = xr.broadcast(b, n)
        times = summary["t"].values
        t_star = np.full(b.shape, np.nan)
        curve = np.full((*b.shape, len(times)), np.nan)
        for at in np.ndindex(b.shape):  # the closed forms hold up to beta = 700 (float64 range)
            if b.values[at] <= theory.BETA_MAX:
                t_star[at] = theory.hitting_time(b.values[at], int(n_.values[at]), delta, model)
                curve[at] = theory.gamma_curve(times, b.values[at], int(n_.values[at]), model)
        out = xr.Dataset({
            "t_star_theory": (b.dims, t_star),
            "gamma_curve": ((*b.dims, "t"), curve),
        }, coords={**b.coords, "t": times})
        if not identity:
            out = out * np.nan
        out["t_star_theory"].attrs.update(
            long_name=f"time where gamma_beta reaches 1 - delta: Gamma_inf,delta (Eq. 6.12), {model.upper()}",
            units="1")
        out["gamma_curve"].attrs.update(
            long_name=f"common pairwise cosine gamma_beta(t) for orthogonal tokens (Theorem 6.8), {model.upper()}",
            units="1")
        return out

    # ------------------------------------------------------------------ boundary
    def boundary(self, sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
        """t*(beta; n, d): the seed-mean clustered fraction crosses 1/2, with a bootstrap interval;
        the 0.1 and 0.9 crossings; and the distance to Gamma_inf,delta."""
        dims = ("n", "d", "rho", "beta", "gamma")
        t = sweep["t"].values
        samples = sweep["clustered"].transpose(*dims, "seed", "t").values
        present = presence(sweep, (*dims, "seed"))  # a refined sweep: points hold different seeds
        est, low, high = bootstrap_crossing(t, samples, LEVEL, present=None if present is None else present[..., None])
        mean = summary["clustered"].transpose(*dims, "t").values
        out = xr.Dataset(coords={c: sweep[c].values for c in dims})
        out.update(interval_variables("t_star", dims, est, low, high,
                                      "time where the seed-mean clustered fraction crosses 1/2"))
        for level in BAND:
            out[f"t_{int(level * 100)}"] = (dims, first_crossing(t, mean, level))
        out["t_star_theory"] = summary["t_star_theory"].broadcast_like(out["t_star"])
        out["t_star_minus_theory"] = out["t_star"] - out["t_star_theory"]
        out["beta_eff"] = beta_eff(out["beta"], out["gamma"], out["n"]).broadcast_like(out["t_star"])
        attrs = {
            "t_10": "time where the seed-mean clustered fraction crosses 0.1",
            "t_90": "time where the seed-mean clustered fraction crosses 0.9",
            "t_star_theory": "Gamma_inf,delta: hitting time of 1 - delta by gamma_beta (Eq. 6.12)",
            "t_star_minus_theory": "t_star - t_star_theory: finite-d distance to Gamma_inf,delta",
            "beta_eff": "beta + gamma log n",
        }
        for var, long_name in attrs.items():
            out[var].attrs.update(long_name=long_name, units="1")
        out.attrs.update(summary.attrs, level=LEVEL)
        table = out.to_dataframe().reset_index()
        table = table.rename(columns={"t_star_low": "ci_low", "t_star_high": "ci_high"})
        columns = ["n", "d", "rho", "beta", "gamma", "beta_eff", "t_star", "ci_low", "ci_high", "t_10", "t_90",
                   "t_star_theory", "t_star_minus_theory"]
        return table[columns], out

    # ------------------------------------------------------------------ figures
    def figures(self, grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
        specs = []
        for n in grid["n"]:
            tag = f"n~{format_value(n)}"
            specs.append(FigureSpec(f"phase_{tag}", captions.caption_phase(int(n), grid, options), "phase",
                                    {"n": int(n)}))
            if "clusters" in options["observables"]:
                specs.append(FigureSpec(f"clusters_{tag}", captions.caption_clusters(int(n), grid, options),
                                        "clusters", {"n": int(n)}))
        specs.append(FigureSpec("boundary", captions.caption_boundary(grid, options)))
        if options["snapshot_times"]:
            specs.append(FigureSpec("snapshots", captions.caption_snapshots(grid, options)))
        return specs
