"""Seeded random streams. No global RNG is touched: every draw takes a seed or a torch.Generator."""

from __future__ import annotations

import numbers
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from lacapacity.errors import CapacityError

if TYPE_CHECKING:  # pragma: no cover
    from lacapacity.base._types import Seed

MAX_SEED = 2**63 - 1  # stored results keep seeds as int64


def check_seed(name: str, seed: object) -> int:
    """Return ``seed`` as an int, or raise unless it is a whole number in [0, 2^63 - 1]."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= int(seed) <= MAX_SEED:
        raise CapacityError(
            f"{name} must be a whole number >= 0 and <= 2^63 - 1 (stored results keep it as int64), got {seed!r}"
        )
    return int(seed)


def generator(seed: object, stream: str) -> torch.Generator:  # seed checked here: an int or a CPU Generator
    """A CPU torch.Generator for ``(seed, stream)``.

    ``seed`` is an int in [0, 2^63 - 1] or a torch.Generator (used as is, must live on the CPU).
    Different ``stream`` names give independent generators for the same seed, so that keys
    and values drawn with seed 0 are not the same numbers.
    """
    if isinstance(seed, torch.Generator):
        if seed.device.type != "cpu":
            raise CapacityError(f"seed generators must live on the CPU (draws are made there), got {seed.device}")
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or not 0 <= int(seed) <= MAX_SEED:
        raise CapacityError(f"seed must be a whole number >= 0 and <= 2^63 - 1, or a CPU torch.Generator; got {seed!r}")
    tag = zlib.crc32(stream.encode())
    state = np.random.SeedSequence([int(seed), tag]).generate_state(2, dtype=np.uint32)
    g = torch.Generator(device="cpu")
    g.manual_seed(int(state[0]) << 32 | int(state[1]))
    return g


def seeds_for_batch(seed: Seed, batch: int) -> list[int | np.integer | torch.Generator]:
    """Normalise ``seed`` for a batch: an int or generator serves the whole batch; a sequence gives one seed per item."""
    if isinstance(seed, (Sequence, np.ndarray)) and not isinstance(seed, (str, bytes)):  # range(4) too, as Seed says
        seeds = list(seed)
        if len(seeds) == 0:
            raise CapacityError("seed sequence must not be empty")
        if batch not in (1, len(seeds)):
            raise CapacityError(
                f"batch={batch} does not match the {len(seeds)} seeds given; pass one seed per batch item"
            )
        return seeds
    return [seed]  # type: ignore[list-item]  # bytes (a Sequence[int] too): generator() refuses it


def normal(*shape: int, generator: torch.Generator) -> torch.Tensor:
    """Standard normal draws, float64 ``shape``: drawn in float32 (four times faster on the CPU) and widened.

    Every family builds on these, so the numbers for a seed are the same on every machine and device.
    """
    return torch.randn(*shape, generator=generator, dtype=torch.float32).double()
