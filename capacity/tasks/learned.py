"""Optimised keys: the keys (and optionally a scalar read gain) that a memory retrieves best.

Adam minimises the mean squared retrieval error through the variant's own write and read,

    L(K, c) = mean_i || c read(write(S_0, K, V), k_i) - v_i ||^2,   K = P / ||P|| (unit rows),

from seeded Gaussian keys, for given n, d and values. For the additive memory the optimum is
known: a unit-norm tight frame reaches the frame bound T5, n/d - 1 (n > d), and with the gain
the rank bound T8, 1 - d/n; so the result shows how close gradient descent (and each variant)
gets to the bounds. The key family ``learned`` of ``lacapacity.keys`` calls ``optimise``.

>>> from lacapacity import learned, theory
>>> res = learned.optimise(n=48, d=16, steps=150, seed=0)
>>> tuple(res.keys.shape), bool(res.mse[0] < theory.random_keys_error(48, 16))
((1, 48, 16), True)

Everything runs on the CPU, in float32, with autograd through ``lacapacity.kernels``' torch
backend (the closed and chunked forms of ``kernels/chunked.py``; the Triton kernels are not
differentiable).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from lacapacity import variants
from lacapacity.base import _random, _validate
from lacapacity.errors import CapacityError
from lacapacity.inputs import values as value_families
from lacapacity.inputs.keys import Family
from lacapacity.variants._guard import Guarded, guard


@dataclass
class LearnedKeys:
    """The result: ``keys`` float32 ``[B, n, d]`` unit rows; ``gain`` float32 ``[B]`` (ones unless learned);
    ``mse`` float64 ``[B]``, the final mean squared error; ``history`` float64 ``[steps]``, the loss
    (mean over the batch) before each step; ``values`` the targets ``[B, n, dv]``."""

    keys: torch.Tensor
    gain: torch.Tensor
    mse: npt.NDArray[np.float64]
    history: npt.NDArray[np.float64]
    values: torch.Tensor


def _variant(variant: str | variants.Variant) -> Guarded:
    try:
        return guard(variants.resolve(variant))
    except CapacityError as exc:
        raise CapacityError(f"learned keys: {exc}") from None


def _targets(spec: str | torch.Tensor, batch: int, n: int, dv: int | None, g: torch.Generator) -> torch.Tensor:
    if isinstance(spec, torch.Tensor):
        V = spec.detach().float().cpu()
        if V.ndim == 2:
            V = V.unsqueeze(0)
        if V.ndim != 3 or V.shape[1] != n or V.shape[0] not in (1, batch):
            raise CapacityError(
                f"learned keys: values must be a family name or a tensor [n, dv] or [batch, n, dv] with n = {n}, batch = {batch}; got {tuple(spec.shape)}"
            )
        return V.expand(batch, n, V.shape[2]).contiguous()
    if not isinstance(spec, str):
        raise CapacityError(
            f"learned keys: values must be a value family ({', '.join(value_families.available())}) or a tensor, got {spec!r}"
        )
    return value_families.make(spec, n, _dv(spec, n, dv), batch=batch, seed=g)


def _dv(values: str, n: int, dv: int | None) -> int:
    """The value dimension of a value family's targets: ``dv``, or by default n (orthonormal) or 64."""
    return (n if values == "orthonormal" else 64) if dv is None else dv


def _settings(variant: Any, dv: Any, steps: Any, lr: Any, gain: Any) -> tuple[Guarded, int | None, int, float]:
    """The optimiser's settings as a user gave them, checked (one line per fault): the memory (guarded), dv (None:
    the values' default), steps and lr as numbers."""
    mem = _variant(variant)
    steps = _validate.positive_int("learned keys: steps", steps)
    lr = _validate.in_range("learned keys: lr", lr, 0.0, 10.0, low_open=True)
    if not isinstance(gain, bool):
        raise CapacityError(f"learned keys: gain must be True or False, got {gain!r}")
    dv = None if dv is None else _validate.positive_int("learned keys: dv", dv)
    return mem, dv, steps, lr


