"""The structured search of every n of a sweep: the thresholds of its families, and beta_c(n).

beta_c(n) from the structured search is the largest family threshold (:mod:`.structured`): the
largest beta on the scan at which some searched cluster configuration is a strict local maximum,
refined by bisection. It bounds the true beta_c(n) from below; the random starts check it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnsweep.experiments.circle_synchronization import structured


def scan(options: dict[str, Any]) -> np.ndarray:
    """The structured search's betas, start to stop by step (both ends included)."""
    s = options["scan"]
    count = int(np.floor((s["stop"] - s["start"]) / s["step"] + 1e-9)) + 1
    return s["start"] + s["step"] * np.arange(count)


def thresholds(n: int, options: dict[str, Any]) -> list[structured.Threshold]:
    """Every searched family of n with a stable solution on the scan, its threshold located."""
    betas = scan(options)
    found = (structured.threshold(m, betas, options["threshold_tol"])
             for m in structured.families(n, options["k_max"], options["spread"]))
    return sorted((t for t in found if t is not None), key=lambda t: -t.beta_low)


def label(masses: tuple[int, ...]) -> str:
    """A family as text: its masses in circular order, e.g. ``2-2-2``."""
    return "-".join(map(str, masses))
