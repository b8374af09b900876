"""Rows of T1-T9: the additive state, its reads, the bounds, random keys and the best gain."""

from __future__ import annotations

import numpy as np
import torch

from capacity import _random, keys, probe, theory, values, variants
from capacity.check._rows import Gain, eq, ge, mean_se


def _t2(dev, seed, rows):
    """T2: two pairs, arbitrary (non-unit) Gaussian keys, through the linear variant."""
    lin = variants.get("linear")
    g = _random.generator(seed, "check")
    B, d, dv = 512, 48, 24
    k = torch.randn(B, 2, d, generator=g).to(dev) * 1.7
    v = torch.randn(B, 2, dv, generator=g).to(dev)
    S = lin.write(lin.init_state(B, d, dv, device=dev), k, v)
    got = lin.read(S, k[:, :1])[:, 0]
    want = theory.two_pair_readout(k[:, 0].double(), k[:, 1].double(), v[:, 0].double(), v[:, 1].double())
    rel = float((got.double() - want).abs().max() / want.abs().max())
    rows.append(eq("T2", "k1 S = |k1|^2 v1 + (k1.k2) v2 (max rel. error, float32)", rel, 0.0, 1e-5))


def _t1(dev, seed, rows):
    """T1: the additive state equals K^T V, and the probe's reads equal G V."""
    lin = variants.get("linear")
    n, d, dv = 96, 32, 48
    K = keys.make("gaussian", n, d, batch=8, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=8, seed=seed, device=dev)
    S = lin.init_state(8, d, dv, device=dev)
    for start in range(0, n, 40):  # chunked writes, as the probe does them
        S = lin.write(S, K[:, start : start + 40], V[:, start : start + 40])
    KV = K.double().transpose(1, 2) @ V.double()
    rows.append(
        eq("T1", "S_n = K^T V (max rel. error)", float((S.double() - KV).abs().max() / KV.abs().max()), 0.0, 1e-5)
    )
    ds = probe.recall(lin, K, V, checkpoints=[n], per_query=True)
    GV = (K.double() @ K.double().transpose(1, 2)) @ V.double()
    brute = ((GV - V.double()) ** 2).sum(-1).cpu().numpy()  # [B, n]
    err = np.abs(ds.mse_q.isel(n=0).values - brute).max() / brute.max()
    rows.append(eq("T1", "probe reads K S_n = G V (per-query squared error, max rel.)", err, 0.0, 1e-5))


def _t3_t4(dev, seed, rows):
    """T3 and T4: unit keys, orthonormal values: signal = G_ii = 1, leak and error = crosstalk."""
    lin = variants.get("linear")
    n, d, dv = 64, 32, 64
    K = keys.make("gaussian", n, d, batch=16, seed=seed, device=dev)
    V = values.make("orthonormal", n, dv, batch=16, seed=seed, device=dev)
    ds = probe.recall(lin, K, V, checkpoints=[n], per_query=True)
    signal, leak = theory.decomposition(K.double(), V.double())
    g_ii = (signal * V.double()).sum(-1)  # G_ii, since |v_i| = 1
    rows.append(
        eq(
            "T3",
            "probe signal coefficient = G_ii (max abs. diff)",
            float(np.abs(ds.signal_q.isel(n=0).values - g_ii.cpu().numpy()).max()),
            0.0,
            1e-5,
        )
    )
    leak_e = (leak**2).sum(-1).cpu().numpy()
    rows.append(
        eq(
            "T3",
            "probe leak energy = |sum_{j!=i} G_ij v_j|^2 (max rel.)",
            float(np.abs(ds.leak_q.isel(n=0).values - leak_e).max() / leak_e.max()),
            0.0,
            1e-5,
        )
    )
    t4 = theory.crosstalk_error(K.double()).cpu().numpy()
    rows.append(
        eq(
            "T4",
            "probe mse = (|G|_F^2 - n)/n per item (max rel.)",
            float(np.abs(ds.mse.isel(n=0).values - t4).max() / t4.max()),
            0.0,
            1e-5,
        )
    )


