"""What the model task measures of one captured layer, per head (``lacapacity.inputs.capture.Layer``, H heads, T tokens).

- ``geometry``: the keys' mean squared coherence (against 1/d for random keys), largest coherence (against T6's
  Welch bound), effective rank, T4's mean crosstalk error at the real keys (against T5's frame bound and T7's
  random-key value) and T8's rank bound at T tokens.
- ``recall``: each pair read back from the head's final state with its own key, by age (T - 1 - t): the mean
  relative error ||k_t S - v_t||^2 / ||v_t||^2 (the additive rules, Mamba-2 and MiniMax's decay: k_t S / ||k_t||^2,
  their keys are not unit) and the
  fraction decoded right by argmax of cosine over the ``window`` stored values around it; beside it the forgetting
  closed form at the head's mean gate and beta (T23 for gated_delta and kda, whose channel gates are averaged; T22
  with the mean gate for mamba2 and decay), and the state's fullness: the mean error over all T pairs, measured and closed form.
- ``precision``: the layer replayed with its state stored in each format after every token
  (``lacapacity.variants.precision``'s rounders: bfloat16, float8, int8/int4 with scales, with or without error
  feedback), the relative RMS error of each head's outputs against float32.
- ``rule``: another memory written with the head's keys (made unit length) and values (the heads as the batch),
  each pair read back, the same error by age.

Ages are binned: bin i holds the ages ``edges[i] <= age < edges[i + 1]`` (the last bin up to T - 1); an empty bin
is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lacapacity import theory
from lacapacity.inputs.capture import Layer, replay
from lacapacity.variants import precision


def age_bins(edges: Sequence[int], T: int) -> list[np.ndarray]:
    """The token indices t of each age bin (age = T - 1 - t)."""
    out = []
    for i, lo in enumerate(edges):
        hi = edges[i + 1] if i + 1 < len(edges) else T
        ages = np.arange(lo, min(hi, T))
        out.append((T - 1 - ages).astype(np.int64))
    return out


def _unit(x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return out


def geometry(layer: Layer) -> dict[str, np.ndarray]:
    """Per head ``[H]``: coherence2, max_coherence, effective_rank, crosstalk_t4 (measured at the real keys, unit
    length) and the bounds welch (T6), frame (T5), random (T7), rank (T8) at T keys in R^d."""
    K = _unit(layer.k.double())  # [H, T, d]
    H, T, d = K.shape
    G = K @ K.transpose(1, 2)  # [H, T, T]
    off = ~torch.eye(T, dtype=torch.bool)
    c2 = (G[:, off] ** 2).mean(dim=1)
    cmax = G[:, off].abs().amax(dim=1)
    s = torch.linalg.svdvals(K) ** 2
    p = s / s.sum(dim=1, keepdim=True)
    erank = torch.exp(-(p * torch.log(p.clamp_min(1e-300))).sum(dim=1))
    t4 = torch.stack([theory.crosstalk_error(K[h]).mean() for h in range(H)])
    full = np.full(H, 1.0)
    return {
        "coherence2": c2.numpy(),
        "coherence2_random": full / d,
        "max_coherence": cmax.numpy(),
        "welch_bound": full * float(theory.welch_bound(T, d)),
        "effective_rank": erank.numpy(),
        "crosstalk_t4": t4.numpy(),
        "frame_bound": full * float(theory.frame_bound(T, d)),
        "random_keys_error": full * float(theory.random_keys_error(T, d)),
        "rank_bound": full * float(theory.rank_bound(T, d)),
    }


def _errors(layer: Layer, reads: torch.Tensor) -> torch.Tensor:
    """Relative squared error of each pair's read ``[H, T]``."""
    v = layer.v.double()
    return ((reads.double() - v) ** 2).sum(-1) / (v**2).sum(-1).clamp_min(1e-30)


