"""Plain-torch recurrences of every memory variant: the oracle the Triton kernels are tested against.

Written for clarity, not speed: one token at a time for the recurrent modes, float32 state.

Row-vector convention (docs/theory.md): keys k in R^d, values v in R^dv, state S in R^{d x dv},
write S += k^T v, read o = q S. ``b`` is beta in (0, 2), ``a`` a scalar gate in (0, 1],
``alpha`` a per-channel gate in (0, 1]^d, all per token:

    linear        S = S + k^T v
    decay         S = a S + k^T v
    gla           S = Diag(alpha) S + k^T v
    delta         S = (I - b k^T k) S + b k^T v          = S + b k^T (v - k S)
    gated_delta   S = a (I - b k^T k) S + b k^T v
    kda           S = (I - b k^T k) Diag(alpha) S + b k^T v
"""

from __future__ import annotations

import torch

from lacapacity.kernels._batched import matmul

MODES = ("linear", "decay", "gla", "delta", "gated_delta", "kda")
SCALAR_GATE = ("decay", "gated_delta")  # a: [B, T]
CHANNEL_GATE = ("gla", "kda")  # alpha: [B, T, d]
USES_BETA = ("delta", "gated_delta", "kda")  # b: [B, T]


def prepare(
    k: torch.Tensor, v: torch.Tensor, initial_state: torch.Tensor | None, normalize: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Float32 keys (L2-normalised if asked) and values, and a fresh float32 state [B, d, dv] (a copy of initial_state, or zeros)."""
    B, _, d = k.shape
    dv = v.shape[-1]
    k = k.float()
    v = v.float()
    if normalize:
        k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    S = (
        torch.zeros(B, d, dv, dtype=torch.float32, device=k.device)
        if initial_state is None
        else initial_state.float().clone()
    )
    return k, v, S


def recurrence(
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mode: str,
    beta: torch.Tensor | None = None,
    gate: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    normalize: bool = True,
) -> torch.Tensor:
    """Run ``mode`` over the tokens and return the final state.

    Shapes: k ``[B, T, d]``, v ``[B, T, dv]`` (any float dtype; computed in float32),
    beta ``[B, T]``, gate ``[B, T]`` (decay, gated_delta) or ``[B, T, d]`` (gla, kda),
    initial_state ``[B, d, dv]`` (zeros when None). Returns a new float32 ``[B, d, dv]``.
    ``normalize`` L2-normalises each key first.
    """
    k, v, S = prepare(k, v, initial_state, normalize)
    T = k.shape[1]
    if mode == "linear":
        return S + k.transpose(1, 2) @ v  # sum_t k_t^T v_t, all tokens at once
    for t in range(T):
        kt = k[:, t, :, None]  # [B, d, 1]  (column: k_t^T)
        vt = v[:, t, None, :]  # [B, 1, dv]
        if mode in SCALAR_GATE:
            # the gated modes get their gate, the delta family its beta (kernels.update checks; every caller passes them)
            S = gate[:, t, None, None].float() * S  # type: ignore[index]
        elif mode in CHANNEL_GATE:
            S = gate[:, t, :, None].float() * S  # type: ignore[index]  # Diag(alpha_t) S scales row i of S by alpha_t[i]
        if mode in USES_BETA:  # on the (gated) state S: (I - b k^T k) S + b k^T v = S + b k^T (v - k S)
            b = beta[:, t, None, None].float()  # type: ignore[index]
            S = S + b * (kt @ (vt - kt.transpose(1, 2) @ S))
        else:
            S = S + kt @ vt
    return S


def read(state: torch.Tensor, q: torch.Tensor, *, normalize: bool = True) -> torch.Tensor:
    """o = q S. Shapes: state ``[B, d, dv]``, q ``[B, m, d]``; returns float32 ``[B, m, dv]``."""
    q = q.float()
    if normalize:
        q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return matmul(q, state)  # batch-invariant on the CPU (see _batched)
