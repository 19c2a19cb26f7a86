"""The cases of V and of (Q, K) that the ``value`` and ``query_key`` options of cluster_emergence
name, as the store's attrs and the figures' captions describe them (paper 004: Geshkovski,
Letrouit, Polyanskiy, Rigollet, *The emergence of clusters in self-attention dynamics*)."""

from __future__ import annotations

VALUES = {
    "identity": "V = I (Theorem 3.1)",
    "minus_identity": "V = -I (Theorem 8.5)",
    "fixed": "V given in the config",
    "symmetric": "V = (M + M^T)/2, M_ij ~ U[-1, 1] (random symmetric: Figs. 6, 7b)",
    "gram": "V = G G^T / d, G_ij ~ U[-1, 1] (random V > 0: Figs. 4, 12)",
    "spectrum": "V = S B S^-1, B block diagonal with the given spectrum, S_ij ~ U[-1, 1] (Figs. 7a, 13, 14)",
    "checkpoint": "V = V_h = W_V[s_h, :] W_O[:, s_h] of a trained ALBERT's head h (Section 11.2, Fig. 10)",
}
QUERY_KEYS = {
    "identity": "Q = K = I",
    "fixed": "Q, K given in the config",
    "uniform": "Q^T K with i.i.d. U[-1, 1] entries (Figs. 16, 17)",
    "uniform_factors": "Q, K with i.i.d. U[-1, 1] entries (Fig. 7b)",
    "gram": "Q = G G^T / d, G_ij ~ U[-1, 1], K = I (random Q > 0: Fig. 4)",
    "checkpoint": "Q_h, K_h = W_Q[s_h, :] W_O[:, s_h], W_K[s_h, :] W_O[:, s_h] over d_h^{1/4} of a trained ALBERT's "
                  "head h (Fig. 10)",
}
