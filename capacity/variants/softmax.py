"""Softmax attention as a memory: keep every pair, read o = softmax(scale q K^T) V (T13).

The exact-retrieval baseline of the bill: its cache grows by d + dv numbers per written pair
(n (d + dv) after n writes, against d dv for a linear state), and for distinct unit keys its
reads tend to the stored values as the scale (the inverse temperature) grows.

>>> import torch
>>> from lacapacity import variants, keys
>>> mem = variants.get("softmax", scale=50.0)
>>> K = keys.make("gaussian", n=32, d=16, seed=0); V = torch.randn(1, 32, 8)
>>> cache = mem.write(mem.init_state(1, 16, 8), K, V)
>>> mem.numel(cache), mem.state_numel(16, 8, n=32)
(768, 768)
>>> bool((mem.read(cache, K) - V).abs().max() < 1e-3)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from lacapacity.base import _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.kernels._batched import matmul
from lacapacity.variants.declares import Declares


@dataclass
class Cache:
    """Every written pair: ``keys`` float32 ``[B, t, d]``, ``values`` float32 ``[B, t, dv]``."""

    keys: torch.Tensor
    values: torch.Tensor


class Softmax:
    """softmax(scale q K^T) V over every written pair.

    ``scale`` > 0 is the inverse temperature; ``None`` (the default) means sqrt(d), the scale of
    dot-product attention q.k / sqrt(d) for unit keys stretched to norm sqrt(d).
    ``normalize=True`` L2-normalises keys on write and queries on read.
    """

    name = "softmax"
    # a cache that grows, read through a softmax: T8 does not bind it, nor T2 or T12
    declares = Declares(
        linear_read=False, form="softmax", additive=False, delta_rule=False, state="growing", differentiable=True
    )

    def __init__(self, *, scale: float | None = None, normalize: bool = False) -> None:
        if scale is not None:
            scale = _validate.in_range("softmax: scale", scale, 0.0, math.inf, low_open=True, high_open=True)
        if not isinstance(normalize, bool):
            raise CapacityError(f"softmax: normalize must be True or False, got {normalize!r}")
        self.scale, self.normalize = scale, normalize

    @property
    def params(self) -> dict[str, object]:
        return {"scale": self.scale, "normalize": self.normalize}

    def __repr__(self) -> str:
        return f"variants.get('softmax', scale={self.scale!r}, normalize={self.normalize})"

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> Cache:
        batch, d, dv, dev = _validate.sizes(batch, d, dv, device)
        return Cache(torch.zeros(batch, 0, d, device=dev), torch.zeros(batch, 0, dv, device=dev))

    def _unit(self, x: torch.Tensor) -> torch.Tensor:
        x = x.float()
        return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12) if self.normalize else x

    def write(self, state: Cache, k: torch.Tensor, v: torch.Tensor) -> Cache:
        """Append the pairs. Shapes: k ``[B, t, d]``, v ``[B, t, dv]``."""
        state = _validate.state("softmax", state, Cache)
        B, _, d = state.keys.shape
        held = f"cache keys [B, t, d] = {list(state.keys.shape)}, values [B, t, dv] = {list(state.values.shape)}"
        k, v = _validate.pairs("softmax", k, v, batch=B, d=d, dv=state.values.shape[2], held=held, cache=state.keys)
        return Cache(torch.cat([state.keys, self._unit(k)], dim=1), torch.cat([state.values, v.float()], dim=1))

    def read(self, state: Cache, q: torch.Tensor) -> torch.Tensor:
        """softmax(scale q K^T) V. Shapes: q ``[B, m, d]`` -> float32 ``[B, m, dv]`` (zeros before any write)."""
        state = _validate.state("softmax", state, Cache)
        K, V = state.keys, state.values  # [B, t, d], [B, t, dv]
        B, t, d = K.shape
        q = _validate.queries("softmax", q, batch=B, d=d, held=f"cache [B, t, d] = {list(K.shape)}", cache=K)
        m = q.shape[1]
        if t == 0:
            return torch.zeros(B, m, V.shape[2], device=K.device)
        scale = math.sqrt(d) if self.scale is None else self.scale
        q = self._unit(q)
        out = torch.empty(B, m, V.shape[2], device=K.device)
        # one item at a time, blocks of queries sized by t alone (~4M scores), products on aligned operands
        # (kernels._batched): a batch item reads the same bits whatever else shares its batch
        block = max(1, (1 << 22) // t)
        for b in range(B):
            for s in range(0, m, block):
                scores = scale * matmul(q[b : b + 1, s : s + block], K[b : b + 1].transpose(1, 2))  # [1, blk, t]
                out[b, s : s + block] = matmul(torch.softmax(scores, dim=-1), V[b : b + 1])[0]
        return out

    def numel(self, state: Cache) -> int:
        """Numbers the cache holds per batch item: t (d + dv) after t writes."""
        return int(state.keys[0].numel() + state.values[0].numel())

    def state_numel(self, d: int, dv: int, n: int | None = None) -> int:
        """n (d + dv): the cache after n writes (T13). It grows with n, so n is needed."""
        if n is None:
            raise CapacityError(
                f"softmax keeps every pair, n (d + dv) = n * {int(d) + int(dv)} numbers: pass n, or use numel(state)"
            )
        return _validate.positive_int("n", n, minimum=0) * (int(d) + int(dv))
