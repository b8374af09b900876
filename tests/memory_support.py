"""Shared by the memory tests: a user's memory, fla's error metric, seeded inputs and chunked writes."""

from __future__ import annotations

import torch

from lacapacity.inputs import keys, values


class UserLinear:
    """The additive memory as a user writes it, declaring nothing: S += k^T v, read q S; float32 ``[B, d, dv]``."""

    name = "user-linear"

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state, k, v):
        return state + k.float().transpose(1, 2) @ v.float()

    def read(self, state, q):
        return q.float() @ state

    def state_numel(self, d, dv):
        return d * dv


def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    """fla's metric: RMS of the difference over the RMS of the reference (both taken in float64)."""
    a, b = a.double(), b.double()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt())


def pairs(T: int, d: int, dv: int, *, B: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian unit keys ``[B, T, d]`` (seed) and gaussian values ``[B, T, dv]`` (seed + 1)."""
    return keys.make("gaussian", T, d, batch=B, seed=seed), values.make("gaussian", T, dv, batch=B, seed=seed + 1)


def write_in_chunks(mem, K, V, starts):
    """``mem``'s state after writing (K ``[B, T, d]``, V ``[B, T, dv]``) in chunks that begin at ``starts`` (the
    first 0) and run to T: chunked writes must equal one write."""
    st = mem.init_state(K.shape[0], K.shape[2], V.shape[2])
    edges = [*starts, K.shape[1]]
    for a, b in zip(edges[:-1], edges[1:]):
        st = mem.write(st, K[:, a:b], V[:, a:b])
    return st


def one_head(x: torch.Tensor) -> torch.Tensor:
    """[B, T, ...] -> fla's [B, T, H=1, ...]."""
    return x.unsqueeze(2)