def _loss(mem: Guarded, P: torch.Tensor, c: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """Per batch item mean_i ||c r_i - v_i||^2, float32 [B], differentiable in P and c."""
    K = P / P.norm(dim=-1, keepdim=True)  # [B, n, d] unit rows
    B, n, d = K.shape
    state = mem.write(mem.init_state(B, d, V.shape[2]), K, V)
    r = mem.read(state, K) * c[:, None, None]  # [B, n, dv]
    loss: torch.Tensor = ((r - V) ** 2).sum(-1).mean(-1)
    return loss


def optimise(
    n: int,
    d: int,
    *,
    variant: str | variants.Variant = "linear",
    values: str | torch.Tensor = "orthonormal",
    dv: int | None = None,
    steps: int = 300,
    lr: float = 0.05,
    gain: bool = False,
    batch: int = 1,
    seed: int | torch.Generator = 0,
) -> LearnedKeys:
    """Keys ``[batch, n, d]`` optimised by Adam for retrieval through ``variant``.

    ``variant``: a registered name or a variant object (it must be differentiable in the keys).
    ``values``: a value family (``orthonormal``, dv = n by default; ``gaussian``, dv = 64 by
    default) drawn from ``seed``, or a tensor ``[n, dv]`` / ``[batch, n, dv]``. ``gain=True``
    also learns a scalar read gain c per batch item. ``seed``: an int or a CPU torch.Generator;
    the start is Gaussian unit keys from it.
    """
    n = _validate.positive_int("n", n)
    d = _validate.positive_int("d", d)
    batch = _validate.positive_int("batch", batch)
    mem, dv, steps, lr = _settings(variant, dv, steps, lr, gain)
    g = _random.generator(seed, "keys/learned")
    P = torch.randn(batch, n, d, generator=g).requires_grad_(True)  # the start: Gaussian keys
    V = _targets(values, batch, n, dv, g)
    c = torch.ones(batch, requires_grad=gain)
    opt = torch.optim.Adam([P, c] if gain else [P], lr=lr)
    history = np.empty(steps)
    with torch.enable_grad():
        for step in range(steps):
            opt.zero_grad(set_to_none=True)
            per_item = _loss(mem, P, c, V)
            torch.autograd.backward(per_item.sum())  # items are independent: each gets its own gradient
            history[step] = float(per_item.detach().mean())
            opt.step()
    with torch.no_grad():
        final = _loss(mem, P, c, V).double().numpy()
        K = (P / P.norm(dim=-1, keepdim=True)).detach()
    if not np.all(np.isfinite(final)):
        raise CapacityError(
            f"learned keys: the optimisation diverged (non-finite error) with lr = {lr:g}; use a smaller lr"
        )
    return LearnedKeys(keys=K.contiguous(), gain=c.detach().clone(), mse=final, history=history, values=V)


# the family's parameters: optimise's keyword arguments besides batch and seed, and their defaults (optimise's own)
_PARAMS = ("variant", "values", "dv", "steps", "lr", "gain")
_DEFAULTS = {p: inspect.signature(optimise).parameters[p].default for p in _PARAMS}


def _given(params: dict[str, Any]) -> dict[str, Any]:
    """The family's parameters, those not given at their defaults."""
    return {**_DEFAULTS, **params}


def _check(d: int, **params: Any) -> None:
    """The family's parameters, checked without optimising anything."""
    given = _given(params)
    _settings(given["variant"], given["dv"], given["steps"], given["lr"], given["gain"])
    values = given["values"]
    if not isinstance(values, str) or values not in value_families.available():
        raise CapacityError(
            f"learned keys: values must be a value family ({', '.join(value_families.available())}), got {values!r}"
        )


STEP_SECONDS = 5e-4  # fixed cost of one Adam step through autograd (2-core VM under load, 2026-12-01: 0.3-1 ms)
RATE = 2e10  # multiply-adds per second of one step's products on one CPU core (same measurement)


def _cost(batch: int, n: int, d: int, **params: Any) -> float:
    """Estimated seconds of one draw on one CPU core: steps x (fixed step cost + forward and backward products,
    about 6 B n d dv multiply-adds for an additive write and read). An estimate to warn by, not a benchmark."""
    given = _given(params)
    dv = _dv(given["values"], n, given["dv"])  # checked before (_check)
    return float(given["steps"]) * (STEP_SECONDS + 6.0 * batch * n * d * float(dv) / RATE)


def _draw(batch: int, n: int, d: int, g: torch.Generator, **params: Any) -> torch.Tensor:
    return optimise(n, d, batch=batch, seed=g, **params).keys.to(torch.float64)


# the key family "learned", declared to lacapacity.keys through the entry point group lacapacity.keys (pyproject.toml)
FAMILY = Family(
    "learned",
    _draw,
    _PARAMS,
    False,
    "optimised by Adam through a variant's write and read (lacapacity.learned; variant, values, steps, lr, gain)",
    _check,
    cost=_cost,
)
