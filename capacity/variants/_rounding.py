"""The number formats a stored state is rounded to, and the rounding itself: what ``precision`` (float formats) and
``quantise`` (integers with scales) share. ``state_tensors`` finds the tensors a state holds; ``_Rounder`` rounds
them in place, to nearest or stochastically from seeded streams."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import torch

from lacapacity.base import _random
from lacapacity.errors import CapacityError

TORCH_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}
DTYPES = tuple(TORCH_DTYPES)
# capacity list's formats (read from this source, not imported): every state_dtype spelling, and the servers' choices
FORMATS = {
    "float32": "no rounding: the memory itself",
    "bfloat16": "8 significand bits (T14-T19)",
    "float16": "11 significand bits",
    "float8_e4m3fn": "4 significand bits, largest 448, no scale",
    "float8_e5m2": "3 significand bits, largest 57344, no scale",
    "int8[/scope][+fb]": "whole numbers -127..127 times amax / 127 per group (T31-T33): scope /tensor, /row, /col, "
    "/g<N>, /c<N>; +ef (float32 residual fed back), +int4 / +int8 (the residual in that format)",
    "int4[/scope][+fb]": "whole numbers -7..7 times amax / 7 per group, scopes and feedback as int8",
    "fp8[/scope][@T][+fb]": "float8_e4m3fn numbers times amax / T per group (T 448 by default), as int8 otherwise",
    "fp8/col": "vLLM #52962: a scale per (head, dim) row of the engine's [dv, d] state (with rounding=step+stochastic)",
    "fp8/c32@240": "SGLang #40706: a scale per (head, 32-row V-tile x K), amax / 240",
    "int8/row+int4": "int8 per row with its residual in int4 (the int8 + int4-residual scheme)",
}
_BLOCK = 64  # tokens per seeded stream of stochastic-rounding draws


def ulp(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of the floating format ``dtype`` at each entry of ``x`` (float32, any shape): 2^(e - p + 1) for
    |x| in [2^e, 2^(e + 1)), p the format's significand bits, and its subnormal spacing below the smallest normal."""
    info = torch.finfo(dtype)
    p = 1 - int(round(math.log2(float(info.eps))))
    emin = int(round(math.log2(float(info.smallest_normal))))
    _, e = torch.frexp(x)  # |x| = m 2^e, m in [1/2, 1): floor(log2 |x|) = e - 1
    e = torch.where(x == 0, torch.full_like(e, emin + 1), e)  # zero: the subnormal spacing
    return torch.ldexp(torch.ones_like(x), torch.clamp(e - 1, min=emin) - p + 1)


@dataclass
class StoredState:
    """A ``Stored`` memory's state: the memory's own state ``inner`` (rounded as stored) and the tokens written."""

    inner: Any  # the memory's own state (Any, as in the Variant protocol)
    tokens: int


def state_tensors(state: object, *, stored: bool = False, skip: Collection[str] = ()) -> list[torch.Tensor]:
    """Every tensor a state holds, found through tensors, dataclasses, tuples, lists and dicts (in order).

    ``stored=True``: only the stored numbers, the ones a state dtype rounds and its bytes count: floating tensors
    outside the dataclass fields named in ``skip`` (the memory's ``Declares.bookkeeping``), at any depth.
    """
    if isinstance(state, torch.Tensor):
        return [state] if not stored or state.is_floating_point() else []
    if isinstance(state, StoredState):
        return state_tensors(state.inner, stored=stored, skip=skip)
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return [
            t
            for f in dataclasses.fields(state)
            if not (stored and f.name in skip)
            for t in state_tensors(getattr(state, f.name), stored=stored, skip=skip)
        ]
    if isinstance(state, (tuple, list)):
        return [t for m in state for t in state_tensors(m, stored=stored, skip=skip)]
    if isinstance(state, dict):
        return [t for m in state.values() for t in state_tensors(m, stored=stored, skip=skip)]
    return []


