"""Shared checks and array helpers of the closed forms (``lacapacity.theory``'s modules)."""

from __future__ import annotations

from types import ModuleType
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import torch

from lacapacity.errors import CapacityError

Numbers: TypeAlias = "npt.ArrayLike | torch.Tensor"  # a number, or an array of numbers (numpy, torch, nested lists)
FloatArray: TypeAlias = "npt.NDArray[np.float64]"
Floats: TypeAlias = "float | npt.NDArray[np.float64]"  # a float for scalar input, a float64 array otherwise
Array: TypeAlias = "npt.NDArray[np.float64] | torch.Tensor"  # keys, values, reads: a numpy array or a tensor


def _scipy() -> tuple[ModuleType, ModuleType, ModuleType]:
    """scipy's integrate, optimize and special, imported on first use (only T10 needs them: start-up stays light)."""
    from scipy import integrate, optimize, special

    return integrate, optimize, special


def _counts(**named: Numbers) -> list[FloatArray]:
    """Broadcast named counts to float arrays; raise unless every entry is finite and >= 1."""
    arrays = np.broadcast_arrays(*[_numbers(name, v) for name, v in named.items()])
    for (name, _), a in zip(named.items(), arrays):
        if not np.all(np.isfinite(a)) or np.any(a < 1):
            raise CapacityError(f"{name} must be >= 1 (finite), got {named[name]!r}")
    return list(arrays)


def _numbers(name: str, x: Numbers) -> FloatArray:
    """``x`` (a number or an array of numbers) as a float64 array, or a CapacityError naming ``name``."""
    if isinstance(x, (bool, str, bytes, np.bool_)):
        raise CapacityError(f"{name} must be a number or an array of numbers, got {x!r}")
    try:  # a meta tensor's .cpu() raises NotImplementedError, a RuntimeError
        return np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        raise CapacityError(f"{name} must be a number or an array of numbers, got {x!r}") from None


def _matrix(name: str, x: Numbers, min_ndim: int = 2) -> Array:
    """Check that ``x`` is a real torch tensor or numpy array with at least ``min_ndim`` dimensions."""
    if isinstance(x, torch.Tensor):
        if x.device.type == "meta":
            raise CapacityError(f"{name} is a meta tensor; meta tensors carry no numbers")
        if x.is_complex() or x.dtype == torch.bool:
            raise CapacityError(f"{name} must hold real numbers, got {x.dtype}")
    else:
        x = _numbers(name, x)
    if x.ndim < min_ndim:
        want = "[..., n, d]" if min_ndim == 2 else "[..., d]"
        raise CapacityError(f"{name} must have at least {min_ndim} dimension(s) {want}, got shape {tuple(x.shape)}")
    return x


def _same_last(names: str, *xs: Array) -> None:
    if len({x.shape[-1] for x in xs}) > 1:
        shapes = ", ".join(str(tuple(x.shape)) for x in xs)
        raise CapacityError(f"{names} must share their last dimension, got shapes {shapes}")


def _out(x: npt.ArrayLike) -> Floats:
    a = np.asarray(x, dtype=np.float64)
    return float(a) if a.ndim == 0 else a


def _mT(x: Array) -> Array:
    return x.transpose(-1, -2) if isinstance(x, torch.Tensor) else np.swapaxes(x, -1, -2)


def _gram(K: Array) -> Array:
    return K @ _mT(K)  # [..., n, n]


def _diag(G: Array) -> Array:
    return torch.diagonal(G, dim1=-2, dim2=-1) if isinstance(G, torch.Tensor) else np.diagonal(G, axis1=-2, axis2=-1)
