"""Diagonal-plus-low-rank (DPLR) memory; by default RWKV-7's choice of the low-rank part.

The DPLR transition (row convention, state S ``[B, d, dv]``, a_t and b_t rows in R^d):

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
``a`` and ``b`` may instead be callables of the keys, ``fn(k [B, t, d]) -> [B, t, d]`` (k as
used, after normalisation); the written key stays eta k. Such a memory records the callables'
names in ``params`` and cannot be rebuilt from them by name.

The write runs per chunk of tokens in a WY form (no loop over tokens, differentiable). With
L_t the cumulative log-decay inside the chunk, L'_t = L_t - log w_t (the decay before token t)
and u_t = b_t S_{t-1} (what the low-rank part reads), the u_t of a chunk that starts from S_0
solve the unit lower-triangular system

    u_t - sum_{j < t} [sum_c b_tc a_jc e^(L'_tc - L_jc)] u_j
        = (b_t (.) e^(L'_t)) S_0 + sum_{j < t} [sum_c b_tc kw_jc e^(L'_tc - L_jc)] v_j

and S_C = Diag(e^(L_C)) S_0 + sum_j Diag(e^(L_C - L_j)) (a_j^T u_j + kw_j^T v_j). Decay ratios
are exponentials of differences of cumulative logs, never above 1. ``tests/memory_oracles.py``'s ``dplr`` is the
token-by-token form the tests hold it to.

>>> import torch
>>> from lacapacity import variants, keys
>>> mem = variants.get("dplr", w=1.0, eta=0.7)
>>> K = keys.make("gaussian", n=30, d=8, seed=0); V = torch.randn(1, 30, 4)
>>> delta = variants.get("delta", beta=0.7)
>>> S1 = mem.write(mem.init_state(1, 8, 4), K, V); S2 = delta.write(delta.init_state(1, 8, 4), K, V)
>>> bool(torch.allclose(S1, S2, atol=1e-5))
True
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from lacapacity.errors import CapacityError
from lacapacity.variants._memory import GATE, Memory
from lacapacity.variants.recurrent import State

KeyMap = Callable[[torch.Tensor], torch.Tensor]  # a (or b) of the keys: fn(k [B, t, d]) -> [B, t, d]


CHUNK = 32


def _chunk(
    S: torch.Tensor, kw: torch.Tensor, v: torch.Tensor, a: torch.Tensor, b: torch.Tensor, logw: torch.Tensor
) -> torch.Tensor:
    """One chunk: S [B, d, dv], kw, a, b [B, C, d], v [B, C, dv], logw [B, C, d] (float32). Returns S_C."""
    C = kw.shape[1]
    strict = torch.ones(C, C, dtype=torch.bool, device=kw.device).tril(-1)  # j < t
    L = torch.cumsum(logw, dim=1)  # [B, C, d], inclusive
    Lx = L - logw  # exclusive: the decay before token t
    ratio = torch.exp((Lx[:, :, None, :] - L[:, None, :, :]).masked_fill(~strict[:, :, None], float("-inf")))
    rb = ratio * b[:, :, None, :]  # [B, C, C, d]: b_tc e^(L'_tc - L_jc), zero for j >= t
    m_ab = torch.einsum("btjc,bjc->btj", rb, a)  # [B, C, C]
    m_bk = torch.einsum("btjc,bjc->btj", rb, kw)
    A = torch.eye(C, dtype=kw.dtype, device=kw.device) - m_ab
    rhs = (b * torch.exp(Lx)) @ S + m_bk @ v  # [B, C, dv]
    u: torch.Tensor = torch.linalg.solve_triangular(A, rhs, upper=False, unitriangular=True)  # u_t = b_t S_{t-1}
    end = torch.exp(L[:, -1:] - L)  # [B, C, d]
    return torch.exp(L[:, -1])[:, :, None] * S + (a * end).transpose(1, 2) @ u + (kw * end).transpose(1, 2) @ v


def recurrence(
    S: torch.Tensor,
    kw: torch.Tensor,
    v: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    w: torch.Tensor,
    chunk: int = CHUNK,
) -> torch.Tensor:
    """S_t = (Diag(w_t) + a_t^T b_t) S + kw_t^T v_t over the tokens; returns the new float32 ``[B, d, dv]``.

    Shapes: S ``[B, d, dv]``, kw, a, b ``[B, T, d]``, v ``[B, T, dv]``, w ``[B, T, d]`` in (0, 1].
    """
    B, T, d = kw.shape
    chunk = max(1, min(chunk, int((2**24 / max(1, B * d)) ** 0.5)))  # the [B, C, C, d] block stays <= ~16M numbers
    logw = torch.log(w)
    for t0 in range(0, T, chunk):
        sl = slice(t0, t0 + chunk)
        S = _chunk(S, kw[:, sl], v[:, sl], a[:, sl], b[:, sl], logw[:, sl])
    return S


def _label(fn: object) -> str:
    return f"{getattr(fn, '__module__', None) or '?'}.{getattr(fn, '__qualname__', None) or type(fn).__name__}"


class DPLR(Memory):
    """DPLR, by default with RWKV-7's low-rank part: w in (0, 1]^d, eta in (0, 1]; float32 state ``[B, d, dv]``."""

    name = "dplr"

    def __init__(
        self,
        *,
        w: object = 0.95,
        eta: object = 1.0,
        a: KeyMap | None = None,
        b: KeyMap | None = None,
        normalize: bool = True,
        seed: int = 0,
    ) -> None:
        self._setup(normalize=normalize, seed=seed, w=(w, GATE, True), eta=(eta, GATE, False))
        for pname, fn in (("a", a), ("b", b)):
            if fn is not None and not callable(fn):
                raise CapacityError(
                    f"dplr: {pname} must be None (RWKV-7's choice: a = -k, b = eta k) or a callable "
                    f"of the keys fn(k [B, t, d]) -> [B, t, d], got {fn!r}"
                )
        self.a, self.b = a, b

    def _extra_params(self) -> dict[str, object]:
        return {p: _label(fn) for p, fn in (("a", self.a), ("b", self.b)) if fn is not None}

    def _delta_rule(self) -> bool:
        """True for RWKV-7's a, b with w = 1 and eta = 1: the delta rule with beta = 1 (T12 holds)."""
        return self.a is None and self.b is None and self._constant("w", 1.0) and self._constant("eta", 1.0)

    def _low_rank(self, pname: str, fn: KeyMap | None, k: torch.Tensor, default: torch.Tensor) -> torch.Tensor:
        if fn is None:
            return default
        out = fn(k)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(k.shape):
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise CapacityError(
                f"dplr: {pname}(k) must return a tensor of the keys' shape [B, t, d] = {tuple(k.shape)}, got {got}"
            )
        return out.float()

    def write(self, state: State, k: torch.Tensor, v: torch.Tensor) -> State:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns the new state."""
        S, start = self._matrix(state)
        k, v = self._inputs(S, k, v)
        B, T, d = k.shape
        eta = self._values("eta", B, start, T, d, S.device)  # [B, T]
        w = self._values("w", B, start, T, d, S.device)  # [B, T, d]
        kw = eta[..., None] * k  # the written key
        a = self._low_rank("a", self.a, k, -k)
        b = self._low_rank("b", self.b, k, kw)
        return self._wrap(recurrence(S, kw, v, a, b, w), start + T)
