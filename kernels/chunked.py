"""Fast plain-torch forms of every recurrence: the ``torch`` backend (CPU, or any device on request).

Mathematically identical to ``reference.recurrence`` (the one-token-at-a-time oracle, which the
tests hold this module to), but with no Python loop over tokens for the additive modes and one
loop step per chunk of ``chunk`` tokens for the delta family. It is differentiable, so learned
keys (``lacapacity.learned``) can optimise through any variant at useful sizes.

Additive modes, closed over the whole sequence (gamma_t = prod_{i <= t} a_i, per channel for gla):

    S_T = Diag(gamma_T) S_0 + sum_j Diag(gamma_T / gamma_j) k_j^T v_j

Delta family, per chunk (WY / UT form). Each step writes S_t = Diag(a_t) S_{t-1} + k_t^T w_t with
w_t = b_t (v_t - k_t Diag(a_t) S_{t-1}); unrolled over a chunk that starts from S_0:

    w_t + b_t sum_{j < t} [sum_c k_tc k_jc gamma_tc / gamma_jc] w_j = b_t (v_t - (k_t * gamma_t) S_0)

a unit lower-triangular system in the chunk's w (one ``solve_triangular``), after which
S_C = Diag(gamma_C) S_0 + sum_j Diag(gamma_C / gamma_j) k_j^T w_j. Decay ratios are formed as
exp of differences of cumulative log-gates, so they never exceed 1 and never overflow.
"""

from __future__ import annotations

import torch

from lacapacity.kernels._batched import matmul, solve_unit_lower
from lacapacity.kernels.reference import CHANNEL_GATE, SCALAR_GATE, USES_BETA, prepare

CHUNK = 64


def _log_cumsum(gate: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Cumulative log of the gates along tokens (dim 1); float64 over whole sequences so they do not drift."""
    return torch.cumsum(torch.log(gate.to(dtype)), dim=1)


def _additive(S: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mode: str, gate: torch.Tensor | None) -> torch.Tensor:
    """linear, decay, gla over the whole sequence at once. S [B, d, dv], k [B, T, d], v [B, T, dv]."""
    if mode == "linear":
        return S + matmul(k.transpose(1, 2), v)
    lg = _log_cumsum(gate)  # type: ignore[arg-type]  # decay and gla get their gate  # [B, T] or [B, T, d]
    last = lg[:, -1:]  # [B, 1] or [B, 1, d]
    ratio = torch.exp(last - lg).to(k.dtype)  # gamma_T / gamma_j <= 1
    total = torch.exp(last[:, 0]).to(k.dtype)  # gamma_T: [B] or [B, d]
    if mode == "decay":
        return total[:, None, None] * S + matmul((k * ratio[..., None]).transpose(1, 2), v)
    return total[:, :, None] * S + matmul((k * ratio).transpose(1, 2), v)


def _delta_chunk(
    S: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, bc: torch.Tensor, gc: torch.Tensor | None, mode: str
) -> torch.Tensor:
    """One chunk of the delta family. kc [B, C, d], vc [B, C, dv], bc [B, C], gc gates or None."""
    C = kc.shape[1]
    strict = torch.ones(C, C, dtype=torch.bool, device=kc.device).tril(-1)  # j < t
    if mode == "delta":
        coupling = matmul(kc, kc.transpose(1, 2))  # [B, C, C]: k_t . k_j
        k_now, k_end, total = kc, kc, None
    elif mode == "gated_delta":
        lg = _log_cumsum(gc, kc.dtype)  # type: ignore[arg-type]  # gated_delta gets its gate  # [B, C]
        diff = (lg[:, :, None] - lg[:, None, :]).masked_fill(~strict, float("-inf"))
        coupling = matmul(kc, kc.transpose(1, 2)) * torch.exp(diff).to(kc.dtype)
        gamma = torch.exp(lg).to(kc.dtype)  # [B, C]
        k_now = kc * gamma[..., None]  # k_t * gamma_t, against S_0
        k_end = kc * torch.exp(lg[:, -1:] - lg).to(kc.dtype)[..., None]  # k_j * gamma_C / gamma_j
        total = gamma[:, -1][:, None, None]
    else:  # kda: per-channel gates
        lg = _log_cumsum(gc, kc.dtype)  # type: ignore[arg-type]  # kda gets its gate  # [B, C, d]
        group = max(1, 2**24 // (C * C * kc.shape[2]))  # batch items per [group, C, C, d] block (~16M numbers)
        parts = []
        for g0 in range(0, kc.shape[0], group):
            lgg, kg = lg[g0 : g0 + group], kc[g0 : g0 + group]
            diff = (lgg[:, :, None, :] - lgg[:, None, :, :]).masked_fill(~strict[:, :, None], float("-inf"))
            # [g, C, C, d] summed over d: sum_c k_tc k_jc gamma_tc / gamma_jc
            parts.append((torch.exp(diff) * kg[:, :, None, :] * kg[:, None, :, :]).sum(-1))
        coupling = parts[0] if len(parts) == 1 else torch.cat(parts)  # [B, C, C]
        k_now = kc * torch.exp(lg).to(kc.dtype)
        k_end = kc * torch.exp(lg[:, -1:] - lg).to(kc.dtype)
        total = torch.exp(lg[:, -1]).to(kc.dtype)[:, :, None]  # [B, d, 1]
    A = torch.eye(C, dtype=kc.dtype, device=kc.device) + (bc[:, :, None] * coupling).masked_fill(~strict, 0.0)
    rhs = bc[..., None] * (vc - matmul(k_now, S))  # [B, C, dv]
    w = solve_unit_lower(A, rhs)  # [B, C, dv]
    base = S if total is None else total * S
    return base + matmul(k_end.transpose(1, 2), w)


def recurrence(
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mode: str,
    beta: torch.Tensor | None = None,
    gate: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    normalize: bool = True,
    chunk: int = CHUNK,
) -> torch.Tensor:
    """Same contract as ``reference.recurrence``; returns a new float32 state ``[B, d, dv]``.

    Shapes: k ``[B, T, d]``, v ``[B, T, dv]``, beta ``[B, T]``, gate ``[B, T]`` (decay,
    gated_delta) or ``[B, T, d]`` (gla, kda), initial_state ``[B, d, dv]``.
    """
    k, v, S = prepare(k, v, initial_state, normalize)  # S a copy: the caller copies the result into initial_state
    B, T, d = k.shape
    if mode not in USES_BETA:
        return _additive(S, k, v, mode, gate)
    if mode == "kda":  # per-channel decay ratios make a [B, C, C, d] tensor: smaller chunks, C^2 d <= ~16M numbers
        chunk = max(1, min(chunk // 2, int((2**24 / max(1, d)) ** 0.5)))  # never from B: the same chunks for any batch
    b = beta.float()  # type: ignore[union-attr]  # the delta family gets its beta (kernels.update checks)
    for t0 in range(0, T, chunk):
        sl = slice(t0, t0 + chunk)
        gc = gate[:, sl] if (mode in SCALAR_GATE or mode in CHANNEL_GATE) else None  # type: ignore[index]  # gated: given
        S = _delta_chunk(S, k[:, sl], v[:, sl], b[:, sl], gc, mode)
    return S
