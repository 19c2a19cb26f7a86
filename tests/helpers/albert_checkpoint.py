"""ALBERT checkpoints that the tests write themselves, in the Hugging Face layout (``config.json``
and ``model.safetensors`` or ``pytorch_model.bin``, the key names of ``transformers``' ALBERT),
with heads whose spectra and Definition 4.1 numbers are known in closed form.

Hidden size 16, 4 heads of d_h = 4. Head h (from 1) reads its value coordinates into model space
through W_O[:, s_h] = E_h: four columns of the 8 x 8 Sylvester-Hadamard matrix on 8 of the 16 rows,
so E_h^T E_h = 8 I. With W_V[s_h, :] = M_h E_h^T / 8 + F (I - E_h E_h^T / 8), the second term
annihilating E_h, V_h = W_V[s_h, :] E_h = M_h = S diag(Lambda_h) S^-1 (a real 2 x 2 block
[[a, b], [-b, a]] for a +- ib), S unit lower triangular with integer entries. Likewise
W_Q[s_h, :] E_h = I and W_K[s_h, :] E_h = diag(r_h), so A_h = Q_h^T K_h = diag(r_h) / sqrt(d_h).
The leading eigenvector is u_1 = S e_1 = (1, 1, 0, 1) (Lambda_h lists lambda_1 first), hence
u_1^T A_h u_1 / |u_1|^2 = (r_1 + r_2 + r_4) / 6 and, as |E_h u_1|^2 = 8 |u_1|^2, the model-space
number phi^T B_h phi is that over 8. Every entry is a dyadic rational of a few bits: exact in
float32 (the checkpoint's dtype), and the float64 products above are exact, so V_h = M_h bit for bit.

Heads: 1 a good triple; 2 a complex leading pair 1 +- i (the eigenvalue condition fails); 3 a good
spectrum with <Q phi_1, K phi_1> < 0 (the form fails); 4 lambda_1 = 1 = |lambda_2| (fails, tie).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

HIDDEN, HEADS, SIZE = 16, 4, 4
LAYER = "encoder.albert_layer_groups.0.albert_layers.0."
S = np.array([[1, 0, 0, 0], [1, 1, 0, 0], [0, -1, 1, 0], [1, 0, 2, 1]], dtype=np.float64)
U1 = S[:, 0]  # the leading eigenvector of every head with a real lambda_1
#: Lambda_h: real eigenvalues, or a pair [a, b] for a +- ib; lambda_1 first.
SPECTRA = {1: [2.0, 1.0, -0.5, 0.25], 2: [[1.0, 1.0], 0.5, 0.25], 3: [1.5, -1.0, 0.5, 0.25], 4: [1.0, -1.0, 0.5, 0.25]}
KEY_DIAGONALS = {1: [1.0, 2.0, 1.0, 1.0], 2: [1.0, 1.0, 1.0, 1.0], 3: [-1.0, -1.0, 4.0, -1.0], 4: [1.0, 1.0, 1.0, 1.0]}

#: The closed forms per head: eigenvalues by decreasing modulus (a pair +Im first), lambda_1,
#: |lambda_2|/|lambda_1|, u_1^T A_h u_1/|u_1|^2 (head coordinates), phi^T B_h phi (model space),
#: the eigenvalue condition and the good triple of Definition 4.1.
EXPECTED = {
    1: {"eigenvalues": [2, 1, -0.5, 0.25], "lambda_1": 2.0, "gap": 0.5, "score_head": 4 / 6,
        "eigen": 1, "good": 1},
    2: {"eigenvalues": [1 + 1j, 1 - 1j, 0.5, 0.25], "lambda_1": 1.0, "gap": 1.0, "score_head": np.nan,
        "eigen": 0, "good": 0},
    3: {"eigenvalues": [1.5, -1, 0.5, 0.25], "lambda_1": 1.5, "gap": 2 / 3, "score_head": -3 / 6,
        "eigen": 1, "good": 0},
    4: {"eigenvalues": [1, -1, 0.5, 0.25], "lambda_1": 1.0, "gap": 1.0, "score_head": 3 / 6,
        "eigen": 0, "good": 0},
}
for _head in EXPECTED.values():
    _head["score"] = _head["score_head"] / 8  # |E_h u_1|^2 = 8 |u_1|^2


def value_matrix(h: int) -> np.ndarray:
    """M_h = S Lambda_h S^-1 (exact: S^-1 has integer entries)."""
    return S @ spectrum_block(SPECTRA[h]) @ np.round(np.linalg.inv(S))


def spectrum_block(spectrum: list) -> np.ndarray:
    blocks = [np.array([[s[0], s[1]], [-s[1], s[0]]]) if isinstance(s, list) else np.array([[s]]) for s in spectrum]
    out = np.zeros((SIZE, SIZE))
    at = 0
    for block in blocks:
        out[at:at + len(block), at:at + len(block)] = block
        at += len(block)
    return out


#: Tolerances from float64 roundoff alone (the float32 checkpoint holds every entry exactly, and
#: V_h = M_h bit for bit). LAPACK's eigenvalues of M_h are those of M_h + E with |E| <= BACKWARD
#: (backward stable: c d_h^2 eps |M_h|, c = 4 a margin over the QR algorithm's constants at d_h = 4);
#: each moves by at most cond(S) |E| (Bauer-Fike): EIGEN_TOL (7e-13). The eigenvector u_1 moves by at
#: most cond(S) |E| / (smallest gap between eigenvalues, 1/4), so u_1^T A_h u_1 / |u_1|^2 by at most
#: twice |A_h| (<= 2) that: FORM_TOL (1e-11), the same for phi^T B_h phi, eight times smaller.
BACKWARD = 4 * SIZE ** 2 * np.finfo(np.float64).eps * max(np.linalg.norm(value_matrix(h), 2) for h in SPECTRA)
EIGEN_TOL = np.linalg.cond(S) * BACKWARD
GAP = min(abs(a - b) for h in EXPECTED for i, a in enumerate(EXPECTED[h]["eigenvalues"])
          for b in EXPECTED[h]["eigenvalues"][i + 1:])
FORM_TOL = 2 * max(max(map(abs, r)) / 2 for r in KEY_DIAGONALS.values()) * EIGEN_TOL / GAP


def hadamard(order: int) -> np.ndarray:
    h = np.ones((1, 1))
    while len(h) < order:
        h = np.block([[h, h], [h, -h]])
    return h


def output_columns(h: int) -> np.ndarray:
    """E_h = W_O[:, s_h] (16 x 4): Hadamard columns h-1..h+2 (mod 8) on 8 rows that move with h."""
    e = np.zeros((HIDDEN, SIZE))
    rows = np.sort((np.arange(8) * 2 + h) % HIDDEN)
    e[rows] = hadamard(8)[:, (np.arange(SIZE) + h - 1) % 8]
    return e


def projections() -> dict[str, np.ndarray]:
    """W_Q, W_K, W_V, W_O (16 x 16) of the heads above, float64 (exact in float32)."""
    w = {name: np.zeros((HIDDEN, HIDDEN)) for name in ("query", "key", "value", "dense")}
    rng = np.random.default_rng(35)
    for h in range(1, HEADS + 1):
        e, s = output_columns(h), slice((h - 1) * SIZE, h * SIZE)
        away = np.eye(HIDDEN) - e @ e.T / 8  # annihilates E_h: rows that V_h, Q_h, K_h must not see
        w["dense"][:, s] = e
        for name, m in (("value", value_matrix(h)), ("query", np.eye(SIZE)), ("key", np.diag(KEY_DIAGONALS[h]))):
            w[name][s] = m @ e.T / 8 + rng.integers(-2, 3, (SIZE, HIDDEN)) @ away
    return w


def state_dict(prefix: str = "albert.") -> dict[str, np.ndarray]:
    """Every tensor of the checkpoint, float32, under ``prefix`` as AlbertForMaskedLM saves them
    (biases and layer norms included, which the reading drops), the MLM head unprefixed."""
    rng = np.random.default_rng(4)
    tensors = {f"{prefix}{LAYER}attention.{name}.weight": w for name, w in projections().items()}
    for name in ("query", "key", "value", "dense"):
        tensors[f"{prefix}{LAYER}attention.{name}.bias"] = rng.normal(size=HIDDEN)
    tensors[f"{prefix}{LAYER}attention.LayerNorm.weight"] = rng.normal(size=HIDDEN)
    tensors[f"{prefix}{LAYER}ffn.weight"] = rng.normal(size=(4 * HIDDEN, HIDDEN))
    tensors[f"{prefix}embeddings.word_embeddings.weight"] = rng.normal(size=(30, 8))
    tensors["predictions.bias"] = rng.normal(size=30)
    return {key: np.ascontiguousarray(value, dtype=np.float32) for key, value in tensors.items()}


def config(hidden: int = HIDDEN, heads: int = HEADS) -> dict:
    """config.json as Hugging Face writes it for ALBERT (the keys the reading uses, and some)."""
    return {"architectures": ["AlbertForMaskedLM"], "model_type": "albert", "hidden_size": hidden,
            "num_attention_heads": heads, "num_hidden_groups": 1, "inner_group_num": 1, "num_hidden_layers": 3,
            "embedding_size": 8, "intermediate_size": 4 * hidden, "vocab_size": 30}


def write(directory: Path, weights: dict[str, np.ndarray] | None = None, fmt: str = "safetensors",
          settings: dict | None = None) -> Path:
    """A checkpoint directory: config.json (:func:`config`, or ``settings``) and the weights
    (:func:`state_dict`, or ``weights``) as model.safetensors or pytorch_model.bin."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(settings or config(), indent=2))
    tensors = state_dict() if weights is None else weights
    if fmt == "safetensors":
        from safetensors.numpy import save_file

        save_file(tensors, directory / "model.safetensors")
    else:
        import torch

        torch.save({key: torch.from_numpy(value) for key, value in tensors.items()}, directory / "pytorch_model.bin")
    return directory


def write_random(directory: Path, heads: int, size: int, seed: int = 0) -> Path:
    """A checkpoint of ``heads`` heads of ``size`` with N(0, 0.02^2) attention weights (the
    initialisation scale of ALBERT), model.safetensors: for sizes the closed forms do not need."""
    rng = np.random.default_rng(seed)
    hidden = heads * size
    tensors = {f"albert.{LAYER}attention.{name}.weight": rng.normal(0, 0.02, (hidden, hidden)).astype(np.float32)
               for name in ("query", "key", "value", "dense")}
    return write(directory, tensors, settings=config(hidden, heads))
