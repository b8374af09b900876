"""Shared by the memory tests: fla's error metric and seeded inputs."""

from __future__ import annotations

import torch

from capacity.inputs import keys, values


def rel_rms(a: torch.Tensor, b: torch.Tensor) -> float:
    """fla's metric: RMS of the difference over the RMS of the reference (both taken in float64)."""
    a, b = a.double(), b.double()
    return float((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt())


def pairs(T: int, d: int, dv: int, *, B: int = 2, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian unit keys ``[B, T, d]`` (seed) and gaussian values ``[B, T, dv]`` (seed + 1)."""
    return keys.make("gaussian", T, d, batch=B, seed=seed), values.make("gaussian", T, dv, batch=B, seed=seed + 1)
