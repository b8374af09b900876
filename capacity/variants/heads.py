"""Head layouts: any memory split into H key heads and HV value heads (docs/precision.md#heads, T20).

``split(memory, heads=H, value_heads=HV)`` returns a memory that reads keys ``[B, n, d]`` and values ``[B, n, dv]``
as H key slices of d/H dimensions and HV value slices of dv/HV dimensions, one slice per head, and keeps
G = max(H, HV) states of the given memory, each ``(d/H) x (dv/HV)``:

- each head's key slice (and query slice) is L2-normalised on its own (``normalize=True``, as per-head L2
  normalisation does);
- state g (0 <= g < G) is written with key head ``g // (G / H)`` and value head ``g // (G / HV)``. With HV > H,
  HV / H consecutive value heads share one key head (grouped value heads, as in grouped-query layouts where the
  key/query heads are fewer than the value heads); with H > HV, H / HV consecutive key heads share one value head;
- the read of value head b is the mean of the reads of the states that write it (one state when HV >= H, H / HV
  otherwise: the best equal-weight combination of estimates of the same value).

One of H and HV must divide the other; H must divide d and HV must divide dv. With H = HV = 1 ``split`` returns the
memory itself (bit-identical results). The state holds G x (d/H) x (dv/HV) = d dv / min(H, HV) numbers (for a
d x dv memory); for random keys the additive memory's mean error is (n - 1) min(H, HV) / d (T20).

>>> from lacapacity import variants, keys, values, probe
>>> from lacapacity.variants import heads
>>> mem = heads.split(variants.get("linear"), heads=4)
>>> K = keys.make("gaussian", n=32, d=64, batch=2, seed=0); V = values.make("gaussian", 32, 64, batch=2, seed=0)
>>> ds = probe.recall(mem, K, V, checkpoints=[32])
>>> mem.state_numel(64, 64), ds.mse.dims
(1024, ('n', 'batch'))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants import declares

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.variants import Variant


def check_layout(d: int, dv: int, heads: int, value_heads: int | None = None) -> tuple[int, int]:
    """Check a layout and return ``(H, HV)``: H | d, HV | dv, and one of H, HV divides the other."""
    H = _validate.positive_int("heads", heads)
    HV = H if value_heads is None else _validate.positive_int("value_heads", value_heads)
    if d % H:
        raise CapacityError(f"heads = {H} must divide the key dimension d = {d}")
    if dv % HV:
        raise CapacityError(f"value_heads = {HV} must divide the value dimension dv = {dv}")
    if max(H, HV) % min(H, HV):
        raise CapacityError(f"one of heads = {H} and value_heads = {HV} must divide the other")
    return H, HV


class Heads:
    """``memory`` in H key heads and HV value heads (see the module). State: the memory's own, batch B x G."""

    def __init__(self, memory: Variant, heads: int, value_heads: int | None = None, *, normalize: bool = True) -> None:
        from lacapacity import variants

        if not variants.is_variant(memory):
            raise CapacityError(f"heads.split takes a variant object (see lacapacity.variants.resolve), got {memory!r}")
        self.memory = memory
        self.H = _validate.positive_int("heads", heads)
        self.HV = self.H if value_heads is None else _validate.positive_int("value_heads", value_heads)
        if max(self.H, self.HV) % min(self.H, self.HV):
            raise CapacityError(f"one of heads = {self.H} and value_heads = {self.HV} must divide the other")
        self.G = max(self.H, self.HV)
        self.normalize = _validate.flag("normalize", normalize)
        self.name = declares.name(memory)
        shown = declares.display(memory)
        if shown is not None:
            self.display = shown
        inner = declares.declared(memory)
        # the memory's linear read (T8) and kind of state, ``states`` per head; per-head normalisation and the mean
        # over shared heads break T2 and T12; the heads take any d their layout divides
        self.declares = declares.wrapped(inner, linear_read=inner.linear_read is True, dims=None)
        if inner.state == "growing":  # numel exactly where the declaration says the state grows
            self.numel: Callable[[Any], int] = lambda state: self.G * int(declares.numel(memory, state) or 0)

    @property
    def params(self) -> dict[str, object]:
        return {**(declares.params(self.memory) or {}), "heads": self.H, "value_heads": self.HV}

    def __repr__(self) -> str:
        return f"heads.split({self.memory!r}, heads={self.H}, value_heads={self.HV})"

    def _dims(self, d: int, dv: int) -> tuple[int, int]:
        check_layout(d, dv, self.H, self.HV)
        return d // self.H, dv // self.HV

    def state_numel(self, d: int, dv: int, *args: Any, **kwargs: Any) -> int:  # Any: what the memory's takes (n=)
        dk, dvh = self._dims(int(d), int(dv))
        return self.G * int(self.memory.state_numel(dk, dvh, *args, **kwargs))

    def state_bytes(self, d: int, dv: int, dtype: object = "float32", **kwargs: Any) -> int:  # Any: as state_numel's
        from lacapacity.variants import precision

        dk, dvh = self._dims(int(d), int(dv))
        return self.G * precision.state_bytes(self.memory, dk, dvh, dtype, **kwargs)

    def feature_dim(self, d: int) -> int:
        """State rows of one head for keys of dimension d (its key slice d/H, or its feature map's)."""
        return declares.feature_dim(self.memory, int(d) // self.H)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> Any:  # Any: the memory's state
        batch = _validate.positive_int("batch", batch)
        dk, dvh = self._dims(int(d), int(dv))
        return self.memory.init_state(batch * self.G, dk, dvh, device=device)

    def _slices(self, x: torch.Tensor, parts: int, normalize: bool) -> torch.Tensor:
        """x [B, t, D] -> [B * G, t, D / parts]: its ``parts`` slices, each state's own (normalised if asked)."""
        B, t, D = x.shape
        if D % parts:
            raise CapacityError(f"{self.name}: {parts} heads must divide the dimension {D}")
        s = x.reshape(B, t, parts, D // parts)
        if normalize:
            s = s.float()
            s = s / s.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        s = s.repeat_interleave(self.G // parts, dim=2)  # state g takes slice g // (G / parts)
        return s.permute(0, 2, 1, 3).reshape(B * self.G, t, D // parts)

    def write(self, state: Any, k: torch.Tensor, v: torch.Tensor) -> Any:  # Any: the memory's state
        """Write every head's slices. k ``[B, t, d]``, v ``[B, t, dv]``; returns the state."""
        _validate.tensor("k", k, ndim=3, finite=False)
        _validate.tensor("v", v, ndim=3, finite=False)
        if k.shape[:2] != v.shape[:2]:
            raise CapacityError(f"{self.name}: k {list(k.shape)} and v {list(v.shape)} must share B and t")
        return self.memory.write(state, self._slices(k, self.H, self.normalize), self._slices(v, self.HV, False))

    def read(self, state: Any, q: torch.Tensor) -> torch.Tensor:
        """Every value head's read, concatenated. q ``[B, m, d]`` -> float32 ``[B, m, dv]``."""
        _validate.tensor("q", q, ndim=3, finite=False)
        B, m, _ = q.shape
        r = self.memory.read(state, self._slices(q, self.H, self.normalize))  # [B G, m, dv/HV]
        dvh = r.shape[-1]
        r = r.reshape(B, self.HV, self.G // self.HV, m, dvh).float().mean(2)  # mean over the states of a value head
        return r.permute(0, 2, 1, 3).reshape(B, m, self.HV * dvh)


def split(memory: Variant, heads: int = 1, value_heads: int | None = None, *, normalize: bool = True) -> Variant:
    """``memory`` in ``heads`` key heads and ``value_heads`` value heads (default: as many as key heads); the memory
    itself for one of each."""
    H = _validate.positive_int("heads", heads)
    HV = H if value_heads is None else _validate.positive_int("value_heads", value_heads)
    if H == 1 and HV == 1:
        return memory
    return Heads(memory, H, HV, normalize=normalize)
