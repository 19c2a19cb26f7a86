"""circle_synchronization: where synchronisation on the circle fails (paper 001's Problem 3).

On the circle the USA dynamics is the gradient ascent of the interaction energy E_beta (001
Eq. 7.1, 7.4), and Problem 3 asks whether every critical point but the synchronised ones is a
strict saddle. Known: yes for beta >= -0.16 (Polyanskiy, Rigollet, Yao, arXiv:2507.22857; for
beta in (0, 1] first by Criscitiello, Rebjock, McRae, Boumal, arXiv:2405.18273), no for beta < -2/3.
Per (n, beta, seed) a job flows uniform random angles to rest (USA and SA), polishes the end
state by Newton's method and classifies it with a certificate (:mod:`.critical`); the reduction
gives basin fractions with binomial intervals and beta_c(n), the largest beta with a spurious
attractor, from the random starts and from a structured search of cluster configurations
(:mod:`.structured`), each the other's check. The structured search is the experiment's theory,
a job per n (:mod:`.theory`): new betas or starts rerun none of it, nor its options the flows.
"""

from __future__ import annotations

import math
from typing import Any

from attnsweep.contract import Experiment, Target, options_file
from attnsweep.errors import ConfigError
from attnsweep.grid import Axis

#: The most Euler steps one start may take (t_max x rate(beta) / courant): a guard on the grid's |beta|.
MAX_STEPS = 2_000_000
#: The options of the structured search (the theory jobs), none of which changes a flow.
STRUCTURED = ("k_max", "spread", "scan", "threshold_tol")


class CircleSynchronization(Experiment):
    name = "circle_synchronization"
    title = "Synchronisation on the circle: spurious attractors of the energy flow and beta_c(n) (Problem 3 of 001)"
    paper = ("arXiv:2312.10794 (Geshkovski, Letrouit, Polyanskiy, Rigollet: A mathematical perspective on "
             "Transformers), Problem 3; the bounds of arXiv:2507.22857 (Polyanskiy, Rigollet, Yao: "
             "Synchronization of mean-field models on the circle) and arXiv:2405.18273 (Criscitiello, "
             "Rebjock, McRae, Boumal)")
    axes = (
        Axis("n", "int", "number of particles on the circle", low=2, default=[3, 4, 5, 6, 7, 8]),
        Axis("beta", "float", "inverse temperature beta (negative: the kernel e^{beta cos} repels less at short range)",
             low=-10, high=10, default={"start": -1.5, "stop": 0.5, "num": 21}),
    )
    options_schema = options_file(__file__)
    default_wildcards = ("n",)
    version = 1
    # beta_c from the random starts: the largest grid beta with a certified spurious attractor and
    # the next beta bracket it; new betas between them locate it.
    targets = (Target("beta_c", crossing="beta", curves=()),)
    theory_axes = ("n",)

    def theory_options(self, options: dict[str, Any]) -> dict[str, Any]:
        return {key: options[key] for key in STRUCTURED}

    def result_options(self, options: dict[str, Any], grid: dict[str, list[float]]) -> dict[str, Any]:
        return {key: value for key, value in options.items() if key not in STRUCTURED}

    def extents(self, grid: dict[str, list[float]]) -> dict[str, list]:
        """The polished angles' ``slot`` dimension: as long as the largest n."""
        return {"slot": list(range(int(max(grid["n"]))))}

    def check(self, options: dict[str, Any], grid: dict[str, list[float]], prefix: str) -> None:
        from attnsweep.experiments.circle_synchronization.resources import rate

        scan = options["scan"]
        if scan["stop"] <= scan["start"]:
            raise ConfigError(f"{prefix}.scan", f"stop {scan['stop']:g} is not above start {scan['start']:g}")
        worst = max(grid["beta"], key=abs)
        for normalisation in options["normalisations"]:
            steps = options["t_max"] * float(rate(worst, normalisation)) / options["courant"]
            if steps > MAX_STEPS:
                raise ConfigError(f"{prefix}.beta", f"beta = {worst:g} needs {steps:.3g} Euler steps for t_max = "
                                  f"{options['t_max']:g} ({normalisation}; at most {MAX_STEPS:.0e}): narrow beta "
                                  "or lower t_max")
        if math.ceil((scan["stop"] - scan["start"]) / scan["step"]) > 100_000:
            raise ConfigError(f"{prefix}.scan", "holds over 100000 values of beta: raise its step")