def _bounds(dev, seed, rows):
    """T5, T6, T8: no key family beats the bounds past d; tight frames and the simplex meet them."""
    lin = variants.get("linear")
    n, d = 96, 32
    V = values.make("orthonormal", n, n, batch=8, seed=seed, device=dev)
    fams = {"gaussian": {}, "orthogonal": {}, "correlated": {"rho": 0.3}, "anisotropic": {"rank": 8}}
    for fam, params in fams.items():
        K = keys.make(fam, n, d, batch=8, seed=seed, device=dev, **params)
        mse = float(probe.recall(lin, K, V, checkpoints=[n]).mse.min())
        rows.append(ge("T5", f"{fam} keys, n = 3d: min mse >= n/d - 1", mse, theory.frame_bound(n, d), 1e-4))
        stats = keys.describe(K)
        rows.append(
            ge(
                "T6",
                f"{fam} keys, n = 3d: min max-coherence >= Welch",
                float(stats.max_coherence.min()),
                theory.welch_bound(n, d),
                1e-6,
            )
        )
        S_opt = torch.linalg.pinv(K.double()) @ V.double()  # least-squares state, [B, d, n]
        ls = float(((K.double() @ S_opt - V.double()) ** 2).sum(-1).mean(-1).min())
        rows.append(
            ge("T8", f"{fam} keys, n = 3d: least-squares state mse >= 1 - d/n", ls, theory.rank_bound(n, d), 1e-6)
        )
    K = keys.make("orthogonal", n, d, batch=8, seed=seed, device=dev)
    ds = probe.recall(lin, K, V, checkpoints=[n])
    rows.append(
        eq(
            "T5",
            "tight frame, n = 3d: mse = n/d - 1 (worst item)",
            float(np.abs(ds.mse.values - theory.frame_bound(n, d)).max()),
            0.0,
            1e-4,
        )
    )
    ds = probe.recall(Gain(d / n), K, V, checkpoints=[n])
    rows.append(
        eq(
            "T8",
            "tight frame read with gain d/n: mse = 1 - d/n (worst item)",
            float(np.abs(ds.mse.values - theory.rank_bound(n, d)).max()),
            0.0,
            1e-4,
        )
    )
    Kn = keys.make("orthogonal", d, d, batch=8, seed=seed, device=dev)
    ds = probe.recall(lin, Kn, V[:, :d], checkpoints=[d])
    rows.append(eq("T5", "orthonormal keys, n = d: mse = 0 (worst item)", float(ds.mse.max()), 0.0, 1e-5))
    simplex = keys.describe(keys.make("simplex", d + 1, d, batch=8, seed=seed, device=dev))
    rows.append(
        eq(
            "T6",
            "simplex, n = d + 1: max coherence = Welch bound (worst item)",
            float(np.abs(simplex.max_coherence - simplex.welch_bound).max()),
            0.0,
            1e-5,
        )
    )


def _random_keys(dev, seed, rows):
    """T7 and T9: random keys, against their expectations, within 3 standard errors."""
    lin = variants.get("linear")
    n, d, B = 128, 32, 128
    K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
    V = values.make("orthonormal", n, n, batch=B, seed=seed, device=dev)
    mse = torch.as_tensor(probe.recall(lin, K, V, checkpoints=[n]).mse.values[0])
    m, se = mean_se(mse)
    rows.append(
        eq("T7", "random keys: mean mse = (n - 1)/d (tolerance 3 s.e.)", m, theory.random_keys_error(n, d), 3 * se)
    )
    G = K.double() @ K.double().transpose(1, 2)
    off = G[:, ~torch.eye(n, dtype=torch.bool, device=dev)]  # [B, n(n-1)]
    m2, m4 = theory.random_coherence_moments(d)
    mean, se = mean_se((off**2).mean(-1))
    rows.append(eq("T7", "random keys: E (k_i.k_j)^2 = 1/d (tolerance 3 s.e.)", mean, m2, 3 * se))
    mean, se = mean_se((off**4).mean(-1))
    rows.append(eq("T7", "random keys: E (k_i.k_j)^4 = 3/(d(d+2)) (tolerance 3 s.e.)", mean, m4, 3 * se))
    mse = torch.as_tensor(probe.recall(Gain(theory.optimal_gain(n, d)), K, V, checkpoints=[n]).mse.values[0])
    m, se = mean_se(mse)
    rows.append(
        eq(
            "T9",
            "random keys, gain d/(d+n-1): mse = (n-1)/(d+n-1) (3 s.e.)",
            m,
            theory.optimal_gain_error(n, d),
            3 * se,
        )
    )


GROUPS = [
    (("T2",), _t2),
    (("T1",), _t1),
    (("T3", "T4"), _t3_t4),
    (("T5", "T6", "T8"), _bounds),
    (("T7", "T9"), _random_keys),
]
