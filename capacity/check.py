"""``capacity check``: every closed form and bound of docs/theory.md against a measurement.

Each check compares what the library computes (the probe, the registered variants, the kernels' oracle)
with an independent closed form or brute-force computation, and states its tolerance.

>>> from capacity.check import run_checks
>>> rows = run_checks(seed=0)
>>> all(r.passed for r in rows)
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from capacity import _random, _validate, keys, metrics, probe, theory, values, variants
from capacity.errors import CapacityError
from capacity.kernels import reference

__all__ = ["Check", "run_checks", "format_table"]


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


def _eq(theorem, what, measured, expected, tol) -> Check:
    return Check(
        theorem, what, float(measured), float(expected), "=", float(tol), bool(abs(measured - expected) <= tol)
    )


def _ge(theorem, what, measured, bound, tol) -> Check:
    return Check(theorem, what, float(measured), float(bound), ">=", float(tol), bool(measured >= bound - tol))


def _mean_se(x: torch.Tensor) -> tuple[float, float]:
    x = x.double().cpu()
    return float(x.mean()), float(x.std() / math.sqrt(x.numel()))


class _Gain:
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
    rows.append(_eq("T2", "k1 S = |k1|^2 v1 + (k1.k2) v2 (max rel. error, float32)", rel, 0.0, 1e-5))


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
        _eq("T1", "S_n = K^T V (max rel. error)", float((S.double() - KV).abs().max() / KV.abs().max()), 0.0, 1e-5)
    )
    ds = probe.recall(lin, K, V, checkpoints=[n], per_query=True)
    GV = (K.double() @ K.double().transpose(1, 2)) @ V.double()
    brute = ((GV - V.double()) ** 2).sum(-1).cpu().numpy()  # [B, n]
    err = np.abs(ds.mse_q.isel(n=0).values - brute).max() / brute.max()
    rows.append(_eq("T1", "probe reads K S_n = G V (per-query squared error, max rel.)", err, 0.0, 1e-5))


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
        _eq(
            "T3",
            "probe signal coefficient = G_ii (max abs. diff)",
            float(np.abs(ds.signal_q.isel(n=0).values - g_ii.cpu().numpy()).max()),
            0.0,
            1e-5,
        )
    )
    leak_e = (leak**2).sum(-1).cpu().numpy()
    rows.append(
        _eq(
            "T3",
            "probe leak energy = |sum_{j!=i} G_ij v_j|^2 (max rel.)",
            float(np.abs(ds.leak_q.isel(n=0).values - leak_e).max() / leak_e.max()),
            0.0,
            1e-5,
        )
    )
    t4 = theory.crosstalk_error(K.double()).cpu().numpy()
    rows.append(
        _eq(
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
        rows.append(_ge("T5", f"{fam} keys, n = 3d: min mse >= n/d - 1", mse, theory.frame_bound(n, d), 1e-4))
        stats = keys.describe(K)
        rows.append(
            _ge(
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
            _ge("T8", f"{fam} keys, n = 3d: least-squares state mse >= 1 - d/n", ls, theory.rank_bound(n, d), 1e-6)
        )
    K = keys.make("orthogonal", n, d, batch=8, seed=seed, device=dev)
    ds = probe.recall(lin, K, V, checkpoints=[n])
    rows.append(
        _eq(
            "T5",
            "tight frame, n = 3d: mse = n/d - 1 (worst item)",
            float(np.abs(ds.mse.values - theory.frame_bound(n, d)).max()),
            0.0,
            1e-4,
        )
    )
    ds = probe.recall(_Gain(d / n), K, V, checkpoints=[n])
    rows.append(
        _eq(
            "T8",
            "tight frame read with gain d/n: mse = 1 - d/n (worst item)",
            float(np.abs(ds.mse.values - theory.rank_bound(n, d)).max()),
            0.0,
            1e-4,
        )
    )
    Kn = keys.make("orthogonal", d, d, batch=8, seed=seed, device=dev)
    ds = probe.recall(lin, Kn, V[:, :d], checkpoints=[d])
    rows.append(_eq("T5", "orthonormal keys, n = d: mse = 0 (worst item)", float(ds.mse.max()), 0.0, 1e-5))
    simplex = keys.describe(keys.make("simplex", d + 1, d, batch=8, seed=seed, device=dev))
    rows.append(
        _eq(
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
    m, se = _mean_se(mse)
    rows.append(
        _eq("T7", "random keys: mean mse = (n - 1)/d (tolerance 3 s.e.)", m, theory.random_keys_error(n, d), 3 * se)
    )
    G = K.double() @ K.double().transpose(1, 2)
    off = G[:, ~torch.eye(n, dtype=torch.bool, device=dev)]  # [B, n(n-1)]
    m2, m4 = theory.random_coherence_moments(d)
    mean, se = _mean_se((off**2).mean(-1))
    rows.append(_eq("T7", "random keys: E (k_i.k_j)^2 = 1/d (tolerance 3 s.e.)", mean, m2, 3 * se))
    mean, se = _mean_se((off**4).mean(-1))
    rows.append(_eq("T7", "random keys: E (k_i.k_j)^4 = 3/(d(d+2)) (tolerance 3 s.e.)", mean, m4, 3 * se))
    mse = torch.as_tensor(probe.recall(_Gain(theory.optimal_gain(n, d)), K, V, checkpoints=[n]).mse.values[0])
    m, se = _mean_se(mse)
    rows.append(
        _eq(
            "T9",
            "random keys, gain d/(d+n-1): mse = (n-1)/(d+n-1) (3 s.e.)",
            m,
            theory.optimal_gain_error(n, d),
            3 * se,
        )
    )


def _argmax(dev, seed, rows):
    """T10: argmax recall past d; the Gaussian prediction is conservative (see theory.argmax_recall)."""
    lin = variants.get("linear")
    for d in (32, 64):
        n = 4 * d
        K = keys.make("gaussian", n, d, batch=32, seed=seed, device=dev)
        V = values.make("gaussian", n, d, batch=32, seed=seed, device=dev)
        ds = probe.recall(lin, K, V, checkpoints=list(range(2, n + 1, 2)))
        rec = ds.recall.mean("batch")
        measured = float(rec.n[rec >= 0.9].max())
        predicted = theory.argmax_capacity(d, d, tau=0.9)
        ratio = measured / predicted
        rows.append(
            Check(
                "T10",
                f"d = dv = {d}: 90%-recall capacity / prediction, in [1, 1.6]",
                ratio,
                1.3,
                "in",
                0.3,
                bool(1.0 <= ratio <= 1.6),
            )
        )
        rows.append(
            _ge("T10", f"d = dv = {d}: measured 90%-recall capacity > d (retrieval past d)", measured, d + 1, 0.0)
        )
        cap = float(metrics.capacity(ds.mean("batch"), metric="recall", threshold=0.9))
        ratio = cap / theory.argmax_capacity_refined(d, d, tau=0.9)
        what = f"d = dv = {d}: 90% capacity / refined prediction, in [0.9, 1.1]"
        rows.append(Check("T10", what, ratio, 1.0, "in", 0.1, bool(abs(ratio - 1.0) <= 0.1)))


def _t11(dev, seed, rows):
    """T11: decay, the oracle recurrence against the closed form."""
    n, d, dv, a = 48, 24, 16, 0.93
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=4, seed=seed, device=dev)
    S = reference.recurrence(K, V, mode="decay", gate=torch.full((4, n), a, device=dev), normalize=False)
    want = theory.decay_readout(K.double(), V.double(), a)
    rows.append(
        _eq(
            "T11",
            "decay alpha=0.93: reads = sum_j alpha^(n-j) G_ij v_j (max rel.)",
            float(((K.double() @ S.double()) - want).abs().max() / want.abs().max()),
            0.0,
            1e-5,
        )
    )
    ds = probe.recall(variants.get("decay", alpha=a), K, V, checkpoints=[n], per_query=True)
    brute = ((want - V.double()) ** 2).sum(-1).cpu().numpy()  # [B, n]
    rows.append(
        _eq(
            "T11",
            "decay variant via probe: per-query error = closed form (max rel.)",
            float(np.abs(ds.mse_q.isel(n=0).values - brute).max() / brute.max()),
            0.0,
            1e-5,
        )
    )


def _t12(dev, seed, rows):
    """T12: delta rule, b = 1: the last key reads back exactly; orthonormal keys all do (n <= d)."""
    n, d, dv = 48, 24, 16
    V = values.make("gaussian", n, dv, batch=4, seed=seed, device=dev)
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    S = reference.recurrence(K, V, mode="delta", beta=torch.ones(4, n, device=dev), normalize=False)
    rows.append(
        _eq(
            "T12",
            "delta b = 1: last key reads back its value (max abs.)",
            float((K[:, -1:] @ S - V[:, -1:]).abs().max()),
            0.0,
            1e-5,
        )
    )
    delta = variants.get("delta", beta=1.0)
    ds = probe.recall(delta, K, V, checkpoints=[n], per_query=True)
    rows.append(
        _eq(
            "T12",
            "delta variant via probe, b = 1: last key's squared error",
            float(ds.mse_q.isel(n=0, query=n - 1).max()),
            0.0,
            1e-10,
        )
    )
    Ko = keys.make("orthogonal", d, d, batch=4, seed=seed, device=dev)
    S = reference.recurrence(Ko, V[:, :d], mode="delta", beta=torch.ones(4, d, device=dev), normalize=False)
    rows.append(
        _eq(
            "T12",
            "delta b = 1, orthonormal keys, n = d: all read back (max abs.)",
            float((Ko @ S - V[:, :d]).abs().max()),
            0.0,
            1e-5,
        )
    )
    ds = probe.recall(delta, Ko, V[:, :d], checkpoints=[d])
    rows.append(
        _eq("T12", "delta variant via probe, orthonormal keys, n = d: worst mse", float(ds.mse.max()), 0.0, 1e-10)
    )


def _t12_random(dev, seed, rows):
    """T12: the delta rule with random unit keys against theory.delta_rule_error (exact expectation)."""
    n, d, dv, B = 128, 32, 16, 64
    K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=B, seed=seed, device=dev)
    for beta, c in ((0.5, 64), (1.0, 128)):
        ds = probe.recall(variants.get("delta", beta=beta), K, V, checkpoints=[1, c], decode=False)
        if beta != 1.0:
            first = float(np.abs(ds.mse.isel(n=0).values - theory.delta_rule_error(1, d, beta=beta)).max())
            rows.append(_eq("T12", f"delta b = {beta}, n = 1: mse = (1 - b)^2 (worst item)", first, 0.0, 1e-6))
        m, se = _mean_se(torch.as_tensor(ds.mse.isel(n=1).values))
        what = f"delta b = {beta}, d = {d}, n = {c}: mean mse = theory (3 s.e.)"
        rows.append(_eq("T12", what, m, theory.delta_rule_error(c, d, beta=beta), 3 * se))


def _t13(dev, seed, rows):
    """T13: softmax attention keeps every pair: exact as the scale grows for distinct keys."""
    n, d = 64, 64
    K = keys.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    V = values.make("gaussian", n, d, batch=4, seed=seed, device=dev)
    out = torch.softmax(200.0 * K.double() @ K.double().transpose(1, 2), dim=-1) @ V.double()
    rows.append(
        _eq(
            "T13",
            "softmax scale = 200, distinct unit keys: reads = values (max abs.)",
            float((out - V.double()).abs().max()),
            0.0,
            1e-6,
        )
    )
    ds = probe.recall(variants.get("softmax", scale=200.0), K, V, checkpoints=[n])
    rows.append(_eq("T13", "softmax variant via probe, scale = 200: worst mse", float(ds.mse.max()), 0.0, 1e-10))
    brute = (
        ((torch.softmax(8.0 * K.double() @ K.double().transpose(1, 2), dim=-1) @ V.double() - V.double()) ** 2)
        .sum(-1)
        .mean(-1)
        .cpu()
        .numpy()
    )
    ds = probe.recall(variants.get("softmax", scale=8.0), K, V, checkpoints=[n])
    rows.append(
        _eq(
            "T13",
            "softmax variant via probe, scale = 8: mse = brute force (max rel.)",
            float(np.abs(ds.mse.isel(n=0).values - brute).max() / brute.max()),
            0.0,
            1e-5,
        )
    )
    rows.append(
        _eq(
            "T13",
            "softmax variant via probe: cache after n pairs = n (d + dv)",
            float(ds.attrs["state_numel"]),
            float(theory.bill(n, d, d)["softmax_cache"]),
            0.0,
        )
    )
    n_even = int(theory.break_even_n(d))  # d/2: a cache of n_even keys and values holds as many numbers as the state
    state = variants.get("linear").init_state(1, d, d, device=dev).numel()
    ds = probe.recall(variants.get("softmax", scale=8.0), K[:1, :n_even], V[:1, :n_even], checkpoints=[n_even])
    rows.append(
        _eq(
            "T13",
            "softmax cache at break-even n = d/2 (d = dv = 64) = linear state d dv",
            float(ds.attrs["state_numel"]),
            state,
            0,
        )
    )


_GROUPS = [
    (("T2",), _t2),
    (("T1",), _t1),
    (("T3", "T4"), _t3_t4),
    (("T5", "T6", "T8"), _bounds),
    (("T7", "T9"), _random_keys),
    (("T10",), _argmax),
    (("T11",), _t11),
    (("T12",), _t12),
    (("T12",), _t12_random),
    (("T13",), _t13),
]


def run_checks(*, device=None, seed: int = 0, only=None) -> list[Check]:
    """Run the checks (all, or those of the theorems in ``only``, e.g. ``["T5", "T7"]``); returns the rows."""
    dev = _validate.device(device)
    known = [t for thms, _ in _GROUPS for t in thms]
    wanted = set(known) if only is None else set(only)
    if not wanted:
        raise CapacityError(f"no theorem selected; --only takes a comma-separated list of {', '.join(known)}")
    unknown = sorted(wanted - set(known))
    if unknown:
        raise CapacityError(f"unknown theorem(s) {', '.join(unknown)}; known: {', '.join(known)}")
    rows: list[Check] = []
    for thms, group in _GROUPS:
        if wanted & set(thms):
            group(dev, seed, rows)
    return [r for r in rows if r.theorem in wanted]


def format_table(rows: list[Check]) -> str:
    """The rows as a fixed-width text table, with a summary line."""
    head = f"{'':4} {'thm':4} {'check':66} {'measured':>12} {'rel':>3} {'expected':>12} {'tol':>9}"
    lines = [head, "-" * len(head)]
    for r in rows:
        mark = "ok" if r.passed else "FAIL"
        lines.append(
            f"{mark:4} {r.theorem:4} {r.what[:66]:66} {r.measured:12.6g} {r.relation:>3} {r.expected:12.6g} {r.tolerance:9.2g}"
        )
    failed = sum(not r.passed for r in rows)
    lines.append(f"{len(rows) - failed} of {len(rows)} checks hold" + (f"; {failed} FAILED" if failed else ""))
    return "\n".join(lines)
