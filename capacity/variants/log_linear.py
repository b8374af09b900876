"""Log-linear attention (Guo et al., arXiv 2506.04761): Fenwick-tree levels over a linear or gated delta memory.

The pairs written so far, tokens 0 .. n-1, are split as a Fenwick tree splits the prefix [0, n): one bucket of 2^j
consecutive tokens for every set bit j of n, older tokens in larger buckets. Each bucket keeps its own d x dv state
S_j (row convention: keys ``[B, t, d]``, values ``[B, t, dv]``, a write adds k^T v), and a read weighs the levels:

    o = sum_j lam_(j+1) q S_j          (fla's level l = j + 1 holds a bucket of 2^j tokens; level 0 is the query's
                                        own token, which a memory read does not have)

Writing token n (0-based) applies the base memory's transition A_n to every level and then merges: with c the
number of trailing one bits of n, the levels 0 .. c-1 (2^c - 1 tokens) and the new token become level c:

    S_j <- A_n S_j for every j;   S_c <- sum_{j < c} S_j + w_n;   S_j <- 0 for j < c

base ``"linear"``: A_n = alpha_n I, w_n = k^T v (with alpha = 1, linear attention); base ``"gated_delta"``:
A_n = alpha_n (I - beta_n k^T k), w_n = beta_n k^T v. The transitions are linear and shared, so the sum of the levels
is the base memory's state: with every lam = 1 the memory reads exactly as ``linear`` / ``decay`` / ``gated_delta``.

``lam``: a number r in (0, 1] gives lam_l = r^(l-1) (the newest, finest level read with weight 1, each coarser level r
times less), or a sequence of per-level weights lam_1, lam_2, ... (levels past its end take its last entry). The
weights are fixed per level, so the read q (sum_j lam_(j+1) S_j) is linear in q through one d x dv matrix: the rank
bound T8 binds it (``linear_read = True``) although the state grows.

The state grows with log2 n: ``levels`` float32 ``[B, L, d, dv]`` with L = n.bit_length() (= floor(log2 n) + 1; the
levels of the bits of n that are zero are kept as zeros, as a kernel's fixed level layout would), and ``tokens``, an
int64 ``[B]`` token counter it declares bookkeeping (``Declares(bookkeeping=("tokens",))``), so that a state stored in bfloat16
still counts past 256. ``state_numel(d, dv, n)`` = L d dv; ``numel(state)`` measures it.

Its expected error with random unit keys, pair by pair and level by level, is T34 (``lacapacity.theory.log_linear_error``
and ``log_linear_level_error``, from T7 and T11; docs/theory.md). At n = 2^m all n pairs lie in one bucket, so the read is lam_(m+1) times the base memory's: its argmax recall equals
the base memory's exactly at powers of two, and differs between them (docs/memories.md).

>>> import torch
>>> from lacapacity import variants, keys
>>> mem = variants.get("log_linear", lam=0.5)
>>> K = keys.make("gaussian", n=11, d=8, seed=0); V = torch.randn(1, 11, 4)
>>> S = mem.write(mem.init_state(1, 8, 4), K, V)
>>> tuple(S.levels.shape), int(S.tokens[0]), mem.state_numel(8, 4, n=11), mem.numel(S)
((1, 4, 8, 4), 11, 128, 128)
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.theory.log_linear import level_weights
from lacapacity.variants._memory import GATE, RATE, Memory, unit
from lacapacity.variants._params import Interval
from lacapacity.variants.declares import Declares

BASES = ("linear", "gated_delta")


@dataclass
class LogLinearState:
    """``levels`` float32 ``[B, L, d, dv]`` (level j: a bucket of 2^j tokens), ``tokens`` int64 ``[B]`` (bookkeeping)."""

    levels: torch.Tensor
    tokens: torch.Tensor  # bookkeeping (LogLinear declares it): never rounded, not counted


class LogLinear(Memory):
    """Log-linear attention over ``base`` linear (gate alpha) or gated_delta (alpha, beta), per-level weights ``lam``."""

    name = "log_linear"
    backends: tuple[str, ...] = ("auto", "torch")

    def __init__(
        self,
        *,
        base: str = "linear",
        alpha: object = 1.0,
        beta: object = 1.0,
        lam: float | Sequence[float] = 0.5,
        normalize: bool = True,
        seed: int = 0,
    ) -> None:
        if base not in BASES:
            raise CapacityError(f"log_linear: base must be one of {', '.join(BASES)}, got {base!r}")
        self.base = base
        params: dict[str, tuple[object, Interval, bool]] = {"alpha": (alpha, GATE, False)}
        if base == "gated_delta":
            params["beta"] = (beta, RATE, False)
        elif beta != 1.0:
            raise CapacityError("log_linear: beta is the gated delta rule's step; it needs base='gated_delta'")
        self._setup(normalize=normalize, seed=seed, **params)  # type: ignore[arg-type]  # alpha, beta: not backend
        self.lam = self._check_lam(lam)

    @staticmethod
    def _check_lam(lam: object) -> float | list[float]:
        what = "log_linear: lam must be a number in (0, 1] or a non-empty sequence of positive per-level weights"
        if isinstance(lam, numbers.Real) and not isinstance(lam, bool):
            if not 0.0 < float(lam) <= 1.0:
                raise CapacityError(f"{what}, got {lam!r}")
            return float(lam)
        if isinstance(lam, (Sequence, torch.Tensor)) and not isinstance(lam, str) and len(lam) > 0:
            try:
                out = [float(x) for x in lam]
            except (TypeError, ValueError):
                raise CapacityError(f"{what}, got {lam!r}") from None
            if all(x > 0 and x < float("inf") for x in out):
                return out
        raise CapacityError(f"{what}, got {lam!r}")

    def _extra_params(self) -> dict[str, object]:
        return {"base": self.base, "lam": self.lam}

    @property
    def declares(self) -> Declares:
        """A growing state (levels of d x dv) read linearly: q (sum_l lam_l S_l) is one d x dv matrix per read with
        fixed weights, so T8 binds it. Additive (T2) only for lam = 1 over an ungated linear base, where it is linear
        attention; a delta rule (T12) as ``_delta_rule`` says."""
        additive = self.base == "linear" and self.lam == 1.0 and self._constant("alpha", 1.0)
        return Declares(
            linear_read=True,
            form="log_linear",
            additive=additive,
            delta_rule=self._delta_rule(),
            state="growing",
            differentiable=True,
            bookkeeping=("tokens",),
        )

    def _delta_rule(self) -> bool:
        """True over the gated delta rule with beta = 1 and every level weight 1: the last key then reads back exactly
        (T12). The last key reads back lam_l v, l its merge level, which depends on n: any weight below 1 breaks it."""
        weights = [self.lam] if isinstance(self.lam, float) else self.lam
        return self.base == "gated_delta" and self._constant("beta", 1.0) and all(w == 1.0 for w in weights)

    def state_numel(self, d: int, dv: int, n: int | None = None) -> int:
        """n.bit_length() d dv: the levels after n writes (the state grows with log2 n, so n is needed)."""
        if n is None:
            raise CapacityError(
                f"log_linear keeps floor(log2 n) + 1 levels of d dv = {int(d) * int(dv)} numbers after n writes: pass n, "
                "or use numel(state)"
            )
        n = _validate.positive_int("n", n, minimum=0)
        return n.bit_length() * int(d) * int(dv)

    def numel(self, state: LogLinearState) -> int:
        """Numbers the state holds per batch item (its counter, bookkeeping, not counted)."""
        return int(self._state(state).levels[0].numel())

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> LogLinearState:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        return LogLinearState(
            torch.zeros(batch, 0, d, dv, dtype=torch.float32, device=dev),
            torch.zeros(batch, dtype=torch.int64, device=dev),
        )

    def _state(self, state: object) -> LogLinearState:
        return _validate.state("log_linear", state, LogLinearState)

    def _count(self, st: LogLinearState) -> int:
        n = st.tokens.unique()  # type: ignore[no-untyped-call]  # torch's Tensor.unique has no annotations
        if n.numel() != 1:
            raise CapacityError(
                f"log_linear: every batch item must have written as many tokens, got {st.tokens.tolist()}"
            )
        return int(n.item())

    def write(self, state: LogLinearState, k: torch.Tensor, v: torch.Tensor) -> LogLinearState:
        """Write the tokens in order. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``; returns a new state."""
        st = self._state(state)
        B, _, d, dv = st.levels.shape
        k, v = self._inputs(st.levels.new_zeros(B, d, dv), k, v)
        T = k.shape[1]
        start = self._count(st)
        alpha = self._values("alpha", B, start, T, d, k.device)  # [B, T]
        beta = self._values("beta", B, start, T, d, k.device) if self.base == "gated_delta" else None
        need = (start + T).bit_length()
        S = torch.cat([st.levels, st.levels.new_zeros(B, need - st.levels.shape[1], d, dv)], dim=1)
        for t in range(T):
            n, kt = start + t, k[:, t]
            S = alpha[:, t, None, None, None] * S
            if beta is None:
                w = kt[:, :, None] * v[:, t, None, :]
            else:  # (I - b k^T k) S_j for every level j, then the written b k^T v
                b = beta[:, t, None, None]
                S = S - b[:, None] * kt[:, None, :, None] * (kt[:, None, :, None] * S).sum(2, keepdim=True)
                w = b * kt[:, :, None] * v[:, t, None, :]
            c = (~n & (n + 1)).bit_length() - 1  # trailing one bits of n: the level the merge lands on
            merged = S[:, :c].sum(1) + w
            S = torch.cat([torch.zeros_like(S[:, :c]), merged[:, None], S[:, c + 1 :]], dim=1)
        return LogLinearState(S, st.tokens + T)

    def read(self, state: LogLinearState, q: torch.Tensor) -> torch.Tensor:
        """sum_j lam_(j+1) q S_j. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._state(state)
        B, L, d, dv = st.levels.shape
        held = f"levels [B, L, d, dv] = {list(st.levels.shape)}"
        q = _validate.queries("log_linear", q, batch=B, d=d, held=held, state=st.levels).float()
        q = unit(q) if self.normalize else q
        lam = torch.tensor(level_weights(self.lam, L), dtype=torch.float32, device=q.device)
        return q @ (lam[None, :, None, None] * st.levels).sum(1)
