"""noisy_clustering: paper 001's Problem 7, attention dynamics with noise.

n tokens on S^{d-1} follow USA (or SA) with Q = K = V = I and Brownian noise of strength
sigma = K^{-1/2} (:mod:`attnsweep.dynamics.langevin`), from i.i.d. uniform tokens and from one
point, on the same noise. Per (n, d, beta, K, seed) and start the job records time averages, after
a burn-in, of the order parameter |m| = |(1/n) sum_i x_i|, of the top eigenvalue of
(1/n) sum_i x_i x_i^T - I/d, of the cluster count and of the energy, each with its integrated
autocorrelation time. Theory (USA): the linear-stability threshold K_# and beta_* of Mun and
Rosenzweig, and the mean-field K_c from the project's own stationary McKean-Vlasov solver.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.errors import ConfigError
from attnsweep.grid import Axis

#: The largest dt times a tight cluster's relaxation rate a sweep may take (see ``_check_stiffness``).
STIFFNESS = 1.0


class NoisyClustering(Experiment):
    name = "noisy_clustering"
    title = "Noisy USA/SA dynamics on the sphere: order, hysteresis and the transition in K (Problem 7 of 001)"
    paper = ("arXiv:2312.10794 (Geshkovski, Letrouit, Polyanskiy, Rigollet: A mathematical perspective on "
             "Transformers), Problem 7; the thresholds of arXiv:2606.05140 (Mun, Rosenzweig: Phase transitions "
             "for the noisy transformer model in arbitrary dimension)")
    axes = (
        Axis("n", "int", "number of tokens", low=1, default=[64]),
        Axis("d", "int", "token dimension (tokens live on the sphere S^{d-1})", low=2, default=[3]),
        Axis("beta", "float", "inverse temperature beta of the attention weights e^{beta <x_i, x_j>}", low=0,
             default=[1.0]),
        Axis("K", "float", "coupling K = 1/sigma^2 (sigma: the noise's strength)", low=0, low_open=True,
             infinite=True, default={"start": 0.5, "stop": 3.0, "num": 11},
             note="inf is no noise (clock: attention only)"),
    )
    options_schema = options_file(__file__)
    default_wildcards = ("n", "d")
    version = 1
    # The coupling where the averaged |m| crosses the level, from each start: a crossing along K,
    # a curve of beta.
    targets = (Target("K_uniform", crossing="K", curves=("beta",)),
               Target("K_point", crossing="K", curves=("beta",)))

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        if options["clock"] == "noise" and math.inf in grid["K"]:
            raise ConfigError(f"{prefix}.K", "K = inf (no noise) needs clock: attention (the noise clock is t/K)")
        if options["dt"] > options["burn_in"] + options["window"]:
            raise ConfigError(f"{prefix}.dt", f"dt = {options['dt']} exceeds burn_in + window")
        self._check_stiffness(options, grid, prefix)
        if options["window"] < 2 * options["record_every"] * options["dt"]:
            raise ConfigError(f"{prefix}.window", "the window holds fewer than 2 records "
                              f"(record_every * dt = {options['record_every'] * options['dt']:g})")

    def _check_stiffness(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        """Refuse a step that a tight cluster's relaxation outruns. Within a cluster the USA drift
        pulls a token back at a rate up to e^beta (in t; K e^beta in sigma^2 t), and Euler-Maruyama's
        stationary variance of such a mode is the true one over 1 - rate dt / 2: at rate dt = 1 it
        is twice it, at 2 the step is unstable. (SA's weights are normalised: rate <= 1.)"""
        from attnsweep.experiments.noisy_clustering.resources import couplings

        betas = np.asarray(grid["beta"], float)
        finite = [k for k in grid["K"] if math.isfinite(k)]
        worst = 0.0, 0.0, 0.0
        for d in grid["d"]:
            k = couplings(finite, grid["beta"], int(d), options["K_unit"]) if finite else np.zeros((0, len(betas)))
            clock = k if options["clock"] == "noise" else np.ones_like(k)
            with np.errstate(over="ignore", invalid="ignore"):
                rate = clock * (np.exp(betas) if options["normalisation"] == "usa" else 1.0)
            if not np.isfinite(rate).all():  # e^beta overflows, or K_# underflows against it
                j = int(np.nonzero(~np.isfinite(rate))[1][0])
                raise ConfigError(f"{prefix}.beta", f"beta = {betas[j]:g} is too large at d = {d}: the cluster's "
                                  "rate K e^beta is no finite float64")
            if rate.size and rate.max() > worst[0]:
                i, j = np.unravel_index(rate.argmax(), rate.shape)
                worst = float(rate.max()), float(betas[j]), float(finite[i])
        rate, beta, k = worst
        if rate * options["dt"] > STIFFNESS:
            raise ConfigError(f"{prefix}.dt", f"dt = {options['dt']:g} is too coarse at beta = {beta:g}, K = {k:g}: "
                              f"a cluster relaxes at {rate:.4g} per unit time there; use dt <= "
                              f"{STIFFNESS / rate:.3g} (dt x rate <= {STIFFNESS:g})")

    def records(self, options: dict[str, Any]) -> dict[str, int]:
        steps = (options["burn_in"] + options["window"]) / options["dt"]
        return {"record_every": math.ceil(steps / options["record_every"]), "trace_points": options["trace_points"]}

    def targets_for(self, options: dict[str, Any]) -> tuple[Target, ...]:
        """The crossing from each start the sweep runs."""
        return tuple(t for t in self.targets if t.variable.removeprefix("K_") in options["starts"])
