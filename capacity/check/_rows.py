"""A check row, its relations, and the helpers the topic modules share."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from capacity import variants

__all__ = ["Check", "eq", "ge", "mean_se", "Gain"]


@dataclass
class Check:
    """One row of the table: ``measured`` must stand in ``relation`` to ``expected`` within ``tolerance``."""

    theorem: str
    what: str
    measured: float
    expected: float
    relation: str  # "=" (|measured - expected| <= tolerance) or ">=" (measured >= expected - tolerance) or "in"
    tolerance: float
    passed: bool


def eq(theorem, what, measured, expected, tol) -> Check:
    return Check(
        theorem, what, float(measured), float(expected), "=", float(tol), bool(abs(measured - expected) <= tol)
    )


def ge(theorem, what, measured, bound, tol) -> Check:
    return Check(theorem, what, float(measured), float(bound), ">=", float(tol), bool(measured >= bound - tol))


def mean_se(x: torch.Tensor) -> tuple[float, float]:
    x = x.double().cpu()
    return float(x.mean()), float(x.std() / math.sqrt(x.numel()))


class Gain:
    """The linear memory read with a scalar gain c: r = c q S (T8, T9)."""

    name = "linear-gain"

    def __init__(self, c: float):
        self.inner, self.c = variants.get("linear"), float(c)

    def init_state(self, batch, d, dv, *, device=None):
        return self.inner.init_state(batch, d, dv, device=device)

    def write(self, state, k, v):
        return self.inner.write(state, k, v)

    def read(self, state, q):
        return self.c * self.inner.read(state, q)

    def state_numel(self, d, dv):
        return d * dv
