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
    project's machines (benchmarks/RESULTS.md); elsewhere, and for other dtypes, torch."""
    if _numpy(a, b):
        return torch.from_numpy(np.matmul(a.numpy(), b.numpy()))
    return a @ b


def exp_(a: Tensor) -> Tensor:
    """e^a in place (a contiguous): numpy's SIMD exponential on a CPU, 2x torch's there."""
    if _numpy(a) and a.is_contiguous():
        np.exp(a.numpy(), out=a.numpy())
        return a
    return a.exp_()