def _argmax(layer: Layer, reads: torch.Tensor, window: int) -> torch.Tensor:
    """Whether each pair's read picks its own value among the ``window`` stored values around it ``[H, T]``."""
    H, T, _ = layer.v.shape
    v = _unit(layer.v.double())
    r = _unit(reads.double())
    W = min(window, T)
    start = torch.clamp(torch.arange(T) - W // 2, 0, T - W)  # [T]
    idx = start[:, None] + torch.arange(W)[None, :]  # [T, W]
    cand = v[:, idx]  # [H, T, W, dv]
    scores = (cand * r[:, :, None, :]).sum(-1)  # [H, T, W]
    return idx[None].expand(H, T, W).gather(2, scores.argmax(dim=2, keepdim=True))[..., 0] == torch.arange(T)


def _own_reads(layer: Layer, S: torch.Tensor) -> torch.Tensor:
    reads = layer.k @ S  # [H, T, dv]
    if layer.beta is None:  # an additive rule (mamba2, decay): its keys are not unit
        reads = reads / (layer.k**2).sum(-1, keepdim=True).clamp_min(1e-30)
    return reads


def _binned(x: torch.Tensor, bins: list[np.ndarray]) -> np.ndarray:
    """``[H, T]`` -> ``[H, bins]``: the mean over each bin's tokens (NaN where empty)."""
    x = x.double()
    return np.stack([x[:, b].mean(dim=1).numpy() if len(b) else np.full(x.shape[0], math.nan) for b in bins], axis=1)


def recall(layer: Layer, edges: Sequence[int], window: int) -> dict[str, np.ndarray]:
    """Per head and age bin ``[H, bins]``: recall_error, recall_argmax, recall_theory; per head ``[H]``: gate_mean,
    beta_mean (NaN for mamba2 and decay), fullness and fullness_theory (see the module docstring)."""
    H, T, d = layer.k.shape
    bins = age_bins(edges, T)
    S = layer.state
    reads = _own_reads(layer, S)
    err = _errors(layer, reads)
    hit = _argmax(layer, reads, window).double()
    gate = layer.alpha.double().reshape(H, -1).mean(dim=1).numpy()
    beta = layer.beta.double().mean(dim=1).numpy() if layer.beta is not None else np.full(H, math.nan)
    ages = np.arange(T)
    th = np.empty((H, len(bins)))
    full_th = np.empty(H)
    for h in range(H):
        if layer.beta is None:  # mamba2, decay
            by_age = theory.forgetting_error(ages, T, d, "decay", alpha=float(gate[h]))
        else:
            by_age = theory.forgetting_error(ages, T, d, "gated_delta", alpha=float(gate[h]), beta=float(beta[h]))
        by_age = np.asarray(by_age, dtype=np.float64)
        th[h] = [by_age[T - 1 - b].mean() if len(b) else math.nan for b in bins]
        full_th[h] = by_age.mean()
    return {
        "recall_error": _binned(err, bins),
        "recall_argmax": _binned(hit, bins),
        "recall_theory": th,
        "gate_mean": gate,
        "beta_mean": beta,
        "fullness": err.mean(dim=1).numpy(),
        "fullness_theory": full_th,
    }


def precision_errors(layer: Layer, formats: Sequence[str], reference: torch.Tensor) -> np.ndarray:
    """``[H, formats]``: the relative RMS error of each head's outputs with its state stored in each format after every
    token, against the float32 replay's outputs ``reference`` ``[H, T, dv]``."""
    out = np.empty((layer.heads, len(formats)))
    ref = reference.double()
    den = ref.pow(2).sum(dim=(1, 2)).sqrt().clamp_min(1e-30)
    for j, fmt in enumerate(formats):
        rounder = precision._rounder_for(fmt, False, 0)

        def write(S: torch.Tensor, t: int, rounder: Any = rounder) -> torch.Tensor:
            rounder.round_(S, t)
            return S

        got, _ = replay(layer, write=write)
        out[:, j] = ((got.double() - ref).pow(2).sum(dim=(1, 2)).sqrt() / den).numpy()
    return out


def rule_recall(layer: Layer, memory: Any, edges: Sequence[int]) -> np.ndarray:
    """``[H, bins]``: a memory (a guarded variant) written with the head's keys and values, each pair read back with
    its own key, the mean relative error by age."""
    H, T, d = layer.k.shape
    K = _unit(layer.k).float()  # unit keys for every rule (Mamba-2's B_t are not unit)
    state = memory.init_state(H, d, layer.v.shape[-1])
    state = memory.write(state, K, layer.v)
    reads = memory.read(state, K)
    return _binned(_errors(layer, reads), age_bins(edges, T))
