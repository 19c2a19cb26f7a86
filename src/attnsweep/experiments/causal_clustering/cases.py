"""The value matrices V of Table 1 of paper 003 (Karagodin, Polyanskiy, Rigollet, *Clustering in
causal attention masking*), by the names the ``values`` option takes."""

from __future__ import annotations

import numpy as np

#: V of the five classes of Table 1 (Fig. 1 a-e; the paper gives only the spectra, docs/papers/003.md §6).
VALUES = {
    "identity": "V = I (Table 1a, Theorem 4.1: every token goes to x_1(0))",
    "top_multiple": "V = diag(1, 1, 1/2, ...): lambda_max > 0 of multiplicity 2 (Table 1b)",
    "top_simple": "V = diag(1, 1/2, 1/4, ...): lambda_max > 0 simple (Table 1c)",
    "bottom_multiple": "V = -diag(1, 1, 2, ...): lambda_max < 0 of multiplicity 2 (Table 1d)",
    "bottom_simple": "V = -diag(1, 2, 3, ...): lambda_max < 0 simple (Table 1e)",
}


def value_matrix(name: str, d: int) -> np.ndarray:
    """V (d, d) float64 of the Table 1 class ``name`` (see ``VALUES``); d = 3 gives the choices of
    docs/papers/003.md §6: diag(1, 1, 1/2), diag(1, 1/2, 1/4), diag(-1, -1, -2), diag(-1, -2, -3)."""
    tail = np.ones(max(d - 2, 0))
    diagonals = {
        "identity": np.ones(d),
        "top_multiple": np.r_[1.0, 1.0, tail / 2],
        "top_simple": np.r_[1.0, 0.5, tail / 4],
        "bottom_multiple": -np.r_[1.0, 1.0, 2 * tail],
        "bottom_simple": -np.r_[1.0, 2.0, 3 * tail],
    }
    if name not in diagonals:
        raise ValueError(f"unknown value matrix {name!r} ({', '.join(VALUES)})")
    return np.diag(diagonals[name][:d])
