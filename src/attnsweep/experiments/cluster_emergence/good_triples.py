"""Definition 4.1 of paper 004 for every head of a checkpoint (Section 11.2, Fig. 10).

(Q_h, K_h, V_h) is a good triple when (i) the eigenvalue of V_h of largest modulus is real,
positive and simple, lambda_1 > |lambda_2| >= ..., and (ii) <Q_h phi_1, K_h phi_1> > 0 on the line
of its eigenvector. Fig. 10's caption gives the number of (ii) "along the eigenvector of norm 1"
for ALBERT-xlarge-v2's heads 5 and 14: 1.3060 and 0.6719. Both readings of that norm are kept:
phi = W_O[:, s_h] u_1 of norm 1 in model space (``head_phi1_score``: phi^T B_h phi) and u_1 of norm
1 in the head's value coordinates (``head_phi1_score_head``: u_1^T A_h u_1); they differ by the
factor |W_O[:, s_h] u_1|^2 / |u_1|^2 > 0, so (ii) holds in both or in neither. numpy only;
the matrices are those of :mod:`checkpoint`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # the planner imports this module for VARIABLES alone
    from attnsweep.experiments.cluster_emergence.checkpoint import Heads

#: Fig. 10's caption: <Q_h phi_1, K_h phi_1> of ALBERT-xlarge-v2's heads h = 5 and 14 (numbered from 1).
PAPER_SCORES = {5: 1.3060, 14: 0.6719}

VARIABLES: dict[str, dict[str, str]] = {
    "head_eigenvalue_real": {"long_name": "Re lambda_j(V_h), j = 1..d_h by decreasing modulus (Fig. 10)",
                             "units": "1"},
    "head_eigenvalue_imag": {"long_name": "Im lambda_j(V_h) (a conjugate pair: +Im first)", "units": "1"},
    "head_lambda_1": {"long_name": "Re lambda_1(V_h), the eigenvalue of largest modulus (Def. 4.1 asks real, > 0)",
                      "units": "1"},
    "head_gap": {"long_name": "|lambda_2(V_h)| / |lambda_1(V_h)| (Def. 4.1 asks < 1)", "units": "1"},
    "head_phi1_score": {"long_name": "<Q_h phi_1, K_h phi_1> = phi^T B_h phi, phi = W_O[:, s_h] u_1 of norm 1 "
                                     "in model space (Def. 4.1 asks > 0; NaN for a complex lambda_1)",
                        "units": "1"},
    "head_phi1_score_head": {"long_name": "<Q_h u_1, K_h u_1> = u_1^T A_h u_1, u_1 of norm 1 in the head's value "
                                          "coordinates (the same sign as head_phi1_score)", "units": "1"},
    "head_eigen_condition": {"long_name": "1 if lambda_1(V_h) is real, positive, simple and > |lambda_2| "
                                          "(Def. 4.1, first condition), else 0", "units": "1"},
    "head_good_triple": {"long_name": "1 if (Q_h, K_h, V_h) is a good triple: both conditions of Def. 4.1, "
                                      "else 0", "units": "1"},
}


def by_modulus(values: np.ndarray, rtol: float) -> np.ndarray:
    """The order of eigenvalues by decreasing modulus; moduli equal to ``rtol`` of the largest by
    decreasing real part, a conjugate pair +Im first."""
    modulus = np.abs(values)
    tied = np.round(modulus / max(modulus.max(), np.finfo(float).tiny), int(-np.log10(rtol)))
    return np.lexsort((-values.imag, -values.real, -tied))


def head_table(heads: Heads) -> dict[str, np.ndarray]:
    """Per head h = 1..H (axis 0): the eigenvalues of V_h (H, d_h) and the quantities of
    Definition 4.1 (H,), keyed as :data:`VARIABLES`."""
    from attnsweep.experiments.cluster_emergence.theory import RTOL, dominant_multiplicity  # scipy: jobs only

    rows: dict[str, list] = {name: [] for name in VARIABLES}
    for h in range(1, heads.count + 1):
        values, vectors = np.linalg.eig(heads.value_matrix(h))
        order = by_modulus(values, RTOL)
        values, lead = values[order], vectors[:, order[0]]
        score = score_head = np.nan
        if values[0].imag == 0:  # LAPACK returns exact zeros for the real eigenvalues of a real matrix
            u = lead.real / np.linalg.norm(lead.real)
            q, k = heads.query_key(h)
            score_head = float((q @ u) @ (k @ u))  # u^T A_h u, |u| = 1
            score = score_head / float(np.linalg.norm(heads.output(h) @ u)) ** 2  # phi^T B_h phi, |phi| = 1
        eigen = int(dominant_multiplicity(values)) == 1
        rows["head_eigenvalue_real"].append(values.real)
        rows["head_eigenvalue_imag"].append(values.imag)
        rows["head_lambda_1"].append(values[0].real)
        rows["head_gap"].append(abs(values[1]) / abs(values[0]) if len(values) > 1 and values[0] != 0 else np.nan)
        rows["head_phi1_score"].append(score)
        rows["head_phi1_score_head"].append(score_head)
        rows["head_eigen_condition"].append(float(eigen))
        rows["head_good_triple"].append(float(eigen and score > 0))
    return {name: np.asarray(values, dtype=np.float64) for name, values in rows.items()}
