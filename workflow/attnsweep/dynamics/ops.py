"""Primitives of the dynamics engines routed to the fastest implementation at hand: on a CPU,
numpy's (OpenBLAS products, SIMD exponential) where torch's are slower at the engines' sizes
(measured in benchmarks/RESULTS.md); torch elsewhere (GPU, autograd, other dtypes)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

NUMPY = (torch.float32, torch.float64)


def _numpy(*tensors: Tensor) -> bool:
    first = tensors[0]
    return (first.device.type == "cpu" and first.dtype in NUMPY and
            all(t.dtype == first.dtype and not t.requires_grad for t in tensors))


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched product a @ b, (B, n, k) @ (B, k, m) (or b broadcast over the batch). On a CPU
    through numpy's matmul, one BLAS call per system: for the small products of these engines
    (n, k, m ~ 32) OpenBLAS runs 4x faster than torch.bmm in float64 and 2x in float32 on this
    project's machines (benchmarks/RESULTS.md); elsewhere, and for other dtypes, torch. A
    transposed right factor is copied contiguous first: a Gram product x x^T through a view
    takes numpy's symmetric path (syrk, then a copy of the triangle), which with the copy left
    out costs 1.8x the copy and a plain product together at n = d = 32."""
    if _numpy(a, b):
        return torch.from_numpy(np.matmul(a.numpy(), np.ascontiguousarray(b.numpy())))
    return a @ b


def count_at_least(a: Tensor, level: float) -> Tensor:
    """Entries of each matrix of ``a`` (B, n, m) at or above ``level``, int64 (B,): numpy's
    comparison and a byte sum on a CPU (3x torch's there), torch elsewhere."""
    if _numpy(a):
        above = np.greater_equal(a.numpy(), level).view(np.uint8)
        return torch.from_numpy(above.sum((-1, -2), dtype=np.int64))
    return (a >= level).sum((-1, -2))


def exp_(a: Tensor) -> Tensor:
    """e^a in place (a contiguous): numpy's SIMD exponential on a CPU, 2x torch's there."""
    if _numpy(a) and a.is_contiguous():
        np.exp(a.numpy(), out=a.numpy())
        return a
    return a.exp_()
