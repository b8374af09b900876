"""A check row, its relations, the measurement cache, and the helpers the topic modules share."""

from __future__ import annotations

import contextvars
import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar, cast

import numpy as np
import numpy.typing as npt
import torch
import xarray as xr

from lacapacity import variants
from lacapacity.base._types import Device
from lacapacity.tasks import metrics

T = TypeVar("T")
# a number: a float (an int), a numpy scalar, or an array or tensor of one entry (what the closed forms return)
Number: TypeAlias = "float | np.floating[Any] | npt.NDArray[Any] | torch.Tensor"


@dataclass
class Check:
    """One row of the table: ``measured`` must stand in ``relation`` to ``expected`` within ``tolerance``.

    ``function`` names what the row checks: a function of ``lacapacity.theory`` (its name, e.g.
    ``"frame_bound"``; the row calls it as ``lacapacity.theory.<name>``, so a monkeypatch changes the row)
    or, for a row that holds package code to an exact identity without a closed form, that code
    (e.g. ``"variants.linear"``).
    """

    theorem: str
    what: str
    measured: float
    expected: float
    relation: str  # "=" (|measured - expected| <= tolerance), ">=" (measured >= expected - tolerance), "in" (as "=")
    tolerance: float
    passed: bool
    function: str = ""


def eq(theorem: str, what: str, measured: Number, expected: Number, tol: Number, *, function: str = "") -> Check:
    """|measured - expected| <= tol (NaN fails)."""
    m, e, t = float(measured), float(expected), float(tol)
    return Check(theorem, what, m, e, "=", t, bool(abs(m - e) <= t), function)


def ge(theorem: str, what: str, measured: Number, bound: Number, tol: Number, *, function: str = "") -> Check:
    """measured >= bound - tol (a bound; the row's text says by how much it holds). NaN fails."""
    m, b, t = float(measured), float(bound), float(tol)
    return Check(theorem, what, m, b, ">=", t, bool(m >= b - t), function)


def inside(theorem: str, what: str, measured: Number, low: Number, high: Number, *, function: str = "") -> Check:
    """low <= measured <= high, shown as the window's centre and half-width. NaN fails."""
    m, lo, hi = float(measured), float(low), float(high)
    return Check(theorem, what, m, (lo + hi) / 2, "in", (hi - lo) / 2, bool(lo <= m <= hi), function)


def mean_se(x: torch.Tensor | np.ndarray | Sequence[float]) -> tuple[float, float]:
    """Mean and standard error (ddof = 1) of the entries of ``x`` (a tensor or an array)."""
    x = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x).double().cpu().flatten()
    return float(x.mean()), float(x.std() / math.sqrt(x.numel()))


def capacity_se(
    curve: np.ndarray, n: Sequence[int] | np.ndarray, *, metric: str, threshold: float, groups: int = 16
) -> tuple[float, float]:
    """``metrics.capacity`` of the batch-mean curve and its standard error from the spread of batch groups.

    ``curve``: float ``[C, B]`` (checkpoint, batch item) of ``metric``; ``n``: the C checkpoints. The B items
    are split into ``groups`` groups of equal size; the standard error is the standard deviation of the groups'
    capacities over sqrt(groups) (NaN, and so a failing row, where a group's curve does not cross in the grid).
    """
    curve = np.asarray(curve, dtype=np.float64)
    C, B = curve.shape
    coords = {"n": np.asarray(n)}
    whole = metrics.capacity(
        xr.Dataset({metric: ("n", curve.mean(1))}, coords=coords), metric=metric, threshold=threshold
    )
    per = curve[:, : B - B % groups].reshape(C, groups, -1).mean(-1)  # [C, groups]
    caps = metrics.capacity(
        xr.Dataset({metric: (("n", "group"), per)}, coords=coords), metric=metric, threshold=threshold
    ).values
    return float(whole), float(np.std(caps, ddof=1) / math.sqrt(groups))


# ---------------------------------------------------------------- the measurement cache

# None, or (the run's cache, the key prefix of the group being run)
_CACHE: contextvars.ContextVar[tuple[dict[tuple[object, ...], object], tuple[object, ...]] | None] = (
    contextvars.ContextVar("capacity_check_cache", default=None)
)


def measured(key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, the row's measurement of package code, computed once per ``run_checks`` cache.

    ``run_checks(cache=...)`` keeps measurements across runs with the same device and seed (the
    perturbation test reruns the rows with a closed form patched, and only the expected values change).
    ``key`` must hold every input of the measurement that does not come from the group's device and
    seed, in particular any value taken from ``lacapacity.theory`` (so that a patched closed form is
    measured again). Without a cache (a plain run), it is ``compute()``. Cached values are shared: do
    not modify them.
    """
    ctx = _CACHE.get()
    if ctx is None:
        return compute()
    cache, prefix = ctx
    full = (*prefix, key)
    if full not in cache:
        cache[full] = compute()
    return cast(T, cache[full])  # what compute() gave for this key


# ---------------------------------------------------------------- reference constructions


def paley_etf(q: int) -> torch.Tensor:
    """An equiangular tight frame of n = q + 1 unit vectors in R^d, d = (q + 1)/2, float64 ``[n, d]``.

    From Paley's symmetric conference matrix C (q a prime = 1 mod 4): C_0j = C_j0 = 1, C_ij = chi(i - j)
    (the Legendre symbol mod q) for i, j >= 1, zero diagonal, C^2 = q I. The Gram matrix I + C / sqrt(q)
    has eigenvalues 0 and 2, each (q + 1)/2 times, unit diagonal and |G_ij| = 1/sqrt(q), which is the
    Welch bound for n = 2d (T6 equality); its rows K^T K = (n/d) I make it a tight frame (T5 equality).
    """
    if q % 4 != 1 or any(q % p == 0 for p in range(2, int(math.isqrt(q)) + 1)):
        raise ValueError(f"q must be a prime = 1 mod 4, got {q}")
    chi = np.array([0] + [1 if pow(a, (q - 1) // 2, q) == 1 else -1 for a in range(1, q)], dtype=np.float64)
    n = q + 1
    C = np.zeros((n, n))
    C[0, 1:] = C[1:, 0] = 1.0
    idx = np.arange(q)
    C[1:, 1:] = chi[(idx[:, None] - idx[None, :]) % q]
    w, U = np.linalg.eigh(np.eye(n) + C / math.sqrt(q))
    return torch.from_numpy(U[:, w > 1.0] * math.sqrt(2.0))  # [n, d]: K K^T = U diag(2) U^T = G


class Gain:
    """The linear memory read with a scalar gain c: r = c q S (T8, T9)."""

    name = "linear-gain"

    def __init__(self, c: float | npt.NDArray[np.float64]) -> None:  # a float, or a closed form's 0-d result
        self.inner, self.c = variants.get("linear"), float(c)

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> Any:  # Any: linear's state
        return self.inner.init_state(batch, d, dv, device=device)

    def write(self, state: Any, k: torch.Tensor, v: torch.Tensor) -> Any:
        return self.inner.write(state, k, v)

    def read(self, state: Any, q: torch.Tensor) -> torch.Tensor:
        return self.c * self.inner.read(state, q)

    def state_numel(self, d: int, dv: int) -> int:
        return d * dv
