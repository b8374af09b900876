"""Argument checks shared by the modules; each raises CapacityError with one clear message."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
import torch

from capacity.errors import CapacityError


def positive_int(name: str, value, *, minimum: int = 1) -> int:
    """Return ``value`` as an int, or raise if it is not a whole number >= minimum."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise CapacityError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    value = int(value)
    if value < minimum:
        raise CapacityError(f"{name} must be a whole number >= {minimum}, got {value}")
    return value


def in_range(name: str, value, low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a float, or raise if it lies outside the interval [low, high] (open ends as asked)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise CapacityError(f"{name} must be a number, got {value!r}") from None
    lo_ok = x > low if low_open else x >= low
    hi_ok = x < high if high_open else x <= high
    if not (lo_ok and hi_ok) or np.isnan(x):
        interval = ("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]")
        raise CapacityError(f"{name} must lie in {interval}, got {value!r}")
    return x


def device(value) -> torch.device:
    """Resolve ``None`` to the CPU, and check that the named device exists."""
    if value is None:
        return torch.device("cpu")
    try:
        dev = torch.device(value)
    except (RuntimeError, TypeError):
        raise CapacityError(f"device must be a torch device such as 'cpu' or 'cuda', got {value!r}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CapacityError(f"device {value!r} was asked for but no CUDA device is available; use device='cpu'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise CapacityError(f"device {value!r} does not exist: this machine has {torch.cuda.device_count()} CUDA device(s)")
    if dev.type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise CapacityError(f"device {value!r} was asked for but this machine has no MPS (Apple GPU) device; use device='cpu'")
    if dev.type not in ("cpu", "cuda", "mps"):
        raise CapacityError(f"device {value!r} is not supported: use 'cpu' or 'cuda'")
    return dev


def tensor(name: str, x, *, ndim: int | tuple[int, ...], finite: bool = True) -> torch.Tensor:
    """Check that ``x`` is a floating torch tensor with ``ndim`` dimensions (or one of several) and finite entries."""
    if not isinstance(x, torch.Tensor):
        raise CapacityError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if x.ndim not in allowed:
        want = " or ".join(str(a) for a in allowed)
        raise CapacityError(f"{name} must have {want} dimensions, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise CapacityError(f"{name} must be a floating-point tensor (float32, bfloat16 or float16), got {x.dtype}")
    if any(s == 0 for s in x.shape):
        raise CapacityError(f"{name} must not be empty, got shape {tuple(x.shape)}")
    if finite and not bool(torch.isfinite(x).all()):
        raise CapacityError(f"{name} contains NaN or inf; every entry must be finite")
    return x


def same_device(**tensors: torch.Tensor) -> torch.device:
    """Raise unless every tensor lives on one device; return that device."""
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listed = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise CapacityError(f"tensors must be on one device, got {listed}")
    return next(iter(devices.values()))


def choice(name: str, value: str, allowed: Sequence[str]) -> str:
    """Raise unless ``value`` is one of ``allowed``, listing them."""
    if value not in allowed:
        raise CapacityError(f"unknown {name} {value!r}; known: {', '.join(sorted(allowed))}")
    return value
