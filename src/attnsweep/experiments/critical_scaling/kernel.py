"""One pre-layer-norm attention layer and its observables (paper 000, Sections 2-3).

Notation (paper 000; docs/papers/000.md §1):

- ``y_i = N(x_i) = x_i / ||x_i||`` (pre-layer-norm, Eq. 3);
- ``A_ij = softmax_j(beta <y_i, y_j>)`` over all n tokens, self included, ``beta = gamma log n``
  (Eq. 3); computed in log space (``logsumexp``), never ``exp`` of raw scores;
- ``ATT(y_i) = sum_j A_ij y_j`` (Eq. 4) and ``x'_i = ATT(y_i) + alpha x_i`` (Eq. 5);
- ``lambda`` (Eq. 26): mean over pairs of ``(1 - <y'_i, y'_j>) / (1 - <y_i, y_j>)``;
- ``eta`` (Eq. 27): ``||d X'/d X||_F^2 / (n d)``, exactly from Gram matrices
  (``jacobian_frobenius``) or by Hutchinson, ``E ||J v||^2`` over Rademacher v
  (``jacobian_probe_norms``), as the paper does.

Memory is bounded: every n x n quantity is formed one block of rows at a time, with the block
height chosen from a byte budget. All functions take a batch of ``beta`` values (the gamma
axis) and of ``alpha`` values, which share the attention computation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from attnsweep.experiments.critical_scaling.resources import squared_gram_fits

QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
DIRECT_MAX_D = 8  # pair distances from differences up to this d, from Gram matrices above


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


def attention_layer(x: Tensor, beta: Tensor, budget_bytes: int,
                    queries: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``ATT(N(X))`` (B, n, d) and the effective number of attended tokens (B,).

    ``n_eff = mean_i 1 / sum_j A_ij^2`` (participation ratio of each attention row): 1 when
    every token attends only to itself, n when attention is uniform (App. C's sparse regime
    sits in between). ``queries``: the rows i (every token a key), (B, m, d) and the mean over them.
    """
    y = normalize(x)
    y_rows = y if queries is None else y[queries]
    n = y.shape[0]
    outs, inv_participation = [], []
    for rows in row_blocks(y_rows.shape[0], 3 * beta.numel() * n * y.element_size(), budget_bytes):
        attn = attention_weights(y_rows[rows], y, beta)
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


def pair_sq_distances(r: Tensor, sq: Tensor, rows: slice) -> Tensor:
    """``||r_i - r_k||^2`` (..., b, n) for ``i`` in ``rows``, from ``centered_sq_norms``.

    From the Gram matrix of ``r`` when d > ``DIRECT_MAX_D``; for small d, where some pairs
    are inevitably within ``~n^(-2/(d-1))`` of each other and the Gram form loses all their
    digits (d = 2, n = 128: ~1e-8), from the differences themselves (b n d numbers, cheap there).
    """
    if r.shape[-1] <= DIRECT_MAX_D:
        return (r[..., rows, None, :] - r[..., None, :, :]).square().sum(-1)
    return sq[..., rows, None] + sq[..., None, :] - 2 * r[..., rows, :] @ r.transpose(-1, -2)


def angle_ratio_all_pairs(y: Tensor, y_out: Tensor, budget_bytes: int) -> Tensor:
    """Eq. 26 over all ordered pairs i != j (the same mean as over i < j).

    ``y`` (n, d) inputs on the sphere, ``y_out`` (..., n, d) outputs; returns (...).
    """
    n, d = y.shape[-2:]
    batch = y_out.shape[:-2]
    r_in, sq_in = centered_sq_norms(y)
    r_out, sq_out = centered_sq_norms(y_out)
    total = torch.zeros(batch, dtype=y.dtype, device=y.device)
    width = max(1, y_out[..., 0, 0].numel()) * (d if d <= DIRECT_MAX_D else 3)
    for rows in row_blocks(n, width * n * y.element_size(), budget_bytes):
        dist_in = pair_sq_distances(r_in, sq_in, rows)
        dist_out = pair_sq_distances(r_out, sq_out, rows)
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
    # numpy selects (introselect) where torch.quantile sorts: ~2x faster on the CPU
    q = np.quantile(cos.cpu().numpy(), levels.cpu().numpy(), axis=-1)
    return torch.from_numpy(np.moveaxis(q, 0, -1)).to(y.device, y.dtype)


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


