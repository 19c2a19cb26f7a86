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
below (1/2) log 2, with a confidence interval over seeds, and the fit t* = B (K - K_0)."""

from __future__ import annotations

import math
from typing import Any

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.errors import ConfigError
from attnsweep.experiments.mixture_training import images, resources
from attnsweep.grid import Axis

MODES = ("joint", "three_stage", "attention_only")


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


    def records(self, options: dict[str, Any]) -> dict[str, int]:
        return {"steps": options["steps"] // options["record_every"] + 2,
                "map_steps": len(options["map_steps"]) + 1}


