"""mixture_training: paper 002, *Transformers provably learn two-mixture of linear classification
via gradient flow*.

A training run, not a particle system: the two-headed ReLU transformer of Eq. 1 learns the K-mixture
of Definition 2.1 by gradient descent (flow time t = lr x step) on the exact population (or
minibatches of it; or on sequences of real digit images, App. A.5), jointly (Section 3.1), by the
three stages of Algorithm 1, or with the neurons frozen (Fig. 3). Two engines with one interface
(``engines.py``): the parameters with autograd, and their Grams (exact at any width m; m = inf is
the infinite-width model of Definition 5.1). Per (K, L, omega, m, lr, b, seed, mode, engine) the job
records losses, accuracies and margins of the easy and hard samples, neuron alignments, the full
score grid of both heads, the max-margin of the attention features and the head-symmetry residuals
(``simulate.py``). Theory (``theory.py``): the stage-1 closed form, the loss floor (1/2) log 2, the
linear regime of stage 2. Boundary: t*, the first flow time at which the seed-mean hard loss falls
below (1/2) log 2, with a bootstrap interval over seeds, and the fit t* = B (K - K_0)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnsweep.contract import Experiment, FigureSpec, JobSpec, Target, options_file
from attnsweep.errors import ConfigError
from attnsweep.experiments.mixture_training import captions, images, resources
from attnsweep.grid import Axis
from attnsweep.reduce.crossing import (
    bootstrap_crossing,
    first_crossing,
    held_means,
    interval_variables,
    resampled_means,
)
from attnsweep.reduce.seeds import presence, seed_statistics

MODES = ("joint", "three_stage", "attention_only")
SERIES = ("loss_pop", "loss_easy", "loss_hard", "acc_easy", "acc_hard", "margin_easy", "margin_hard", "gamma",
          "sym_score", "sym_align")
AVERAGED = (*SERIES, "s_same", "s_cross", "loss_opposing", "align", "score")
LEVEL = math.log(2) / 2  # the loss floor while attention is uniform (docs/papers/002.md §6): t* is its crossing
RESAMPLES = 1000  # bootstrap draws of the seeds (attnsweep.reduce.crossing's default)


class MixtureTraining(Experiment):
    name = "mixture_training"
    title = "Two-headed transformer learning a K-mixture by gradient descent: stages, scores, t* (Figures 1-7)"
    paper = ("ICLR 2025, OpenReview AuAj4vRPkv (Yang, Wang, Lee, Liang: Transformers provably learn "
             "two-mixture of linear classification via gradient flow)")
    axes = (
        Axis("K", "int", "number of mixture components K (signals c_k, v_k)", low=2, default=[2],
             note="Figs. 1-4 use 2, Figs. 5-7 use 3, 4, 8"),
        Axis("L", "int", "sequence length L", low=3, default=[3], note="the theory is L = 3"),
        Axis("omega", "float", "scale omega of the initial attention weights, N(0, omega^2/m)", low=0, low_open=True,
             default=[0.1], note="Condition 1 wants it small"),
        Axis("m", "int", "attention width m (inf: the infinite-width model, Definition 5.1)", low=1, infinite=True,
             default=[64]),
        Axis("lr", "float", "learning rate (flow time t = lr step)", low=0, low_open=True, default=[0.1],
             note="Section 3.1 uses 0.1"),
        Axis("b", "float", "fixed bias b of the ReLU heads (Eq. 1)", low=0, low_open=True, default=[0.5],
             note='"such as 1/2"; Theorem 4.1 needs b < 1'),
    )
    options_schema = options_file(__file__)
    # One job per (K, L, m): every omega, lr, b, seed, mode and engine trains in one tensor batch.
    default_wildcards = ("K", "L", "m")
    version = 1
    # t* is located along the recorded steps (more seeds narrow it); a curve of K (the fit
    # t* = B (K - K_0)) and of omega. Rows also run over the mode and the engine.
    targets = (Target("t_star", crossing=None, curves=("K", "omega")),)

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        steps = options["steps"]
        if "direct" in options["engines"] and math.inf in grid["m"]:
            raise ConfigError(f"{prefix}.engines", "the direct engine needs a finite width m; m = inf is the "
                                                   "infinite-width model of the gram engine")
        if options["image_file"] and options["source"] != "digits":
            raise ConfigError(f"{prefix}.image_file", f"is read with source: digits only (source is "
                                                      f"{options['source']})")
        if options["source"] == "digits":
            wrong = [K for K in grid["K"] if K != len(options["classes"])]
            if wrong:
                raise ConfigError(f"{prefix}.K", f"K = {wrong[0]:g} with {len(options['classes'])} digit classes "
                                                 f"{options['classes']}: source digits needs K = len(classes)")
            why = images.problem(options["image_file"], options["classes"])
            if why:
                raise ConfigError(f"{prefix}.image_file" if options["image_file"] else f"{prefix}.classes", why)
        late = [s for s in options["map_steps"] if s > steps]
        if late:
            raise ConfigError(f"{prefix}.map_steps", f"steps {late} are past steps = {steps}")
        if "three_stage" not in options["modes"]:
            return
        for K in grid["K"]:
            for omega in grid["omega"]:
                for lr in grid["lr"]:
                    for b in grid["b"]:
                        n_1, n_2 = resources.three_stage_steps(options, int(K), omega, lr, b)
                        if n_1 + n_2 > steps:
                            raise ConfigError(
                                f"{prefix}.steps", f"{steps} steps leave no stage 3 at K = {K:g}, omega = {omega:g}, "
                                f"lr = {lr:g}, b = {b:g}: stages 1 and 2 take {n_1} + {n_2} steps")

    def extents(self, grid: dict[str, list[float]]) -> dict[str, list]:
        K, L = int(max(grid["K"])), int(max(grid["L"]))
        signals, positions = list(range(1, K + 1)), list(range(1, L + 1))
        return {"k": signals, "key_k": signals, "query_k": signals, "opposing": list(range(L - 1)),
                "sample": list(range(2 ** (L - 1))), "query": positions, "key": positions}

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        """classes, samples and image_file count for source digits only; a user's image file by its
        SHA-256 as well as its path."""
        opts = dict(options)
        if opts["source"] != "digits":
            opts.update(classes=None, samples=None, image_file=None)
        elif opts["image_file"] is not None:
            opts["image_sha256"] = images.fingerprint(opts["image_file"])
        return opts

    def job_memory_bytes(self, job: JobSpec) -> int:
        return resources.memory_bytes(job, len(SERIES))

    def job_seconds(self, job: JobSpec) -> float:
        return resources.seconds(job)

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"steps": options["steps"] // options["record_every"] + 2,
                "map_steps": len(options["map_steps"]) + 1}

    # ------------------------------------------------------------------ reduce
    def reduce(self, sweep: xr.Dataset) -> xr.Dataset:
        """Seed means and standard errors; the first seed's attention maps; flow time t = lr step;
        the stage-1 closed form and the loss floor on the same coordinates (``theory``)."""
        k = sweep.sizes["seed"]
        out = seed_statistics(sweep, AVERAGED)
        for var in ("attention", "stage_steps"):
            out[var] = sweep[var].isel(seed=0, drop=True)
            out[var].attrs.update(sweep[var].attrs, cell_methods="first seed")
        out = out.compute()
        out = out.assign_coords(t=sweep["lr"] * sweep["step"])
        out["t"].attrs.update(long_name="flow time lr x step", units="1")
        out.attrs.update(sweep.attrs)
        out.attrs.update(seeds=k, loss_floor=LEVEL)
        out.update(self.theory(out))
        return out

    @staticmethod
    def theory(summary: xr.Dataset) -> xr.Dataset:
        """Stage 1 at infinite width, L = 3 (docs/papers/002.md §6), on (K, b, lr, step): w_+^T v_k, w^T c_k and
        the population and easy losses while attention is uniform; valid in stage 1 of three_stage and
        early in joint training, on the synthetic data only (none for source digits)."""
        from attnsweep.experiments.mixture_training import theory  # scipy: only the reduction needs it

        if summary.attrs["source"] == "digits":
            return xr.Dataset()

        K, b, t = xr.broadcast(summary["K"].astype(float), summary["b"], summary["t"])
        fields = {name: np.empty(K.shape) for name in ("a", "c", "loss_pop", "loss_easy")}
        for index in np.ndindex(*K.shape[:-1]):
            curve = theory.stage1(t.values[index], int(K.values[index][0]), float(b.values[index][0]))
            for name, array in fields.items():
                array[index] = curve[name]
        out = xr.Dataset(coords=K.coords)
        names = {"a": "w_+^T v_k", "c": "w_+^T c_k", "loss_pop": "population loss", "loss_easy": "easy loss"}
        for name, text in names.items():
            out[f"stage1_{name}"] = (K.dims, fields[name], {"long_name": f"{text} of the stage-1 closed form "
                                                                        "(infinite width, L = 3, "
                                                                        "docs/papers/002.md §6)",
                                                            "units": "1"})
        return out

    # ------------------------------------------------------------------ boundary
    def boundary(self, sweep: xr.Dataset, summary: xr.Dataset) -> tuple[pd.DataFrame, xr.Dataset]:
        """t*: the first flow time at which the seed-mean hard loss falls below (1/2) log 2, linearly
        interpolated between recorded steps, with a percentile bootstrap interval over seeds
        (docs/papers/002.md §8; not "hard accuracy crosses 1/2"); a second estimate where the seed-mean s_same of the
        + head reaches 1; and per (L, omega, m, lr, b, mode, engine) the fit t* = B (K - K_0) with
        bootstrap intervals (``theory.bootstrap_fit``)."""
        from attnsweep.experiments.mixture_training import theory  # scipy: only the reduction needs it

        dims = ("K", "L", "omega", "m", "lr", "b", "mode", "engine")
        step = sweep["step"].values.astype(float)
        hard = sweep["loss_hard"].transpose(*dims, "seed", "step").values
        lr = sweep["lr"].values[None, None, None, None, :, None, None, None]
        held = presence(sweep, (*self.axis_names, "seed"))  # a refined sweep: points hold different seeds
        if held is not None:  # (..., seed) -> (..., mode, engine, seed, step)
            held = np.broadcast_to(held[..., None, None, :, None], hard.shape[:-1] + (1,))
        est, low, high = (x * lr for x in bootstrap_crossing(step, -hard, -LEVEL, present=held))
        same = summary["s_same"].sel(head=0).transpose(*dims, "step").values
        out = xr.Dataset(coords={c: sweep[c].values for c in dims})
        out.update(interval_variables("t_star", dims, est, low, high,
                                      "first flow time with seed-mean hard loss < (1/2) log 2"))
        out["t_score"] = (dims, first_crossing(step, same, 1.0) * lr)
        if held is None:
            boot = first_crossing(step, -resampled_means(hard), -LEVEL) * lr[..., None]  # (..., R)
        else:  # each row resampled over its own seeds, as bootstrap_crossing does
            boot = np.full((*hard.shape[:-2], RESAMPLES), np.nan)
            for row in np.ndindex(hard.shape[:-2]):
                if held[row].any():
                    means, drawn = held_means(hard[row], np.broadcast_to(held[row], hard[row].shape), RESAMPLES)
                    boot[row] = first_crossing(step, -means, -LEVEL, drawn)
            boot = boot * lr[..., None]
        fit_dims = dims[1:]
        fits = np.full((*hard.shape[1:-2], 6), np.nan)
        Ks = sweep["K"].values.astype(float)
        if len(Ks) > 1:
            for index in np.ndindex(*fits.shape[:-1]):
                fits[index] = theory.bootstrap_fit(Ks, est[(slice(None), *index)], boot[(slice(None), *index)])
        fitted = {"B": "slope B", "K0": "intercept K_0"}
        for i, name in enumerate(("B", "K0", "B_low", "B_high", "K0_low", "K0_high")):
            symbol, _, end = name.partition("_")
            what = f"{fitted[symbol]} of the fit t* = B (K - K_0) over K"
            quantile = {"low": "2.5%", "high": "97.5%"}.get(end)
            long_name = f"{quantile} bootstrap-over-seeds quantile of the {what}" if quantile else what
            out[f"fit_{name}"] = (fit_dims, fits[..., i], {"long_name": long_name, "units": "1"})
        out["t_score"].attrs.update(long_name="first flow time with seed-mean s_same (+ head) >= 1", units="1")
        out.attrs.update(summary.attrs)
        table = out.to_dataframe().reset_index()
        table["mode"] = [summary.attrs["mode_names"].split()[i] for i in table["mode"]]
        table["engine"] = [summary.attrs["engine_names"].split()[i] for i in table["engine"]]
        return table, out

    # ------------------------------------------------------------------ figures
    def figures(self, grid: dict[str, list[float]], options: dict[str, Any]) -> list[FigureSpec]:
        return captions.specs(grid, options)
