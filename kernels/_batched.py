"""Batched matrix products whose item b does not depend on the other items of the batch (on the CPU).

On the CPU, ``torch.bmm`` of a ``[B, m, k]`` by a ``[B, k, p]`` tensor picks its BLAS path and
its threading by the whole problem (B included): a small product may be summed in another order
for B = 1 than for B = 4, so the numbers of one seed would change in the last bits with the seeds
that share its batch; and a product or solve on a view into a batch may differ from one on a fresh
tensor (the BLAS kernels' bits depend on the operands' memory alignment). ``matmul`` computes each
item with its own 2-D product on 64-byte aligned operands (copied where a view is not) instead (and ``solve_unit_lower`` each item's
triangular solve), so item b gets the bits it would get alone. On other devices it is the plain
``a @ b`` (one batched launch).
"""

from __future__ import annotations

import torch

_ALIGN = 64  # bytes: the CPU allocator's alignment of a fresh tensor


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for a ``[B, m, k]``, b ``[B, k, p]`` (or b ``[k, p]``, shared): returns ``[B, m, p]``.

    On the CPU, one 2-D product per batch item (see the module docstring); differentiable.
    """
    if a.device.type != "cpu" or a.ndim != 3:
        return a @ b
    # operands aligned as a fresh tensor is (the BLAS kernels' bits depend on the memory alignment of
    # a view, which depends on where the item sits in its batch) and a fresh output per item (mm with
    # out= a slice takes another path)
    if b.ndim == 2:
        return torch.stack([_aligned(a[i]) @ b for i in range(a.shape[0])])
    return torch.stack([_aligned(a[i]) @ _aligned(b[i]) for i in range(a.shape[0])])


def _aligned(x: torch.Tensor) -> torch.Tensor:
    """``x`` itself if its data starts on a 64-byte boundary (as every fresh CPU tensor does), else a copy."""
    return x if x.data_ptr() % _ALIGN == 0 else x.clone()


def solve_unit_lower(A: torch.Tensor, rhs: torch.Tensor) -> torch.Tensor:
    """w with A w = rhs for unit lower-triangular A ``[B, C, C]``, rhs ``[B, C, p]``: returns ``[B, C, p]``.

    On the CPU, one 2-D solve per batch item on 64-byte aligned operands: the batched solve, and a
    solve on a view into a larger buffer (another memory alignment), differ from a lone one in the last bits.
    """
    if A.device.type != "cpu":
        w: torch.Tensor = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)  # torch types it Any
        return w
    solve = torch.linalg.solve_triangular
    return torch.stack(
        [solve(_aligned(A[i]), _aligned(rhs[i]), upper=False, unitriangular=True) for i in range(A.shape[0])]
    )
