"""Value families: float32 ``[batch, n, dv]`` from an explicit seed, drawn on the CPU and moved to ``device``.

>>> from lacapacity import values
>>> V = values.make("orthonormal", n=8, dv=16, seed=0)
>>> bool(((V[0] @ V[0].T) - __import__("torch").eye(8)).abs().max() < 1e-6)
True
"""

from __future__ import annotations

import torch

from lacapacity.base import _random, _validate
from lacapacity.base._types import Device, Seed
from lacapacity.errors import CapacityError

__all__ = ["make", "available"]

_FAMILIES = {
    "gaussian": "unit rows uniform on the sphere in R^dv (i.i.d.; the T7/T10 setting)",
    "orthonormal": "orthonormal rows, V V^T = I_n (needs n <= dv; the T4 setting)",
}


def available() -> dict[str, str]:
    """The value families: name -> one-line description.

    >>> list(available())
    ['gaussian', 'orthonormal']
    """
    return dict(_FAMILIES)


def make(
    name: str, n: int, dv: int, *, batch: int = 1, seed: Seed = 0, device: Device = None, **params: object
) -> torch.Tensor:
    """Draw values of the family ``name``: float32 ``[batch, n, dv]`` on ``device``; ``seed`` as in ``lacapacity.keys.make``.

    The value families take no parameters of their own.
    """
    _validate.choice("value family", name, _FAMILIES)
    if params:
        unknown = ", ".join(sorted(params))
        raise CapacityError(f"value family {name!r} got unknown parameter(s) {unknown}; allowed: none")
    n = _validate.positive_int("n", n)
    dv = _validate.positive_int("dv", dv)
    batch = _validate.positive_int("batch", batch)
    if name == "orthonormal" and n > dv:
        raise CapacityError(f"orthonormal values need n <= dv, got n={n} > dv={dv}; use 'gaussian' values past dv")
    dev = _validate.device(device)
    seeds = _random.seeds_for_batch(seed, batch)
    gens = [_random.generator(s, f"values/{name}") for s in seeds]  # checks every seed before any work
    shape = (batch, n, dv)
    _validate.check_alloc("values.make", shape, torch.float64, "cpu", copies=3.0)  # float64 draws at the peak
    if dev.type != "cpu":
        _validate.check_alloc("values.make", shape, torch.float32, dev)
    try:
        return _draw(name, n, dv, batch, gens, dev)
    except Exception as exc:
        if _validate.is_alloc_failure(exc):
            raise _validate.alloc_error("values.make", shape, torch.float64, dev, exc) from None
        raise


def _draw(family: str, n: int, dv: int, batch: int, gens: list[torch.Generator], dev: torch.device) -> torch.Tensor:
    """The draws: one generator for the whole batch, or one per item. Returns float32 [batch, n, dv] on dev."""
    items = batch if len(gens) == 1 else 1
    parts = []
    for g in gens:
        if family == "gaussian":
            z = _random.normal(items, n, dv, generator=g)
            parts.append(z / z.norm(dim=-1, keepdim=True))
        else:
            z = _random.normal(items, dv, n, generator=g)
            q, r = torch.linalg.qr(z)  # [items, dv, n]
            q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
            parts.append(q.transpose(1, 2))
    return torch.cat(parts).to(device=dev, dtype=torch.float32)
