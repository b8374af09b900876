"""Rows of T14-T20: low-precision states (``capacity.precision``) and head layouts (``capacity.heads``).

Each row measures the package's wrappers on random unit keys and values and compares with the closed form of
``capacity.theory`` within 3 standard errors over the batch (each sized so that a 3% error in the formula fails).
The deviation of a state is measured through reads: the wrapped memory and the float32 memory read the d unit
basis vectors, so the mean squared difference of the reads is ||S_stored - S_float32||_F^2 / d, the expected
deviation of a read by a random unit query.
"""

from __future__ import annotations

import torch

from capacity import heads, keys, precision, probe, theory, values, variants
from capacity.check._rows import eq, mean_se


def _pairs(n, d, dv, B, seed, dev):
    K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=B, seed=seed, device=dev)
    return K, V


def _deviation(label, dtype, rounding, n, d, dv, B, seed, dev):
    """Per item: ||S_stored - S_float32||_F^2 / d after n writes, through the wrapper's and the memory's reads."""
    K, V = _pairs(n, d, dv, B, seed, dev)
    base = variants.resolve(label)
    mem = precision.stored(base, dtype, rounding, seed=seed)
    eye = torch.eye(d, device=dev).expand(B, d, d)
    ref = base.read(base.write(base.init_state(B, d, dv, device=dev), K, V), eye)
    got = mem.read(mem.write(mem.init_state(B, d, dv, device=dev), K, V), eye)
    return ((got.double() - ref.double()) ** 2).sum(-1).mean(-1)  # [B]


def _t14(dev, seed, rows):
    """T14: one rounding of the finished additive state."""
    n, d, B = 1024, 32, 128
    for rounding, sr in (("final", False), ("final+stochastic", True)):
        m, se = mean_se(_deviation("linear", "bfloat16", rounding, n, d, d, B, seed, dev))
        want = theory.final_rounding_error(n, d, d, "bfloat16", stochastic=sr)
        rows.append(
            eq("T14", f"linear d = dv = {d}, n = {n}, bfloat16 {rounding}: deviation (3 s.e.)", m, want, 3 * se)
        )


def _t15(dev, seed, rows):
    """T15: the additive state rounded after every write, before the stall (u^2 n = 1/32, 1/128)."""
    for rounding, sr, n, d, B in (("step", False, 2048, 32, 128), ("step+stochastic", True, 512, 32, 128)):
        m, se = mean_se(_deviation("linear", "bfloat16", rounding, n, d, d, B, seed, dev))
        want = theory.step_rounding_error(n, d, d, "bfloat16", stochastic=sr)
        rows.append(
            eq("T15", f"linear d = dv = {d}, n = {n}, bfloat16 {rounding}: deviation (3 s.e.)", m, want, 3 * se)
        )


def _t16(dev, seed, rows):
    """T16: where the deviation reaches 1/128 of the crosstalk (bfloat16, round-to-nearest, u^2 n about 0.1)."""
    d, B, r = 32, 256, 1 / 128
    n = int(round(float(theory.rounding_crossover(d, d, "bfloat16", stochastic=False, ratio=r))))
    m, se = mean_se(_deviation("linear", "bfloat16", "step", n, d, d, B, seed, dev) * d / (n - 1) / r)
    what = f"linear d = dv = {d}, bfloat16 step: deviation / (crosstalk / 128) at n* = {n} (3 s.e.)"
    rows.append(eq("T16", what, m, 1.0, 3 * se))


def _t17(dev, seed, rows):
    """T17: round-to-nearest's lost and kept parts of a write at u^2 n = 1/16 (bfloat16), 32 writes measured."""
    n, d, B, extra = 4096, 32, 64, 32
    K, V = _pairs(n + extra, d, d, B, seed, dev)
    mem = precision.stored(variants.get("linear"), "bfloat16", "step")
    st = mem.write(mem.init_state(B, d, d, device=dev), K[:, :n], V[:, :n])
    lost, kept = [], []
    for t in range(n, n + extra):
        before = st.inner.clone()
        st = mem.write(st, K[:, t : t + 1], V[:, t : t + 1])
        inc = K[:, t, :, None] * V[:, t, None, :]  # [B, d, dv]: the write's increment k^T v
        change = st.inner - before
        lost.append((change == 0).double().mean((1, 2)))  # [B]
        kept.append((change * inc).double().sum((1, 2)) / (inc.double() ** 2).sum((1, 2)))
    m, se = mean_se(torch.stack(lost).mean(0))
    want = theory.stall_fraction(n + extra / 2 + 0.5, d, d, "bfloat16")
    rows.append(
        eq("T17", f"linear d = dv = {d}, bfloat16, write {n}: entries left unchanged (3 s.e.)", m, want, 3 * se)
    )
    m, se = mean_se(torch.stack(kept).mean(0))
    want = theory.retained_fraction(n + extra / 2 + 0.5, d, d, "bfloat16")
    rows.append(
        eq("T17", f"linear d = dv = {d}, bfloat16, write {n}: part of the increment kept (3 s.e.)", m, want, 3 * se)
    )


def _t18(dev, seed, rows):
    """T18: the decay memory's bounded step-rounding deviation."""
    d, B, a, n = 32, 64, 0.95, 512
    m, se = mean_se(_deviation(f"decay(alpha={a})", "bfloat16", "step", n, d, d, B, seed, dev))
    want = theory.decay_rounding_floor(d, d, "bfloat16", a)
    rows.append(
        eq(
            "T18",
            f"decay alpha = {a}, d = dv = {d}, bfloat16 step, n = {n}: deviation = floor (3 s.e.)",
            m,
            want,
            3 * se,
        )
    )


def _t19(dev, seed, rows):
    """T19: the delta rule's error feedback bounds its step-rounding deviation."""
    d, B, n = 32, 64, 512
    m, se = mean_se(_deviation("delta(beta=1.0)", "bfloat16", "step", n, d, d, B, seed, dev))
    want = theory.delta_rounding_floor(d, d, "bfloat16", beta=1.0)
    rows.append(
        eq("T19", f"delta beta = 1, d = dv = {d}, bfloat16 step, n = {n}: deviation = floor (3 s.e.)", m, want, 3 * se)
    )


def _t20(dev, seed, rows):
    """T20: the additive memory in heads: mean error (n - 1) min(H, HV) / d for random keys."""
    n, d, B = 128, 64, 128
    K, V = _pairs(n, d, d, B, seed, dev)
    for H, HV in ((4, 4), (2, 8), (8, 2)):
        mem = heads.split(variants.get("linear"), heads=H, value_heads=HV)
        m, se = mean_se(torch.as_tensor(probe.recall(mem, K, V, checkpoints=[n], decode=False).mse.values[0]))
        want = theory.heads_random_keys_error(n, d, heads=H, value_heads=HV)
        rows.append(
            eq("T20", f"linear in H = {H} key, HV = {HV} value heads, d = {d}, n = {n}: mse (3 s.e.)", m, want, 3 * se)
        )


GROUPS = [
    (("T14",), _t14),
    (("T15",), _t15),
    (("T16",), _t16),
    (("T17",), _t17),
    (("T18",), _t18),
    (("T19",), _t19),
    (("T20",), _t20),
]