def span_coordinates(z0: Tensor, z: Tensor) -> tuple[Tensor, Tensor]:
    """``z_0`` (d,) and ``z`` (n, d) in an orthonormal basis of their span (dimension n + 1).

    Every observable except the ambient ``d`` that eta's formula takes as a number is
    invariant under rotations of R^d, so for ``d > n + 1`` the exact path works in these
    coordinates (``Z^T = Q R``, ``Z Q = R^T``: an isometry) at the cost of n + 1 dimensions.
    """
    _, r = torch.linalg.qr(torch.cat([z0[None], z]).T)
    coords = r.T
    return coords[0], coords[1:]


class ExactLayer(NamedTuple):
    """The layer and its exact Jacobian norm over the beta batch (B,)."""

    att: Tensor  # ATT(y_i) (B, n, d), Eq. 4
    n_eff: Tensor  # mean_i 1 / sum_j A_ij^2 (B,)
    frob: Tensor  # ||J||_F^2 (B,)
    trace: Tensor  # tr J (B,)


def jacobian_frobenius(x: Tensor, beta: Tensor, budget_bytes: int, dim: int | None = None) -> ExactLayer:
    """``||J||_F^2`` and ``tr J`` exactly, ``J = d ATT(N(X)) / dX`` (Eq. 16, alpha = 0).

    Returns them with ``ATT`` and ``n_eff`` (as ``attention_layer``), which share the
    attention matrix. ``dim`` is the ambient dimension d when ``x`` holds coordinates in a
    subspace containing the tokens (``span_coordinates``); default ``x.shape[1]``.

    Block ``(i, k)`` of Eq. 16 is ``J_ik = M_ik P_k / r_k`` with ``r_k = ||x_k||``,
    ``P_k = I - y_k y_k^T`` (Lemma B.1), ``o_i = ATT(y_i)`` and the attention covariance
    ``C_i = sum_l A_il y_l y_l^T - o_i o_i^T``::

        M_ik = A_ik [I + beta (y_k - o_i) y_i^T] + [i = k] beta C_i.

    Its squared norm needs only Gram entries ``G_ik = <y_i, y_k>`` and ``H_ik = <o_i, y_k>``::

        ||A_ik [...] P_k||^2 = A_ik^2 [(d - 1) + 2 beta (G_ik H_ik - H_ii)
                                       + beta^2 ||y_k - o_i||^2 (1 - G_ik^2)],

    and the diagonal blocks add ``2 beta A_ii tr(C_i P_i) + beta^2 ||C_i P_i||_F^2``, where
    ``||C_i||_F^2`` holds ``sum_lm A_il A_im <y_l, y_m>^2``: an (n x n) x (n x n) product, or
    (n x d^2) through ``y_l (x) y_l``, whichever is smaller. Cost per beta: O(n^2 (d + min(n, d^2))),
    against O(m n^2 d) for m Hutchinson probes, with no sampling error. Differences of nearly
    equal tokens are formed from tokens centred on their mean (as in ``centered_sq_norms``).
    """
    n, d = x.shape
    d_ambient = d if dim is None else dim
    n_beta, size = beta.numel(), x.element_size()
    r2 = x.square().sum(-1)
    y = x / r2.sqrt()[:, None]
    mu = y.mean(0)
    c, c_sq = centered_sq_norms(y)  # c_l = y_l - mu
    c_mu = c @ mu  # <c_l, mu>
    y_mu = y @ mu
    gram_sq = (c @ c.T).square() if squared_gram_fits(n, d, size, budget_bytes) else None
    frob = torch.zeros(n_beta, dtype=x.dtype, device=x.device)
    trace = torch.zeros_like(frob)
    outs, inv_participation = [], []
    beta_ = beta[:, None, None]
    per_row = size * n_beta * (8 * n + (0 if gram_sq is not None else d * d))
    for rows in row_blocks(n, per_row, budget_bytes):
        idx = torch.arange(rows.start, rows.stop, device=x.device)
        diag = (idx - rows.start, idx)
        gram_c = c[rows] @ c.T  # <c_i, c_k>
        half_dist = ((c_sq[rows, None] + c_sq - 2 * gram_c) / 2).clamp_min(0)  # 1 - G_ik
        half_dist[diag] = 0
        sin_sq = half_dist * (2 - half_dist)  # 1 - G_ik^2 = ||P_k y_i||^2
        attn = attention_weights(y[rows], y, beta)  # (B, b, n)
        o = attn @ y
        outs.append(o)
        inv_participation.append(1.0 / attn.square().sum(-1))
        o_c = o - mu
        h_c = o_c @ c.T  # <o_i - mu, c_k>
        dist_out = (c_sq + o_c.square().sum(-1, keepdim=True) - 2 * h_c).clamp_min(0)  # ||y_k - o_i||^2
        h = h_c + (o_c @ mu)[..., None] + y_mu  # H_ik = <o_i, y_k>
        h_ii = h[:, diag[0], diag[1]]
        bracket = ((d_ambient - 1) + 2 * beta_ * ((1 - half_dist) * h - h_ii[..., None])
                   + beta_.square() * dist_out * sin_sq)
        bracket[:, diag[0], diag[1]] = d_ambient - 1
        frob += (attn.square() * bracket / r2).sum((-1, -2))

        # diagonal blocks: C_i with the constant shift mu, C_i = sum_l A_il c_l c_l^T - o_c o_c^T
        a_ii = attn[:, diag[0], diag[1]]
        proj_o = o - h_ii[..., None] * y[rows]  # P_i o_i
        trace_cp = (attn * sin_sq).sum(-1) - proj_o.square().sum(-1)  # tr(C_i P_i)
        if gram_sq is not None:  # ||C_i P_i||^2 = ||C_i||^2 - ||C_i y_i||^2 from Gram sums
            cross = ((attn @ gram_sq) * attn).sum(-1)  # sum_lm A_il A_im <c_l, c_m>^2
            cov_sq = cross - 2 * (attn * h_c.square()).sum(-1) + o_c.square().sum(-1).square()
            c_y = (attn * (gram_c + c_mu)) @ c - o_c * (o_c * y[rows]).sum(-1, keepdim=True)  # C_i y_i
            cov_proj_sq = (cov_sq - c_y.square().sum(-1)).clamp_min(0)
        else:  # the d x d matrices C_i themselves: no cancellation between O(1) sums
            cov = torch.zeros(n_beta, rows.stop - rows.start, d * d, dtype=x.dtype, device=x.device)
            for cols in row_blocks(n, size * d * d, budget_bytes // 4):
                cov += attn[..., cols] @ (c[cols, :, None] * c[cols, None, :]).reshape(-1, d * d)
            cov = cov.reshape(*cov.shape[:-1], d, d) - o_c[..., :, None] * o_c[..., None, :]
            c_y = cov @ y[rows, :, None]  # (B, b, d, 1)
            cov_proj_sq = (cov - c_y * y[rows, None, :]).square().sum((-1, -2))
        beta_1 = beta[:, None]
        frob += ((2 * beta_1 * a_ii * trace_cp + beta_1.square() * cov_proj_sq) / r2[rows]).sum(-1)
        trace += ((a_ii * (d_ambient - 1) + beta_1 * trace_cp) / r2[rows].sqrt()).sum(-1)
    return ExactLayer(torch.cat(outs, dim=1), torch.cat(inv_participation, dim=1).mean(-1), frob, trace)


@dataclass
class LayerObservables:
    """Observables of one input X over the (gamma, alpha) batch.

    Shapes: ``lam`` (B, A), ``n_eff`` (B,), ``cos_out`` (B, A, q), ``eta`` (B, A),
    ``eta_probe`` (B, A, m) or None (exact eta), ``cos_in`` (q,), ``eta_plateau`` scalar.
    """

    lam: Tensor
    n_eff: Tensor
    cos_in: Tensor
    cos_out: Tensor
    eta: Tensor
    eta_probe: Tensor | None
    eta_plateau: Tensor


def observe(
    x: Tensor,
    beta: Tensor,
    alpha: Tensor,
    probes: Tensor | None,
    lambda_pairs: tuple[Tensor, Tensor] | None,
    quantile_tokens: Tensor,
    budget_bytes: int,
    dim: int | None = None,
    eta: bool = True,
    queries: Tensor | None = None,
) -> LayerObservables:
    """All observables of paper 000 for one token matrix ``x`` (n, d).

    ``dim``: the ambient dimension when ``x`` holds span coordinates (exact eta only).

    ``probes`` None means eta exactly (``jacobian_frobenius``); otherwise its Hutchinson
    estimate over these probes, one value per probe. ``eta`` False: no eta at all (NaN), the
    layer alone.
    ``lambda_pairs`` None means the exact mean over all pairs; otherwise the sampled pairs.
    Cosine quantiles are taken over all pairs among ``quantile_tokens``.
    ``queries`` (eta False only): the layer at these tokens alone, every token a key; lambda,
    n_eff and the quantiles are then taken among them (``lambda_pairs`` and ``quantile_tokens``
    index into ``queries``).
    ``eta_plateau = (1 - 1/d) mean_i 1/||x_i||^2`` is the supercritical limit of eta for these
    tokens (sum of the diagonal blocks of Eq. 24; docs/papers/000.md §1).
    """
    n, d = x.shape[0], x.shape[1] if dim is None else dim
    if probes is not None and d != x.shape[1]:
        raise ValueError("Hutchinson probes live in R^d: pass x in its ambient coordinates")
    if queries is not None and eta:
        raise ValueError("queries: the layer at sampled tokens gives lambda, not eta (eta=False)")
    levels = torch.tensor(QUANTILES, dtype=x.dtype, device=x.device)
    if not eta:
        att, n_eff = attention_layer(x, beta, budget_bytes, queries)
        sq = dot = torch.full((beta.numel(), 1, 1), torch.nan, dtype=x.dtype, device=x.device)
    elif probes is None:
        att, n_eff, sq, dot = jacobian_frobenius(x, beta, budget_bytes, d)  # (B, n, d'), (B,) x 3
        sq, dot = sq[:, None, None], dot[:, None, None]
    else:
        att, n_eff = attention_layer(x, beta, budget_bytes)
        sq, dot = jacobian_probe_norms(x, beta, probes, budget_bytes)  # (B, m)
        sq, dot = sq[:, None, :], dot[:, None, :]
    eta_plateau = (1 - 1 / d) * (1 / x.square().sum(-1)).mean()
    if queries is not None:
        x = x[queries]
    y = normalize(x)
    x_out = att[:, None] + alpha[None, :, None, None] * x  # (B, A, n or m, d), Eq. 5
    y_out = normalize(x_out)
    if lambda_pairs is None:
        lam = angle_ratio_all_pairs(y, y_out, budget_bytes)
    else:
        lam = angle_ratio_pairs(y, y_out, *lambda_pairs, budget_bytes)
    cos_in = cosine_quantiles(y, quantile_tokens, levels)
    cos_out = cosine_quantiles(y_out, quantile_tokens, levels)

    # ||J + alpha I||^2 = ||J||^2 + 2 alpha tr J + alpha^2 n d; per probe v the same with
    # ||(J + alpha I) v||^2 = ||J v||^2 + 2 alpha <J v, v> + alpha^2 ||v||^2, ||v||^2 = n d.
    a = alpha[None, :, None]
    eta_terms = (sq + 2 * a * dot + a.square() * (n * d)) / (n * d)  # (B, A, m or 1)
    eta_probe = None if probes is None else eta_terms
    return LayerObservables(lam, n_eff, cos_in, cos_out, eta_terms.mean(-1), eta_probe, eta_plateau)
