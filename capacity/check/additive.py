"""Rows of T1-T9: the additive state, its reads, the bounds where they are tight, random keys, the best gain."""

from __future__ import annotations

from typing import cast

import numpy as np
import numpy.typing as npt
import torch
import xarray as xr

from lacapacity import theory, variants
from lacapacity.base import _random
from lacapacity.check._rows import Check, Gain, eq, mean_se, measured, paley_etf
from lacapacity.inputs import keys, values
from lacapacity.tasks import metrics, probe
from lacapacity.theory._common import Floats

Array = npt.NDArray[np.float64]


def _t2(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T2: two pairs, arbitrary (non-unit) Gaussian keys, through the linear variant."""

    def run() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        lin = variants.get("linear")
        g = _random.generator(seed, "check")
        B, d, dv = 512, 48, 24
        k = torch.randn(B, 2, d, generator=g).to(dev) * 1.7
        v = torch.randn(B, 2, dv, generator=g).to(dev)
        S = lin.write(lin.init_state(B, d, dv, device=dev), k, v)
        return k.double(), v.double(), lin.read(S, k[:, :1])[:, 0].double()

    k, v, got = measured("t2", run)
    want = theory.two_pair_readout(k[:, 0], k[:, 1], v[:, 0], v[:, 1])
    rel = float((got - want).abs().max() / want.abs().max())
    what = "linear variant: k1 S = |k1|^2 v1 + (k1.k2) v2 (max rel. error, float32)"
    rows.append(eq("T2", what, rel, 0.0, 1e-5, function="two_pair_readout"))


def _t1(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T1: the additive state equals K^T V, and the probe's reads equal G V."""
    lin = variants.get("linear")
    n, d, dv = 96, 32, 48
    K = keys.make("gaussian", n, d, batch=8, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=8, seed=seed, device=dev)
    S = lin.init_state(8, d, dv, device=dev)
    for start in range(0, n, 40):  # chunked writes, as the probe does them
        S = lin.write(S, K[:, start : start + 40], V[:, start : start + 40])
    KV = K.double().transpose(1, 2) @ V.double()
    rel = float((S.double() - KV).abs().max() / KV.abs().max())
    rows.append(eq("T1", "linear variant: S_n = K^T V (max rel. error)", rel, 0.0, 1e-5, function="variants.linear"))
    ds = probe.recall(lin, K, V, checkpoints=[n], per_query=True)
    GV = (K.double() @ K.double().transpose(1, 2)) @ V.double()
    brute = ((GV - V.double()) ** 2).sum(-1).cpu().numpy()  # [B, n]
    err = np.abs(ds.mse_q.isel(n=0).values - brute).max() / brute.max()
    what = "probe reads K S_n = G V (per-query squared error, max rel.)"
    rows.append(eq("T1", what, err, 0.0, 1e-5, function="probe.recall"))


def _t3_t4(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T3 and T4: unit keys, orthonormal values: signal = G_ii = 1, leak and error = crosstalk."""

    def run() -> tuple[torch.Tensor, torch.Tensor, xr.Dataset]:
        n, d, dv = 64, 32, 64
        K = keys.make("gaussian", n, d, batch=16, seed=seed, device=dev)
        V = values.make("orthonormal", n, dv, batch=16, seed=seed, device=dev)
        ds = probe.recall(variants.get("linear"), K, V, checkpoints=[n], per_query=True)
        return K.double(), V.double(), ds

    K, V, ds = measured("t3", run)
    signal, leak = theory.decomposition(K, V)
    g_ii = (signal * V).sum(-1).cpu().numpy()  # G_ii, since |v_i| = 1
    diff = float(np.abs(ds.signal_q.isel(n=0).values - g_ii).max())
    rows.append(eq("T3", "probe signal coefficient = G_ii (max abs. diff)", diff, 0.0, 1e-5, function="decomposition"))
    leak_e = (leak**2).sum(-1).cpu().numpy()
    rel = float(np.abs(ds.leak_q.isel(n=0).values - leak_e).max() / leak_e.max())
    what = "probe leak energy = |sum_{j!=i} G_ij v_j|^2 (max rel.)"
    rows.append(eq("T3", what, rel, 0.0, 1e-5, function="decomposition"))
    t4 = np.asarray(theory.crosstalk_error(K).cpu())
    rel = float(np.abs(ds.mse.isel(n=0).values - t4).max() / t4.max())
    rows.append(eq("T4", "probe mse = (|G|_F^2 - n)/n per item (max rel.)", rel, 0.0, 1e-5, function="crosstalk_error"))
    stats, n = keys.statistics(K), K.shape[1]  # the keys' statistics, as a study with key_stats stores them
    for fn, stat in (
        (theory.crosstalk_from_coherence, "mean_sq_coherence"),
        (theory.crosstalk_from_effective_rank, "effective_rank"),
    ):
        t4 = np.asarray(fn(n, stats[stat]))
        rel = float(np.abs(ds.mse.isel(n=0).values - t4).max() / t4.max())
        what = f"probe mse = T4 from the keys' {stat.replace('_', ' ')} per item (max rel.)"
        rows.append(eq("T4", what, rel, 0.0, 1e-5, function=fn.__name__))


_FAMILIES: dict[str, dict[str, float]] = {"gaussian": {}, "correlated": {"rho": 0.3}, "anisotropic": {"rank": 8}}


def _worst(x: npt.ArrayLike, target: Floats) -> float:
    """The entry of ``x`` farthest from ``target`` (the worst batch item)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    return float(x[np.argmax(np.abs(x - target))])


def _bounds(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T5, T6, T8 where they are tight: tight frames, the simplex, equiangular frames, the least-squares memory.

    For the other key families the T5 bound holds with a margin, stated in the row: their error is the bound
    plus (n/d)(frame potential ratio - 1), an exact identity between the probe and ``keys.describe``.
    """
    lin, lsq = variants.get("linear"), variants.get("lsq")
    n, d, B = 96, 32, 8

    def family(fam: str) -> tuple[Array, Array, Array]:
        K = keys.make(fam, n, d, batch=B, seed=seed, device=dev, **_FAMILIES.get(fam, {}))
        V = values.make("orthonormal", n, n, batch=B, seed=seed, device=dev)
        mse = probe.recall(lin, K, V, checkpoints=[n], decode=False).mse.values[0]  # [B]
        ls = probe.recall(lsq, K, V, checkpoints=[n], decode=False).mse.values[0]  # [B]
        sv2 = torch.linalg.svdvals(K.double()).cpu().numpy() ** 2  # [B, d]: eigenvalues of K^T K
        ridge = ((lsq.lam / (sv2 + lsq.lam)) ** 2).sum(-1) / n  # type: ignore[attr-defined]  # lsq's ridge; what the ridge lam adds to the least-squares error
        return mse, keys.describe(K).frame_potential_ratio.values, ls - ridge

    for fam in _FAMILIES:
        mse, ratio, _ = measured(("family", fam), lambda fam=fam: family(fam))  # type: ignore[misc]  # a lambda binding a loop variable by default: mypy cannot infer it
        bound = theory.frame_bound(n, d)
        lhs = mse - (n / d) * (ratio - 1.0)
        what = (
            f"{fam} keys, n = 3d: mse - (n/d)(frame potential - 1) = n/d - 1 (mse >= {mse.min() / bound:.2f} x bound)"
        )
        rows.append(eq("T5", what, _worst(lhs, bound), bound, 1e-5 * float(mse.max()), function="frame_bound"))
    mse, ratio, _ = measured(("family", "orthogonal"), lambda: family("orthogonal"))
    bound = theory.frame_bound(n, d)
    what = "tight frame (orthogonal keys), n = 3d: mse = n/d - 1 (worst item)"
    rows.append(eq("T5", what, _worst(mse, bound), bound, 1e-5, function="frame_bound"))

    def frame_coherence() -> Array:
        described = keys.describe(keys.make("orthogonal", n, d, batch=B, seed=seed, device=dev))
        return cast(Array, described.mean_sq_coherence.values)  # (xarray types a variable by name Any)

    coh, tf = measured(("coherence", "orthogonal"), frame_coherence), theory.tight_frame_coherence(n, d)
    what = "tight frame (orthogonal keys), n = 3d: mean squared coherence = (n/d - 1)/(n - 1) (worst item)"
    rows.append(eq("T5", what, _worst(coh, tf), tf, 1e-6, function="tight_frame_coherence"))

    def identity() -> tuple[float, float]:
        Kn = keys.make("orthogonal", d, d, batch=B, seed=seed, device=dev)
        V = values.make("orthonormal", d, d, batch=B, seed=seed, device=dev)
        return float(probe.recall(lin, Kn, V, checkpoints=[d]).mse.max()), float(keys.describe(Kn).max_coherence.max())

    worst, coherence = measured("orthonormal", identity)
    rows.append(
        eq(
            "T5",
            "orthonormal keys, n = d: mse = 0 (worst item)",
            worst,
            theory.frame_bound(d, d),
            1e-5,
            function="frame_bound",
        )
    )

    def etf(q: int) -> tuple[float, float]:
        K = paley_etf(q).to(torch.float32).to(dev)[None]  # [1, 2d, d]
        m = K.shape[1]
        V = values.make("orthonormal", m, m, batch=1, seed=seed, device=dev)
        mse = float(probe.recall(lin, K, V, checkpoints=[m]).mse.max())
        return mse, float(keys.describe(K).max_coherence.max())

    for q in (13, 29):
        # a lambda binding a loop variable by default: mypy cannot infer it (and mse is a float here)
        mse, coh = measured(("etf", q), lambda q=q: etf(q))  # type: ignore[misc, assignment]
        m, k = q + 1, (q + 1) // 2
        what = f"equiangular tight frame, n = 2d = {m}: mse = n/d - 1"
        rows.append(eq("T5", what, mse, theory.frame_bound(m, k), 1e-5, function="frame_bound"))
        what = f"equiangular tight frame, n = 2d = {m}: max coherence = Welch bound"
        rows.append(eq("T6", what, coh, theory.welch_bound(m, k), 1e-6, function="welch_bound"))

    def simplex() -> Array:
        described = keys.describe(keys.make("simplex", d + 1, d, batch=B, seed=seed, device=dev))
        return cast(Array, described.max_coherence.values)  # (xarray types a variable by name Any)

    coh = measured("simplex", simplex)
    welch = theory.welch_bound(d + 1, d)
    what = "simplex, n = d + 1: max coherence = Welch bound (worst item)"
    rows.append(eq("T6", what, _worst(coh, welch), welch, 1e-6, function="welch_bound"))
    what = "orthonormal keys, n = d: max coherence = Welch bound = 0"
    rows.append(eq("T6", what, coherence, theory.welch_bound(d, d), 1e-6, function="welch_bound"))

    for fam in ("orthogonal", *_FAMILIES):
        _, _, ls = measured(("family", fam), lambda fam=fam: family(fam))  # type: ignore[misc]  # a lambda binding a loop variable by default: mypy cannot infer it
        rb = theory.rank_bound(n, d)
        what = f"lsq memory, {fam} keys, n = 3d: mse - ridge term = 1 - d/n (worst item)"
        rows.append(eq("T8", what, _worst(ls, rb), rb, 1e-5, function="rank_bound"))

    def gain() -> Array:
        K = keys.make("orthogonal", n, d, batch=B, seed=seed, device=dev)
        V = values.make("orthonormal", n, n, batch=B, seed=seed, device=dev)
        return cast(
            Array, probe.recall(Gain(d / n), K, V, checkpoints=[n], decode=False).mse.values[0]
        )  # (xarray types a variable by name Any)

    rb = theory.rank_bound(n, d)
    what = "tight frame read with gain d/n, n = 3d: mse = 1 - d/n (worst item)"
    rows.append(eq("T8", what, _worst(measured("gain", gain), rb), rb, 1e-5, function="rank_bound"))


def _capacities(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T5, T7, T8 as capacities: the largest n at error <= eps, measured by ``metrics.capacity`` on the probe's curve."""
    eps = 0.5

    def tight(d: int) -> Array:  # tight frames are built for one n: one frame per checkpoint
        grid = list(range(d + d // 4, d + 3 * d // 4 + 1))
        mse = np.stack(
            [
                probe.recall(
                    variants.get("linear"),
                    keys.make("orthogonal", m, d, batch=4, seed=seed, device=dev),
                    values.make("orthonormal", m, m, batch=4, seed=seed, device=dev),
                    checkpoints=[m],
                    decode=False,
                ).mse.values[0]
                for m in grid
            ]
        )  # [C, B]
        ds = xr.Dataset({"mse": (("n", "batch"), mse)}, coords={"n": grid})
        return metrics.capacity(ds, metric="mse", threshold=eps).values

    d = 32
    caps = measured(("tight", d), lambda: tight(d))
    want = theory.capacity_tight_frame(eps, d)
    what = f"tight frames, d = {d}: capacity at mse <= {eps} = d (1 + eps) (worst item)"
    rows.append(eq("T5", what, _worst(caps, want), want, 1e-3, function="capacity_tight_frame"))

    def random_keys(d: int, B: int) -> Array:
        grid = list(range(d // 3, d + 1))  # around 1 + eps d
        K = keys.make("gaussian", grid[-1], d, batch=B, seed=seed, device=dev)
        V = values.make("orthonormal", grid[-1], grid[-1], batch=B, seed=seed, device=dev)
        ds = probe.recall(variants.get("linear"), K, V, checkpoints=grid, decode=False)
        return metrics.capacity(ds, metric="mse", threshold=eps).values  # [B], one per key draw

    d, B = 64, 128
    m, se = mean_se(measured(("random", d, B), lambda: random_keys(d, B)))
    what = f"random keys, d = {d}: capacity at mse <= {eps} = 1 + eps d (mean of {B} draws, 3 s.e.)"
    rows.append(eq("T7", what, m, theory.capacity_random_keys(eps, d), 3 * se, function="capacity_random_keys"))

    def lsq(d: int) -> Array:
        grid = list(range(d + d // 2, 2 * d + d // 2 + 1))  # around d / (1 - eps) = 2d
        K = keys.make("gaussian", grid[-1], d, batch=4, seed=seed, device=dev)
        V = values.make("orthonormal", grid[-1], grid[-1], batch=4, seed=seed, device=dev)
        ds = probe.recall(variants.get("lsq"), K, V, checkpoints=grid, decode=False)
        return metrics.capacity(ds, metric="mse", threshold=eps).values

    d = 32
    caps = measured(("lsq", d), lambda: lsq(d))
    want = theory.rank_bound_capacity(eps, d)
    what = f"lsq memory, random keys, d = {d}: capacity at mse <= {eps} = d / (1 - eps) (worst item)"
    rows.append(eq("T8", what, _worst(caps, want), want, 1e-2, function="rank_bound_capacity"))


def _random_keys(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T7 and T9: random keys, against their expectations, within 3 standard errors."""
    n, d, B = 128, 32, 128

    def run() -> tuple[torch.Tensor, torch.Tensor, Array, Array, torch.Tensor, torch.Tensor]:
        K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
        V = values.make("orthonormal", n, n, batch=B, seed=seed, device=dev)
        ds = probe.recall(variants.get("linear"), K, V, checkpoints=[n], decode=False)
        G = K.double() @ K.double().transpose(1, 2)
        off = G[:, ~torch.eye(n, dtype=torch.bool, device=dev)]  # [B, n(n-1)]
        return K, V, ds.mse.values[0], ds.signal.values[0], (off**2).mean(-1), (off**4).mean(-1)

    K, V, mse, signal, p2, p4 = measured("t7", run)
    m, se = mean_se(mse)
    what = "random keys: mean mse = (n - 1)/d (3 s.e.)"
    rows.append(eq("T7", what, m, theory.random_keys_error(n, d), 3 * se, function="random_keys_error"))
    m2, m4 = theory.random_coherence_moments(d)
    mean, se = mean_se(p2)
    rows.append(
        eq("T7", "random keys: E (k_i.k_j)^2 = 1/d (3 s.e.)", mean, m2, 3 * se, function="random_coherence_moments")
    )
    mean, se = mean_se(p4)
    what = "random keys: E (k_i.k_j)^4 = 3/(d(d+2)) (3 s.e.)"
    rows.append(eq("T7", what, mean, m4, 3 * se, function="random_coherence_moments"))
    # the gain minimising the measured error, sum_i r_i.v_i / sum_i |r_i|^2, from the plain read's signal and mse:
    # with |v_i| = 1, r_i.v_i = signal_i and |r_i|^2 = mse_i + 2 signal_i - 1 (means over the n pairs, per draw)
    rr = mse + 2 * signal - 1
    c = signal.mean() / rr.mean()
    _, se = mean_se((signal - c * rr) / rr.mean())  # delta method for the ratio of means
    what = "random keys: measured error-minimising gain = d/(d+n-1) (3 s.e.)"
    rows.append(eq("T9", what, c, theory.optimal_gain(n, d), 3 * se, function="optimal_gain"))
    gain = theory.optimal_gain(n, d)
    mse = measured(
        ("gain", gain),
        lambda: probe.recall(Gain(gain), K, V, checkpoints=[n], decode=False).mse.values[0],
    )
    m, se = mean_se(mse)
    what = "random keys, gain d/(d+n-1): mse = (n-1)/(d+n-1) (3 s.e.)"
    rows.append(eq("T9", what, m, theory.optimal_gain_error(n, d), 3 * se, function="optimal_gain_error"))


GROUPS = [
    (("T2",), _t2),
    (("T1",), _t1),
    (("T3", "T4"), _t3_t4),
    (("T5", "T6", "T8"), _bounds),
    (("T5", "T7", "T8"), _capacities),
    (("T7", "T9"), _random_keys),
]
