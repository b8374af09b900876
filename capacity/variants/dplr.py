"""Diagonal-plus-low-rank (DPLR) memory, RWKV-7's choice of the low-rank part.

The general DPLR transition (row convention, state S ``[B, d, dv]``, a and b rows in R^d):

    S_t = (Diag(w_t) + a_t^T b_t) S_{t-1} + kw_t^T v_t

the orientation of fla's ``dplr_recurrence`` (its alpha is our b, its beta our a, its gk log w).
RWKV-7 removes what the state holds along the normalised key and writes the key scaled by its
in-context learning rate eta (its replacement key with k_a = 1): with k the (unit) key

    a_t = -k_t,   b_t = eta_t k_t,   kw_t = eta_t k_t
    S_t = Diag(w_t) S_{t-1} + eta_t k_t^T (v_t - k_t S_{t-1})

With w = 1 this is the delta rule with beta = eta (``delta``); with w = 1 it is also fla's
``iplr_recurrence`` (identity plus low rank). Unlike ``kda`` the removal reads the state before
the decay. Parameters: ``w`` in (0, 1]^d, a per-channel decay (a number, a sequence of d numbers,
or ``("uniform", low, high)`` drawn per token and channel, like gla's alpha; default 0.95);
``eta`` in (0, 1] (a number or ``("uniform", low, high)`` per token; default 1.0); ``seed``;
``normalize=True`` L2-normalises keys and queries (needed for stability: ||k||^2 eta < 2).
The low-rank choice is fixed to RWKV-7's; a and b cannot be passed.

The write runs per chunk of tokens in a WY form (no loop over tokens, differentiable): with
L_t the cumulative log-decay inside the chunk and L'_t = L_t - log w_t, the written rows
u_t = eta_t (v_t - k_t S_{t-1}) solve the unit lower-triangular system

    u_t + eta_t sum_{j < t} [sum_c k_tc k_jc exp(L'_tc - L_jc)] u_j = eta_t (v_t - (k_t (.) exp(L'_t)) S_0)

and S_C = Diag(exp L_C) S_0 + sum_j Diag(exp(L_C - L_j)) k_j^T u_j. ``_oracles.dplr`` is the
token-by-token form the tests hold it to.

>>> import torch
>>> from capacity import variants, keys
>>> mem = variants.get("dplr", w=1.0, eta=0.7)
>>> K = keys.make("gaussian", n=30, d=8, seed=0); V = torch.randn(1, 30, 4)
>>> delta = variants.get("delta", beta=0.7)
>>> S1 = mem.write(mem.init_state(1, 8, 4), K, V); S2 = delta.write(delta.init_state(1, 8, 4), K, V)
>>> bool(torch.allclose(S1, S2, atol=1e-5))
True
"""

from __future__ import annotations

import torch

from capacity.variants._memory import GATE, Memory

__all__ = ["DPLR", "recurrence"]

CHUNK = 32


def _chunk(S, k, v, eta, logw):
    """One chunk: S [B, d, dv], k [B, C, d], v [B, C, dv], eta [B, C], logw [B, C, d] (float32). Returns S_C."""
    C = k.shape[1]
    strict = torch.ones(C, C, dtype=torch.bool, device=k.device).tril(-1)  # j < t
    L = torch.cumsum(logw, dim=1)  # [B, C, d], inclusive
    Lx = L - logw  # exclusive: decay applied before token t's removal
    diff = (Lx[:, :, None, :] - L[:, None, :, :]).masked_fill(~strict[:, :, None], float("-inf"))  # [B, C, C, d], <= 0
    coupling = (torch.exp(diff) * k[:, :, None, :] * k[:, None, :, :]).sum(-1)  # [B, C, C]
    A = torch.eye(C, dtype=k.dtype, device=k.device) + (eta[:, :, None] * coupling).masked_fill(~strict, 0.0)
    rhs = eta[..., None] * (v - (k * torch.exp(Lx)) @ S)  # [B, C, dv]
    u = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)
    k_end = k * torch.exp(L[:, -1:] - L)  # [B, C, d]
    return torch.exp(L[:, -1])[:, :, None] * S + k_end.transpose(1, 2) @ u


def recurrence(
    S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, eta: torch.Tensor, w: torch.Tensor, chunk: int = CHUNK
) -> torch.Tensor:
    """S_t = Diag(w_t) S + eta_t k_t^T (v_t - k_t S) over the tokens; returns the new float32 ``[B, d, dv]``.

    Shapes: S ``[B, d, dv]``, k ``[B, T, d]`` (as used: normalise before), v ``[B, T, dv]``,
    eta ``[B, T]``, w ``[B, T, d]`` in (0, 1].
    """
    B, T, d = k.shape
    chunk = max(1, min(chunk, int((2**24 / max(1, B * d)) ** 0.5)))  # the [B, C, C, d] block stays <= ~16M numbers
    logw = torch.log(w)
    for t0 in range(0, T, chunk):
        sl = slice(t0, t0 + chunk)
        S = _chunk(S, k[:, sl], v[:, sl], eta[:, sl], logw[:, sl])
    return S


class DPLR(Memory):
    """DPLR with RWKV-7's low-rank part: w in (0, 1]^d, eta in (0, 1]; float32 state ``[B, d, dv]``."""

    name = "dplr"

    def __init__(self, *, w=0.95, eta=1.0, normalize: bool = True, seed: int = 0):
        self._setup(normalize=normalize, seed=seed, w=(w, GATE, True), eta=(eta, GATE, False))

    @property
    def delta_rule(self) -> bool:
        """True for w = 1 and eta = 1: then it is the delta rule with beta = 1 (T12 holds)."""
        return self._constant("w", 1.0) and self._constant("eta", 1.0)

    def write(self, state, k: torch.Tensor, v: torch.Tensor):
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns the new state."""
        S, start = self._matrix(state)
        k, v = self._inputs(S, k, v)
        B, T, d = k.shape
        eta = self._values("eta", B, start, T, d, S.device)  # [B, T]
        w = self._values("w", B, start, T, d, S.device)  # [B, T, d]
        return self._wrap(recurrence(S, k, v, eta, w), start + T)
