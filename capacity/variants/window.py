"""Sliding-window attention and its hybrids with a fixed state (Based-style): exact recall of the last w pairs.

Row convention: keys k ``[B, t, d]``, values v ``[B, t, dv]``, a read o ``[B, m, dv]`` for queries q ``[B, m, d]``.

    swa      the cache keeps the last ``window`` = w pairs; o = softmax(scale q K_w^T) V_w over them
    hybrid   the window above plus a fixed-size memory (``state``, any registered memory with a fixed state,
             given by its label: "linear", "gated_delta(alpha=0.9)", "linear(feature=taylor2)", ...)

The hybrid's state memory holds, with ``holds``:

- ``"evicted"`` (the default): only the pairs that left the window (token i is written to it when token i + w
  arrives), so window and state together hold every pair once;
- ``"all"``: every pair as it arrives (the window's pairs are held twice, as in Based's stacked layers).

and its read combines the two, with ``combine``:

- ``"sum"``: o = softmax(scale q K_w^T) V_w + r, with r the state memory's read of q;
- ``"normalise"``: one normaliser over both, the state standing in for softmax's exponentials of the pairs it holds
  (LoLA- and Based-style; meant for a state whose read approximates sum_i exp(q.k_i) (.), such as
  ``linear(feature=taylor2)``):

      o = (sum_{i in w} exp(scale q.k_i) v_i + r) / (sum_{i in w} exp(scale q.k_i) + z)

  where the state memory is written with each value followed by a 1, and [r, z] is its read (z: the same memory's
  read of the ones column, e.g. phi(q) . sum phi(k_i) for linear attention). A read with nothing in either part is 0.

The window's state grows with n and then stays: min(n, w) (d + dv) numbers after n writes (``numel(state)`` measures
it; ``state_numel(d, dv, n)`` gives it), plus the state memory's fixed numbers for the hybrid (dv + 1 columns with
``"normalise"``). Inside the window recall is exact as the scale grows (T13 over w pairs); older pairs are the
state's. The cache is a ``WindowCache``; the window parts run in float32 plain torch, differentiable.

>>> import torch
>>> from lacapacity import variants, keys
>>> mem = variants.get("swa", window=4, scale=50.0)
>>> K = keys.make("gaussian", n=10, d=16, seed=0); V = torch.randn(1, 10, 8)
>>> cache = mem.write(mem.init_state(1, 16, 8), K, V)
>>> mem.numel(cache), mem.state_numel(16, 8, n=10), mem.state_numel(16, 8, n=3)
(96, 96, 72)
>>> bool((mem.read(cache, K[:, -4:]) - V[:, -4:]).abs().max() < 1e-3)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants.declares import Declares, declared

HOLDS = ("evicted", "all")
COMBINES = ("sum", "normalise")


@dataclass
class WindowCache:
    """The last pairs written, at most w: ``keys`` float32 ``[B, t, d]``, ``values`` float32 ``[B, t, dv]``."""

    keys: torch.Tensor
    values: torch.Tensor


@dataclass
class HybridState:
    """The window's ``cache`` and the fixed memory's ``state`` (that memory's own state)."""

    cache: WindowCache
    state: Any  # the state memory's own (a tensor, a dataclass of tensors, ...)


class SlidingWindow:
    """softmax(scale q K^T) V over the last ``window`` pairs; cache ``[B, min(n, w), d + dv]`` numbers.

    ``scale`` > 0 is the inverse temperature (``None``: sqrt(d), as ``softmax``); ``normalize=True`` L2-normalises
    keys on write and queries on read. With a window at least n it reads exactly as ``softmax``.
    """

    name = "swa"
    # a softmax read of a cache that grows up to the window: T8 does not bind it, nor T2 or T12
    declares = Declares(linear_read=False, additive=False, delta_rule=False, state="growing", differentiable=True)

    def __init__(self, *, window: int = 64, scale: float | None = None, normalize: bool = False) -> None:
        self.window = _validate.positive_int(f"{self.name}: window", window)
        if scale is not None:
            scale = _validate.in_range(f"{self.name}: scale", scale, 0.0, math.inf, low_open=True, high_open=True)
        if not isinstance(normalize, bool):
            raise CapacityError(f"{self.name}: normalize must be True or False, got {normalize!r}")
        self.scale, self.normalize = scale, normalize

    @property
    def params(self) -> dict[str, object]:
        """The parameters; ``variants.get(self.name, **self.params)`` rebuilds the memory."""
        return {"window": self.window, "scale": self.scale, "normalize": self.normalize}

    def __repr__(self) -> str:
        return f"variants.get({self.name!r}" + "".join(f", {k}={v!r}" for k, v in self.params.items()) + ")"

    # ------------------------------------------------------------------ the window

    def _empty(self, batch: int, d: int, dv: int, device: Device) -> WindowCache:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        return WindowCache(torch.zeros(batch, 0, d, device=dev), torch.zeros(batch, 0, dv, device=dev))

    def _unit(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12) if self.normalize else x

    def _cache(self, state: object) -> WindowCache:
        return _validate.state(self.name, state, WindowCache)

    def _append(
        self, cache: WindowCache, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[WindowCache, torch.Tensor, torch.Tensor]:
        """The cache with the pairs appended and cut to the window, and the pairs that left it (oldest first):
        keys ``[B, e, d]``, values ``[B, e, dv]`` (raw, as given), e >= 0."""
        B, _, d = cache.keys.shape
        held = f"cache keys [B, t, d] = {list(cache.keys.shape)}, values [B, t, dv] = {list(cache.values.shape)}"
        k, v = _validate.pairs(self.name, k, v, batch=B, d=d, dv=cache.values.shape[2], held=held, cache=cache.keys)
        keys = torch.cat([cache.keys, k.float()], dim=1)  # raw keys: normalised at read time
        vals = torch.cat([cache.values, v.float()], dim=1)
        cut = max(0, keys.shape[1] - self.window)
        return WindowCache(keys[:, cut:], vals[:, cut:]), keys[:, :cut], vals[:, :cut]

    def _scores(self, cache: WindowCache, q: torch.Tensor) -> torch.Tensor:
        """scale q K^T over the window: float32 ``[B, m, t]`` (q checked against the cache)."""
        K = cache.keys
        held = f"cache [B, t, d] = {list(K.shape)}"
        q = _validate.queries(self.name, q, batch=K.shape[0], d=K.shape[2], held=held, cache=K)
        scale = math.sqrt(K.shape[2]) if self.scale is None else self.scale
        return scale * torch.einsum("bmd,btd->bmt", self._unit(q), self._unit(K))

    # ------------------------------------------------------------------ the protocol

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> WindowCache:
        return self._empty(batch, d, dv, device)

    def write(self, state: WindowCache, k: torch.Tensor, v: torch.Tensor) -> WindowCache:
        """Append the pairs and keep the last ``window``. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``."""
        cache, _, _ = self._append(self._cache(state), k, v)
        return cache

    def read(self, state: WindowCache, q: torch.Tensor) -> torch.Tensor:
        """softmax over the window. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]`` (zeros before any write)."""
        cache = self._cache(state)
        s = self._scores(cache, q)
        if cache.keys.shape[1] == 0:
            return torch.zeros(q.shape[0], q.shape[1], cache.values.shape[2], device=cache.values.device)
        return torch.softmax(s, dim=-1) @ cache.values

    def numel(self, state: WindowCache) -> int:
        """Numbers the cache holds per batch item: min(n, w) (d + dv)."""
        cache = self._cache(state)
        return int(cache.keys[0].numel() + cache.values[0].numel())

    def state_numel(self, d: int, dv: int, n: int | None = None) -> int:
        """min(n, w) (d + dv): the cache after n writes. It grows with n up to the window, so n is needed."""
        if n is None:
            raise CapacityError(
                f"{self.name} keeps the last min(n, {self.window}) pairs, min(n, w) (d + dv) numbers: pass n, "
                "or use numel(state)"
            )
        return min(_validate.positive_int("n", n, minimum=0), self.window) * (int(d) + int(dv))


class Hybrid(SlidingWindow):
    """A sliding window plus a fixed-size memory ``state`` (a label) holding the evicted pairs or all of them
    (``holds``), read as a sum or under one normaliser (``combine``)."""

    name = "hybrid"

    def __init__(
        self,
        *,
        window: int = 64,
        state: str = "linear",
        holds: str = "evicted",
        combine: str = "sum",
        scale: float | None = None,
        normalize: bool = False,
    ) -> None:
        super().__init__(window=window, scale=scale, normalize=normalize)
        if holds not in HOLDS:
            raise CapacityError(f"{self.name}: holds must be one of {', '.join(HOLDS)}, got {holds!r}")
        if combine not in COMBINES:
            raise CapacityError(f"{self.name}: combine must be one of {', '.join(COMBINES)}, got {combine!r}")
        if not isinstance(state, str):
            raise CapacityError(
                f"{self.name}: state is a memory's label (e.g. 'gated_delta(alpha=0.9)'), got {state!r}"
            )
        from lacapacity.variants import label, resolve  # the registry imports this module

        inner = resolve(state)
        if declared(inner).state == "growing":
            raise CapacityError(f"{self.name}: the state memory must keep a fixed state; {label(inner)!r} grows")
        self.inner, self.state, self.holds, self.combine = inner, label(inner), holds, combine

    @property
    def params(self) -> dict[str, object]:
        return {**super().params, "state": self.state, "holds": self.holds, "combine": self.combine}

    @property
    def declares(self) -> Declares:  # type: ignore[override]  # the window's class attribute, refined here
        """The window's (a growing cache read by softmax: no T2, T8, T12), with the state memory's d x dv matrices,
        its differentiability and its bookkeeping fields (never rounded)."""
        inner = declared(self.inner)
        return Declares(
            linear_read=False,
            additive=False,
            delta_rule=False,
            state="growing",
            differentiable=inner.differentiable,
            bookkeeping=inner.bookkeeping,
            states=inner.states,
        )

    def _dv(self, dv: int) -> int:
        return int(dv) + (self.combine == "normalise")  # the ones column of the normaliser

    def _hybrid(self, state: object) -> HybridState:
        return _validate.state(self.name, state, HybridState)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> HybridState:  # type: ignore[override]
        cache = self._empty(batch, d, dv, device)
        return HybridState(cache, self.inner.init_state(batch, d, self._dv(dv), device=device))

    def _to_state(self, state: Any, k: torch.Tensor, v: torch.Tensor) -> Any:
        if k.shape[1] == 0:
            return state
        if self.combine == "normalise":
            v = torch.cat([v, torch.ones_like(v[..., :1])], dim=-1)
        return self.inner.write(state, k, v)

    def write(self, state: HybridState, k: torch.Tensor, v: torch.Tensor) -> HybridState:  # type: ignore[override]
        """Append to the window and write the state memory. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``."""
        st = self._hybrid(state)
        cache, k_out, v_out = self._append(st.cache, k, v)
        if self.holds == "all":
            inner = self._to_state(st.state, k.float(), v.float())
        else:
            inner = self._to_state(st.state, k_out, v_out)
        return HybridState(cache, inner)

    def read(self, state: HybridState, q: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """The window's read combined with the state's. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        st = self._hybrid(state)
        s = self._scores(st.cache, q)  # [B, m, t]
        r = self.inner.read(st.state, q.float())  # [B, m, dv] (dv + 1 with normalise)
        if self.combine == "sum":
            if st.cache.keys.shape[1] == 0:
                return r
            return torch.softmax(s, dim=-1) @ st.cache.values + r
        # one normaliser: scale both parts by exp(-m), m the largest window score (0 for an empty window)
        m = s.amax(dim=-1, keepdim=True).clamp_min(0.0) if s.shape[-1] else torch.zeros_like(r[..., :1])
        e = torch.exp(s - m)  # [B, m, t]
        num = e @ st.cache.values + torch.exp(-m) * r[..., :-1]
        den = e.sum(-1, keepdim=True) + torch.exp(-m) * r[..., -1:]
        return torch.where(den != 0, num / torch.where(den != 0, den, 1.0), 0.0)

    def numel(self, state: HybridState) -> int:  # type: ignore[override]
        """min(n, w) (d + dv) for the window plus the state memory's numbers."""
        st = self._hybrid(state)
        B, _, d = st.cache.keys.shape
        return super().numel(st.cache) + int(self.inner.state_numel(d, self._dv(st.cache.values.shape[2])))

    def state_numel(self, d: int, dv: int, n: int | None = None) -> int:
        """min(n, w) (d + dv) + the state memory's numbers (with dv + 1 columns for ``combine="normalise"``)."""
        if n is None:
            raise CapacityError(
                f"{self.name} keeps the last min(n, {self.window}) pairs and a fixed state: pass n, or use numel(state)"
            )
        return super().state_numel(d, dv, n) + int(self.inner.state_numel(int(d), self._dv(dv)))