class _Rounder:
    """Rounds float32 tensors in place to one format: round-to-nearest-even through a reusable buffer, or
    stochastically from per-item seeded streams (``draws(item, token)``)."""

    def __init__(self, dtype: str, stochastic: bool, seed: object, skip: Collection[str] = ()) -> None:
        # seed: a user's, checked by _seeds; skip: the state's bookkeeping fields (never rounded)
        self.dtype, self.stochastic, self.seed, self.skip = TORCH_DTYPES[dtype], stochastic, _seeds(seed), skip
        info = torch.finfo(self.dtype)
        self.max = float(info.max)
        self.p = 1 - int(round(math.log2(float(info.eps))))  # significand bits with the implicit one
        self.emin = int(round(math.log2(float(info.smallest_normal))))
        self._buffers: dict[tuple[tuple[int, ...], torch.device], torch.Tensor] = {}
        self._powers: dict[torch.device, torch.Tensor] = {}
        # (tensor index, item) -> (block, draws [_BLOCK, numel]); a Quantiser's residuals are "residual/<index>"
        self._streams: dict[tuple[int | str, int], tuple[int, torch.Tensor]] = {}

    def nearest(self, t: torch.Tensor) -> None:
        key = (tuple(t.shape), t.device)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = torch.empty(t.shape, dtype=self.dtype, device=t.device)
        t.clamp_(-self.max, self.max)  # saturate (NaN stays NaN)
        buf.copy_(t)
        t.copy_(buf)

    def _stream(self, which: int | str, item: int, batch: int, block: int) -> torch.Generator:
        seeds = self.seed
        if len(seeds) == 1:
            return _random.generator(seeds[0], f"precision/stochastic/{which}/{item}/{block}")
        if batch % len(seeds):
            raise CapacityError(f"{len(seeds)} stochastic-rounding seeds do not divide the batch of {batch} items")
        per = batch // len(seeds)
        return _random.generator(seeds[item // per], f"precision/stochastic/{which}/{item % per}/{block}")

    def _uniform(
        self, which: int | str, item: int, token: int, shape: torch.Size, device: torch.device, batch: int = 1
    ) -> torch.Tensor:
        """U[0, 1) draws for token ``token`` of batch item ``item`` (tensor ``which`` of the state): one seeded
        stream per (item, block of 64 tokens), drawn a block at a time, so that a token's draws depend on neither
        the batch nor how the writes are chunked."""
        block, pos = divmod(token, _BLOCK)
        numel = math.prod(shape)
        st = self._streams.get((which, item))
        if st is None or st[0] != block or st[1].shape[1] != numel:
            g = self._stream(which, item, batch, block)
            st = (block, torch.rand(_BLOCK, numel, generator=g).to(device))
            self._streams[(which, item)] = st
        return st[1][pos].view(shape)

    def stochastic_(self, t: torch.Tensor, which: int, token: int) -> None:
        """Round ``t`` [B, ...] in place to one of its two neighbours, up with probability (x - lo) / q."""
        x = t.clamp(-self.max, self.max)
        # floor(log2 |x|) from the float32 exponent bits (zero and float32 subnormals land below emin)
        e = ((x.view(torch.int32) >> 23) & 255) - 127
        table = self._powers.get(x.device)
        if table is None:  # 2^j for j = -149 .. 127, exact in float32
            table = self._powers[x.device] = torch.tensor([2.0**j for j in range(-149, 128)], device=x.device)
        q = table[(torch.clamp(e, min=self.emin) - self.p + 1 + 149).long()]  # the ulp of x in the format
        lo = torch.floor(x / q) * q
        B = t.shape[0]
        r = torch.stack([self._uniform(which, b, token, t.shape[1:], t.device, B) for b in range(B)])
        out = torch.where(r < (x - lo) / q, lo + q, lo)
        t.copy_(out.clamp_(-self.max, self.max))

    def round_(self, state: object, token: int) -> None:
        for which, t in enumerate(state_tensors(state, stored=True, skip=self.skip)):
            if self.stochastic:
                if t.ndim == 0:
                    raise CapacityError("stochastic rounding needs state tensors with a batch dimension first")
                self.stochastic_(t, which, token)
            else:
                self.nearest(t)


def _seeds(seed: object) -> tuple[int, ...]:  # a user's seed, checked here
    if isinstance(seed, (list, tuple)):
        if not seed:
            raise CapacityError("precision: seed must be a whole number or a non-empty list of them")
        return tuple(_random.check_seed("precision: seed", s) for s in seed)
    return (_random.check_seed("precision: seed", seed),)
