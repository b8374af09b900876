"""Gate and beta parameters of the recurrent variants: a constant, or drawn per token from a seed.

The forms (checked against the parameter's allowed interval, e.g. (0, 1] for a gate):

- a number: the same value for every token (and every channel), e.g. ``alpha=0.95``;
- ``("uniform", low, high)``: drawn per token (and per batch item, and for a per-channel gate
  per channel) uniformly from [low, high], e.g. ``alpha=("uniform", 0.9, 1.0)``;
- per-channel gates only: a sequence of D numbers, one fixed value per feature row of the state.

Draws are reproducible and independent of how the tokens are chunked into writes: token t's
draws come from the block of ``BLOCK`` tokens that holds it, each block from its own seeded
stream ``(seed, "variants/<variant>/<param>/<block>")``. No global RNG is touched. (The scalar gate ``alpha`` of
decay and gated_delta draws from the stream of its old name ``a``, so that its draws are those it always had.)
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Literal, TypedDict, cast

import torch

from lacapacity.base import _random
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError

BLOCK = 256  # tokens per seeded stream


class Interval(TypedDict):
    """Where a parameter lies: (low, high], or (low, high) with ``high_open``."""

    low: float
    high: float
    high_open: bool


Kind = Literal["constant", "vector", "uniform"]
# what a Param holds, by kind: a float (constant), a float32 [D] tensor (vector), (low, high) (uniform)
Value = float | torch.Tensor | tuple[float, float]


class Param:
    """One gate or beta: ``constant`` (float), ``vector`` (per-channel values), or drawn ``uniform`` (low, high)."""

    def __init__(
        self,
        variant: str,
        name: str,
        spec: object,
        *,
        low: float,
        high: float,
        high_open: bool,
        per_channel: bool,
        stream: str | None = None,
    ) -> None:
        self.variant, self.name, self.per_channel = variant, name, per_channel
        self.stream = name if stream is None else stream  # names the seeded stream of its draws
        self.low, self.high, self.high_open = low, high, high_open
        self.kind, self.value = self._parse(spec)

    @property
    def interval(self) -> str:
        return f"({self.low:g}, {self.high:g}" + (")" if self.high_open else "]")

    def _number(self, x: object, what: str) -> float:
        if isinstance(x, bool) or not isinstance(x, numbers.Real):
            raise CapacityError(f"{self.variant}: {what} must be a number, got {x!r}")
        value = float(x)
        ok = self.low < value and (value < self.high if self.high_open else value <= self.high)
        if not ok:
            raise CapacityError(f"{self.variant}: {what} must lie in {self.interval}, got {value!r}")
        return value

    def _parse(self, spec: object) -> tuple[Kind, Value]:
        forms = (
            "a number"
            + (", a sequence of one value per feature channel" if self.per_channel else "")
            + ', or ("uniform", low, high)'
        )
        if isinstance(spec, numbers.Real) and not isinstance(spec, bool):
            return "constant", self._number(spec, self.name)
        if isinstance(spec, (tuple, list)) and len(spec) > 0 and isinstance(spec[0], str):
            if spec[0] != "uniform" or len(spec) != 3:
                raise CapacityError(f"{self.variant}: {self.name} must be {forms}; got {spec!r}")
            lo = self._number(spec[1], f"{self.name} low")
            hi = self._number(spec[2], f"{self.name} high")
            if lo > hi:
                raise CapacityError(
                    f"{self.variant}: {self.name} = ('uniform', low, high) needs low <= high, got {spec!r}"
                )
            return "uniform", (lo, hi)
        if self.per_channel and isinstance(spec, (Sequence, torch.Tensor)) and not isinstance(spec, str):
            try:
                vec = torch.as_tensor(spec, dtype=torch.float64).flatten()
            except (TypeError, ValueError, RuntimeError):
                raise CapacityError(f"{self.variant}: {self.name} must be {forms}; got {spec!r}") from None
            if vec.numel() == 0:
                raise CapacityError(f"{self.variant}: {self.name} must not be an empty sequence")
            for x in vec.tolist():
                self._number(x, f"every entry of {self.name}")
            return "vector", vec.float()
        raise CapacityError(f"{self.variant}: {self.name} must be {forms}; got {spec!r}")

    @property
    def drawn(self) -> bool:
        return self.kind == "uniform"

    def spec(self) -> float | list[object]:
        """The parameter in a JSON-friendly form that ``Param`` parses back."""
        if self.kind == "constant":
            return cast(float, self.value)  # kind "constant" holds a float
        if self.kind == "uniform":
            return ["uniform", *cast("tuple[float, float]", self.value)]  # kind "uniform" holds (low, high)
        return cast(torch.Tensor, self.value).tolist()  # kind "vector" holds a [D] tensor

    def values(
        self, batch: int, start: int, count: int, channels: int, seed: int, device: Device
    ) -> float | torch.Tensor:
        """What ``kernels.update`` takes for tokens start .. start + count - 1.

        A float for a constant; ``[channels]`` for a per-channel vector; drawn: ``[batch, count]``,
        or ``[batch, count, channels]`` for a per-channel gate.
        """
        if self.kind == "constant":
            return cast(float, self.value)  # kind "constant" holds a float
        if self.kind == "vector":
            vec = cast(torch.Tensor, self.value)  # kind "vector" holds a [D] tensor
            if vec.numel() != channels:
                raise CapacityError(
                    f"{self.variant}: {self.name} has {vec.numel()} entries but the state has {channels} feature rows; give one value per row"
                )
            return vec.to(device)
        lo, hi = cast("tuple[float, float]", self.value)  # kind "uniform" holds (low, high)
        first, last = start // BLOCK, (start + count - 1) // BLOCK
        shape = (batch, BLOCK, channels) if self.per_channel else (batch, BLOCK)
        blocks = [
            torch.rand(
                shape,
                generator=_random.generator(seed, f"variants/{self.variant}/{self.stream}/{j}"),
                dtype=torch.float64,
            )
            for j in range(first, last + 1)
        ]
        u = torch.cat(blocks, dim=1)[:, start - first * BLOCK : start - first * BLOCK + count]  # [B, count(, D)]
        return (lo + (hi - lo) * u).float().to(device)
