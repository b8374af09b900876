"""Token-by-token plain-torch oracles of the memories lsq, longhorn, delta_product and dplr.

Written for clarity, not speed, one token at a time, independently of the fast forms in each
memory's module; the tests hold the fast forms to these. They compute in the dtype of ``k``
(float64 in the tests) and take prepared inputs: keys already normalised where the memory
normalises them, and every per-token parameter as a tensor. Row convention: k ``[B, T, d]``,
v ``[B, T, dv]``, state S ``[B, d, dv]``; ``k_t^T v_t`` is the outer product ``[d, dv]``.

    lsq            recursive least squares (Sherman-Morrison): P = (lam I + sum k^T k)^-1,
                   S_t = S + P_t k_t^T (v_t - k_t S); S_T = (K^T K + lam I)^-1 K^T V
    longhorn       S = (1 - eps k (.) k) (.) S + eps k^T v, eps = beta / (1 + beta ||k||^2)
    delta_product  for j = 0 .. steps-1: S = S + beta_j k_j^T (v - k_j S), k_j = key of step j
    dplr           S = (Diag(w) + a^T b) S + kw^T v (RWKV-7: a = -k, b = eta k, kw = eta k)
"""

from __future__ import annotations

import torch

__all__ = ["delta_product", "dplr", "longhorn", "lsq"]


def _outer(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a^T b for rows a [B, d], b [B, dv] -> [B, d, dv]."""
    return a[:, :, None] * b[:, None, :]


def lsq(k: torch.Tensor, v: torch.Tensor, lam: float) -> torch.Tensor:
    """S = (K^T K + lam I)^-1 K^T V by recursive least squares from P_0 = I / lam, S_0 = 0. Returns [B, d, dv]."""
    B, T, d = k.shape
    P = torch.eye(d, dtype=k.dtype, device=k.device).expand(B, d, d) / lam  # [B, d, d]
    S = torch.zeros(B, d, v.shape[2], dtype=k.dtype, device=k.device)
    for t in range(T):
        kt = k[:, t]  # [B, d]
        Pk = (P @ kt[:, :, None])[:, :, 0]  # P k^T: [B, d]
        gain = Pk / (1.0 + (kt * Pk).sum(-1, keepdim=True))  # P_t k^T = P k^T / (1 + k P k^T)
        P = P - gain[:, :, None] * Pk[:, None, :]
        err = v[:, t] - (kt[:, None, :] @ S)[:, 0]  # v - k S: [B, dv]
        S = S + _outer(gain, err)
    return S


def longhorn(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """Longhorn with beta [B, T] > 0. Returns S [B, d, dv] from zeros."""
    B, T, d = k.shape
    S = torch.zeros(B, d, v.shape[2], dtype=k.dtype, device=k.device)
    for t in range(T):
        kt, b = k[:, t], beta[:, t, None]  # [B, d], [B, 1]
        eps = b / (1.0 + b * (kt * kt).sum(-1, keepdim=True))  # [B, 1]
        S = (1.0 - eps * kt * kt)[:, :, None] * S + _outer(eps * kt, v[:, t])
    return S


def delta_product(
    k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, rotations: torch.Tensor, normalize: bool
) -> torch.Tensor:
    """DeltaProduct: per token, steps delta updates with keys k R_j (unit rows if ``normalize``).

    beta ``[B, T, steps]``, rotations ``[steps, d, d]`` (R_0 = I). Returns S [B, d, dv] from zeros.
    """
    B, T, d = k.shape
    S = torch.zeros(B, d, v.shape[2], dtype=k.dtype, device=k.device)
    for t in range(T):
        for j in range(rotations.shape[0]):
            kj = k[:, t] @ rotations[j]  # [B, d]
            if normalize:
                kj = kj / kj.norm(dim=-1, keepdim=True).clamp_min(1e-12)
            err = v[:, t] - (kj[:, None, :] @ S)[:, 0]
            S = S + beta[:, t, j, None, None] * _outer(kj, err)
    return S


def dplr(kw: torch.Tensor, v: torch.Tensor, w: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """S = (Diag(w_t) + a_t^T b_t) S + kw_t^T v_t. kw, a, b, w ``[B, T, d]``, v ``[B, T, dv]``. From zeros."""
    B, T, d = kw.shape
    S = torch.zeros(B, d, v.shape[2], dtype=kw.dtype, device=kw.device)
    for t in range(T):
        transition = torch.diag_embed(w[:, t]) + _outer(a[:, t], b[:, t])  # [B, d, d]
        S = transition @ S + _outer(kw[:, t], v[:, t])
    return S
