"""Primitives of the dynamics engines: on a CPU, numpy's or torch's implementation, whichever
:mod:`~attnsweep.dynamics.cpu_paths` found faster on this host (the same for every process on
it); torch's elsewhere (GPU, autograd, other dtypes)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from attnsweep.dynamics import cpu_paths

NUMPY = (torch.float32, torch.float64)


def _numpy(primitive: str, *tensors: Tensor) -> bool:
    first = tensors[0]
    return (first.device.type == "cpu" and first.dtype in NUMPY and
            all(t.dtype == first.dtype and not t.requires_grad for t in tensors)
            and cpu_paths.path(primitive, first.dtype) == "numpy")


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched product a @ b, (B, n, k) @ (B, k, m) (or b broadcast over the batch). Numpy's
    matmul makes one BLAS call per system: for the small products of these engines (n, k, m ~ 32)
    OpenBLAS ran 4x faster than torch.bmm in float64 and 2x in float32 on this project's machines
    (benchmarks/RESULTS.md). A transposed right factor is copied contiguous first: a Gram product x x^T through a view
    takes numpy's symmetric path (syrk, then a copy of the triangle), which with the copy left
    out costs 1.8x the copy and a plain product together at n = d = 32."""
    if _numpy("bmm", a, b):
        return torch.from_numpy(np.matmul(a.numpy(), np.ascontiguousarray(b.numpy())))
    return a @ b


def count_at_least(a: Tensor, level: float) -> Tensor:
    """Entries of each matrix of ``a`` (B, n, m) at or above ``level``, int64 (B,); numpy's is a
    comparison and a byte sum (3x torch's on this project's machines)."""
    if _numpy("count", a):
        above = np.greater_equal(a.numpy(), level).view(np.uint8)
        return torch.from_numpy(above.sum((-1, -2), dtype=np.int64))
    return (a >= level).sum((-1, -2))


def exp_(a: Tensor) -> Tensor:
    """e^a in place (a contiguous). Numpy's SIMD exponential is 2.6x torch's on an AVX-512 CPU
    in float64, torch's 2.3x numpy's on an AVX2 one (benchmarks/RESULTS.md)."""
    if _numpy("exp", a) and a.is_contiguous():
        np.exp(a.numpy(), out=a.numpy())
        return a
    return a.exp_()
