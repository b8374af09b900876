"""Draws shared by the passes of one task: the memories of a cell draw the same keys and values.

The sweep runs the passes that differ only in their memory (variant, feature map) as one task
(``lacapacity.tasks.measure``); inside ``shared()`` a draw made with the same arguments is made once and every
pass gets its own copy (a memory that writes into its keys in place changes no other pass's numbers). Outside
``shared()`` every call draws. A draw's numbers depend on its arguments alone, so sharing changes no number. The
draws kept take at most ``BUDGET`` bytes (beyond it a draw is made each time, as outside ``shared()``).
"""

from __future__ import annotations

import contextlib
import numbers
import threading
from collections.abc import Callable, Hashable, Iterator
from typing import Any

import torch

BUDGET = 1 << 28  # bytes of draws kept inside one shared() block
_LOCAL = (
    threading.local()
)  # .memo: arguments -> tensor, inside shared(); per thread (a Dask worker runs tasks in threads)


@contextlib.contextmanager
def shared() -> Iterator[None]:
    """Share the draws made with ``drawn`` inside the block (in this thread); they are dropped at its end."""
    old = getattr(_LOCAL, "memo", None)
    _LOCAL.memo = {}
    try:
        yield
    finally:
        _LOCAL.memo = old


class _Unshared(Exception):
    """An argument that is not a plain value (a generator, say: its next draw differs): draw without sharing."""


def _frozen(x: Any) -> Hashable:
    if isinstance(x, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in x.items()))
    if isinstance(x, (list, tuple)):
        return tuple(_frozen(v) for v in x)
    if isinstance(x, (str, numbers.Number, type(None), torch.device, torch.dtype)):
        return x
    raise _Unshared


def drawn(make: Callable[..., torch.Tensor], *args: Any, **kwargs: Any) -> torch.Tensor:
    """``make(*args, **kwargs)`` (a tensor), made once per set of arguments inside ``shared()``; a copy each call."""
    try:
        key = (make.__module__, make.__qualname__, _frozen(args), _frozen(kwargs))
    except _Unshared:
        key = None
    memo: dict[Hashable, torch.Tensor] | None = getattr(_LOCAL, "memo", None)
    if memo is None or key is None:
        return make(*args, **kwargs)
    if key in memo:
        return memo[key].clone()
    x = make(*args, **kwargs)
    if sum(t.nbytes for t in memo.values()) + x.nbytes <= BUDGET:
        memo[key] = x.clone()
    return x
