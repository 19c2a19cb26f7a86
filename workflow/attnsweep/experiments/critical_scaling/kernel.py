"""One pre-layer-norm attention layer and its observables (paper 000, Sections 2-3).

Notation (paper 000; notes 000 section 1):

- ``y_i = N(x_i) = x_i / ||x_i||`` (pre-layer-norm, Eq. 3);
- ``A_ij = softmax_j(beta <y_i, y_j>)`` over all n tokens, self included, ``beta = gamma log n``
  (Eq. 3); computed in log space (``logsumexp``), never ``exp`` of raw scores;
- ``ATT(y_i) = sum_j A_ij y_j`` (Eq. 4) and ``x'_i = ATT(y_i) + alpha x_i`` (Eq. 5);
- ``lambda`` (Eq. 26): mean over pairs of ``(1 - <y'_i, y'_j>) / (1 - <y_i, y_j>)``;
- ``eta`` (Eq. 27): ``||d X'/d X||_F^2 / (n d)`` by Hutchinson, ``E ||J v||^2`` over Rademacher v.

Memory is bounded: every n x n quantity is formed one block of rows at a time, with the block
height chosen from a byte budget. All functions take a batch of ``beta`` values (the gamma
axis) and of ``alpha`` values, which share the attention computation.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)


def normalize(x: Tensor) -> Tensor:
    """``N(x) = x / ||x||`` along the last axis (Eq. 3)."""
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)


def row_blocks(n: int, bytes_per_row: int, budget_bytes: int) -> list[slice]:
    """Slices of at most ``budget_bytes // bytes_per_row`` rows (at least one) covering ``range(n)``."""
    rows = max(1, min(n, budget_bytes // max(1, bytes_per_row)))
    return [slice(i, min(i + rows, n)) for i in range(0, n, rows)]


def attention_weights(y_rows: Tensor, y: Tensor, beta: Tensor) -> Tensor:
    """``A`` (B, b, n) of the rows ``y_rows`` (b, d) over all tokens ``y`` (n, d), for each beta (B,).

    Eq. 3 in log space: ``A = exp(beta S - logsumexp_j(beta S))``, never ``exp`` of raw scores.
    """
    logits = beta[:, None, None] * (y_rows @ y.T)
    return torch.exp(logits - torch.logsumexp(logits, dim=-1, keepdim=True))


def attention_layer(x: Tensor, beta: Tensor, budget_bytes: int) -> tuple[Tensor, Tensor]:
    """``ATT(N(X))`` (B, n, d) and the effective number of attended tokens (B,).

    ``n_eff = mean_i 1 / sum_j A_ij^2`` (participation ratio of each attention row): 1 when
    every token attends only to itself, n when attention is uniform (App. C's sparse regime
    sits in between).
    """
    y = normalize(x)
    n = y.shape[0]
    outs, inv_participation = [], []
    for rows in row_blocks(n, 3 * beta.numel() * n * y.element_size(), budget_bytes):
        attn = attention_weights(y[rows], y, beta)
        outs.append(attn @ y)  # ATT(y_i), Eq. 4
        inv_participation.append(1.0 / attn.square().sum(-1))
    return torch.cat(outs, dim=1), torch.cat(inv_participation, dim=1).mean(-1)


def centered_sq_norms(y: Tensor) -> tuple[Tensor, Tensor]:
    """``r = y - mean(y)`` and ``||r_i||^2``: pair distances ``||y_i - y_j||^2`` from a Gram of r.

    Distances are translation invariant; subtracting the common mode makes the Gram form
    ``|r_i|^2 + |r_j|^2 - 2<r_i, r_j>`` lose precision relative to ``|r|^2``, not to 1, which keeps
    ``1 - <y_i, y_j> = ||y_i - y_j||^2 / 2`` accurate when every cosine is close to 1.
    """
    r = y - y.mean(dim=-2, keepdim=True)
    return r, r.square().sum(-1)


def angle_ratio_all_pairs(y: Tensor, y_out: Tensor, budget_bytes: int) -> Tensor:
    """Eq. 26 over all ordered pairs i != j (the same mean as over i < j).

    ``y`` (n, d) inputs on the sphere, ``y_out`` (..., n, d) outputs; returns (...).
    """
    n = y.shape[-2]
    batch = y_out.shape[:-2]
    r_in, sq_in = centered_sq_norms(y)
    r_out, sq_out = centered_sq_norms(y_out)
    total = torch.zeros(batch, dtype=y.dtype, device=y.device)
    width = max(1, y_out[..., 0, 0].numel())
    for rows in row_blocks(n, 3 * width * n * y.element_size(), budget_bytes):
        dist_in = sq_in[rows, None] + sq_in[None, :] - 2 * r_in[rows] @ r_in.T
        dist_out = (
            sq_out[..., rows, None] + sq_out[..., None, :] - 2 * r_out[..., rows, :] @ r_out.transpose(-1, -2)
        )
        ratio = dist_out.clamp_min(0) / dist_in
        idx = torch.arange(rows.start, rows.stop, device=y.device)
        ratio[..., idx - rows.start, idx] = 0.0
        total += ratio.sum((-1, -2))
    return total / (n * (n - 1))


def angle_ratio_pairs(y: Tensor, y_out: Tensor, i: Tensor, j: Tensor, budget_bytes: int) -> Tensor:
    """Eq. 26 averaged over the given pairs ``(i, j)``, each ``||y_i - y_j||^2`` formed directly."""
    total = torch.zeros(y_out.shape[:-2], dtype=y.dtype, device=y.device)
    per_pair = 2 * y_out[..., 0, :].numel() * y.element_size()
    for chunk in row_blocks(i.numel(), per_pair, budget_bytes):
        a, b = i[chunk], j[chunk]
        dist_in = (y[a] - y[b]).square().sum(-1)
        dist_out = (y_out[..., a, :] - y_out[..., b, :]).square().sum(-1)
        total += (dist_out / dist_in).sum(-1)
    return total / i.numel()


def pair_sample(n: int, count: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """``count`` pairs ``i != j`` drawn uniformly (with replacement) among the ordered pairs."""
    i = torch.randint(0, n, (count,), generator=generator)
    j = (i + torch.randint(1, n, (count,), generator=generator)) % n
    return i, j


def cosine_quantiles(y: Tensor, tokens: Tensor, levels: Tensor) -> Tensor:
    """Quantiles (..., q) of the cosines ``<y_i, y_j>`` over all pairs ``i < j`` of ``tokens``.

    ``tokens`` indexes all tokens or a uniform random subset of them; the pair cosines come
    from one Gram matrix of that subset.
    """
    sub = y[..., tokens, :]
    i, j = torch.triu_indices(tokens.numel(), tokens.numel(), offset=1, device=y.device)
    cos = (sub @ sub.transpose(-1, -2))[..., i, j]
    flat = cos.reshape(-1, cos.shape[-1])
    rows_per_call = max(1, (1 << 24) // flat.shape[-1])  # torch.quantile's input-size limit
    q = torch.cat(
        [torch.quantile(flat[k : k + rows_per_call], levels, dim=-1).T for k in range(0, flat.shape[0], rows_per_call)]
    )
    return q.reshape(*cos.shape[:-1], levels.numel())


def jacobian_probe_norms(
    x: Tensor, beta: Tensor, probes: Tensor, budget_bytes: int
) -> tuple[Tensor, Tensor]:
    """``||J v||^2`` and ``<J v, v>`` for ``J = d ATT(N(X)) / dX`` (Eq. 16, alpha = 0).

    ``x`` (n, d), ``beta`` (B,), ``probes`` (m, n, d) of +-1 (any dtype, int8 saves memory);
    returns two (B, m) tensors. Forward-mode
    JVP written out, so the primal attention is formed once per row block and shared by all
    probes (a ``vmap`` of ``torch.func.jvp`` computes the same, as the tests check, but costs
    ~2 s of one-off initialisation per process):

    - ``dy = (v - y <y, v>) / ||x||`` (Lemma B.1: ``dN/dx = (I - y y^T)/||x||``);
    - ``dS_ij = <dy_i, y_j> + <y_i, dy_j>``, ``dA_ij = beta A_ij (dS_ij - sum_k A_ik dS_ik)``;
    - ``d ATT(y_i) = sum_j dA_ij y_j + A_ij dy_j``, where with ``E = A * dS`` the first sum is
      ``beta (E y - ATT(y_i) sum_j E_ij)``: one elementwise pass and one GEMM per block.

    The residual term of Eq. 5 adds ``alpha v``, which the caller applies in closed form.
    """
    n, d = x.shape
    m, n_beta = probes.shape[0], beta.numel()
    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    y = x / norm
    dy = torch.empty((m, n, d), dtype=x.dtype, device=x.device)
    for k in range(m):  # probe by probe: probes may be int8, never a second float copy
        v = probes[k].to(x.dtype)
        dy[k] = (v - y * (v * y).sum(-1, keepdim=True)) / norm
    sq = torch.zeros(n_beta, m, dtype=x.dtype, device=x.device)
    dot = torch.zeros_like(sq)
    y_one = torch.cat([y, torch.ones_like(y[:, :1])], dim=1)  # (n, d + 1): E @ [y, 1] = (E y, sum_j E)
    for rows in row_blocks(n, 2 * m * n_beta * n * x.element_size(), budget_bytes):
        b = rows.stop - rows.start
        attn = attention_weights(y[rows], y, beta)  # (B, b, n)
        d_scores = (dy[:, rows].reshape(m * b, d) @ y.T).reshape(m, b, n)
        d_scores += y[rows] @ dy.transpose(-1, -2)  # (m, b, n)
        # dA = beta (E - A sum_j E) with E = A * dS, so dA y = beta (E y - ATT sum_j E).
        e_y = ((attn[None] * d_scores[:, None]).reshape(m * n_beta * b, n) @ y_one)
        e_y = e_y.reshape(m, n_beta, b, d + 1)
        att = attn @ y  # (B, b, d)
        jv = beta[None, :, None, None] * (e_y[..., :d] - e_y[..., d:] * att)
        attn_rows = attn.reshape(n_beta * b, n)
        for k in range(m):  # probe by probe: a broadcast matmul would copy attn m times
            jv[k] += (attn_rows @ dy[k]).reshape(n_beta, b, d)
        sq += jv.square().sum((-1, -2)).T
        dot += (jv * probes[:, None, rows].to(x.dtype)).sum((-1, -2)).T
    return sq, dot


@dataclass
class LayerObservables:
    """Observables of one input X over the (gamma, alpha) batch.

    Shapes: ``lam`` (B, A), ``n_eff`` (B,), ``cos_out`` (B, A, q), ``eta_probe`` (B, A, m),
    ``cos_in`` (q,), ``eta_plateau`` scalar.
    """

    lam: Tensor
    n_eff: Tensor
    cos_in: Tensor
    cos_out: Tensor
    eta_probe: Tensor
    eta_plateau: Tensor


def observe(
    x: Tensor,
    beta: Tensor,
    alpha: Tensor,
    probes: Tensor,
    lambda_pairs: tuple[Tensor, Tensor] | None,
    quantile_tokens: Tensor,
    budget_bytes: int,
) -> LayerObservables:
    """All observables of paper 000 for one token matrix ``x`` (n, d).

    ``lambda_pairs`` None means the exact mean over all pairs; otherwise the sampled pairs.
    Cosine quantiles are taken over all pairs among ``quantile_tokens``.
    ``eta_plateau = (1 - 1/d) mean_i 1/||x_i||^2`` is the supercritical limit of eta for these
    tokens (sum of the diagonal blocks of Eq. 24; notes 000 section 1).
    """
    n, d = x.shape
    levels = torch.tensor(QUANTILES, dtype=x.dtype, device=x.device)
    y = normalize(x)
    att, n_eff = attention_layer(x, beta, budget_bytes)
    x_out = att[:, None] + alpha[None, :, None, None] * x  # (B, A, n, d), Eq. 5
    y_out = normalize(x_out)
    if lambda_pairs is None:
        lam = angle_ratio_all_pairs(y, y_out, budget_bytes)
    else:
        lam = angle_ratio_pairs(y, y_out, *lambda_pairs, budget_bytes)
    cos_in = cosine_quantiles(y, quantile_tokens, levels)
    cos_out = cosine_quantiles(y_out, quantile_tokens, levels)

    sq, dot = jacobian_probe_norms(x, beta, probes, budget_bytes)  # (B, m)
    a = alpha[None, :, None]
    # ||(J + alpha I) v||^2 = ||J v||^2 + 2 alpha <J v, v> + alpha^2 ||v||^2, ||v||^2 = n d.
    eta_probe = (sq[:, None, :] + 2 * a * dot[:, None, :] + a.square() * (n * d)) / (n * d)
    eta_plateau = (1 - 1 / d) * (1 / x.square().sum(-1)).mean()
    return LayerObservables(lam, n_eff, cos_in, cos_out, eta_probe, eta_plateau)
