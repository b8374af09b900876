"""Bookkeeping in a memory's state: dataclass fields that hold counters or indices, not stored numbers.

A field declared with ``bookkeeping()`` (a token counter, step indices) is never rounded by the precision axis
(``capacity.variants.precision``), and neither ``check_variant``'s size check, ``precision.state_bytes`` nor the bill counts
it. This module imports nothing of the package, so that memories and the precision axis can both use it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["BOOKKEEPING", "bookkeeping"]

BOOKKEEPING = "capacity.bookkeeping"  # dataclass field metadata: the field is bookkeeping, not stored numbers


def bookkeeping(**kwargs: Any) -> Any:  # Any: dataclasses.field's own (its result types as the field's value)
    """A dataclass field that holds bookkeeping (a token counter, step indices): never rounded by the precision axis,
    not counted in the state's numbers or bytes. ``tokens: torch.Tensor = bookkeeping()``."""
    return dataclasses.field(metadata={BOOKKEEPING: True}, **kwargs)
