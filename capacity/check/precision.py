"""Rows of T14-T20: low-precision states (``lacapacity.variants.precision``) and head layouts (``lacapacity.variants.heads``).

Each row measures the package's wrappers on random unit keys and values and compares with the closed form of
``lacapacity.theory`` within 3 standard errors over the batch (each sized so that a 3% error in the formula fails).
The deviation of a state is measured through reads: the wrapped memory and the float32 memory read the d unit
basis vectors, so the mean squared difference of the reads is ||S_stored - S_float32||_F^2 / d, the expected
deviation of a read by a random unit query.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

import torch

from lacapacity import theory, variants
from lacapacity.check._rows import Check, eq, mean_se, measured
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.theory._common import Floats
from lacapacity.variants import heads, precision


def _pairs(n: int, d: int, dv: int, B: int, seed: int, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Random unit keys ``[B, n, d]`` and values ``[B, n, dv]``."""
    K = keys.make("gaussian", n, d, batch=B, seed=seed, device=dev)
    V = values.make("gaussian", n, dv, batch=B, seed=seed, device=dev)
    return K, V


def _deviation(
    label: str, dtype: str, rounding: str, n: int, d: int, dv: int, B: int, seed: int, dev: torch.device
) -> torch.Tensor:
    """Per item: ||S_stored - S_float32||_F^2 / d after n writes, through the wrapper's and the memory's reads
    (measured once per ``run_checks`` cache)."""
    key = ("deviation", label, dtype, rounding, n, d, dv, B, seed)
    return measured(key, partial(_measure_deviation, label, dtype, rounding, n, d, dv, B, seed, dev))


def _measure_deviation(
    label: str, dtype: str, rounding: str, n: int, d: int, dv: int, B: int, seed: int, dev: torch.device
) -> torch.Tensor:
    K, V = _pairs(n, d, dv, B, seed, dev)
    base = variants.resolve(label)
    mem = precision.stored(base, dtype, rounding, seed=seed)
    eye = torch.eye(d, device=dev).expand(B, d, d)
    ref = base.read(base.write(base.init_state(B, d, dv, device=dev), K, V), eye)
    got = mem.read(mem.write(mem.init_state(B, d, dv, device=dev), K, V), eye)
    return ((got.double() - ref.double()) ** 2).sum(-1).mean(-1)  # [B]


def _additive_deviation(
    theorem: str,
    function: str,
    cases: Iterable[tuple[str, bool, int, int, int]],
    dev: torch.device,
    seed: int,
    rows: list[Check],
) -> None:
    """Rows holding the additive state's measured deviation (``_deviation``) to ``theory.<function>`` for each
    ``(rounding, stochastic, n, d, B)`` of ``cases``."""
    for rounding, sr, n, d, B in cases:
        m, se = mean_se(_deviation("linear", "bfloat16", rounding, n, d, d, B, seed, dev))
        want = getattr(theory, function)(n, d, d, "bfloat16", stochastic=sr)
        what = f"linear d = dv = {d}, n = {n}, bfloat16 {rounding}: deviation (3 s.e.)"
        rows.append(eq(theorem, what, m, want, 3 * se, function=function))


def _t14(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T14: one rounding of the finished additive state."""
    cases = (("final", False, 1024, 32, 1024), ("final+stochastic", True, 1024, 32, 1024))
    _additive_deviation("T14", "final_rounding_error", cases, dev, seed, rows)


def _t15(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T15: the additive state rounded after every write, before the stall (u^2 n = 1/32, 1/128)."""
    cases = (("step", False, 2048, 32, 128), ("step+stochastic", True, 512, 32, 128))
    _additive_deviation("T15", "step_rounding_error", cases, dev, seed, rows)


def _t16(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T16: where the deviation reaches 1/128 of the crosstalk (bfloat16, round-to-nearest, u^2 n about 0.1)."""
    d, B, r = 32, 256, 1 / 128
    n = int(round(float(theory.rounding_crossover(d, d, "bfloat16", stochastic=False, ratio=r))))
    m, se = mean_se(_deviation("linear", "bfloat16", "step", n, d, d, B, seed, dev) * d / (n - 1) / r)
    what = f"linear d = dv = {d}, bfloat16 step: deviation / (crosstalk / 128) at n* = {n} (3 s.e.)"
    rows.append(eq("T16", what, m, 1.0, 3 * se, function="rounding_crossover"))


def _stalls(n: int, d: int, B: int, extra: int, seed: int, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """T17's measurement: per item [B], the fraction of state entries a write left unchanged and the part of the
    write's increment kept, each averaged over the ``extra`` writes after the first ``n``."""
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
    return torch.stack(lost).mean(0), torch.stack(kept).mean(0)


def _t17(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T17: round-to-nearest's lost and kept parts of a write at u^2 n = 1/16 (bfloat16), 32 writes measured."""
    n, d, B, extra = 4096, 32, 64, 32
    lost, kept = measured(("stall", n, d, B, extra, seed), partial(_stalls, n, d, B, extra, seed, dev))
    m, se = mean_se(lost)
    want = theory.stall_fraction(n + extra / 2 + 0.5, d, d, "bfloat16")
    rows.append(
        eq(
            "T17",
            f"linear d = dv = {d}, bfloat16, write {n}: entries left unchanged (3 s.e.)",
            m,
            want,
            3 * se,
            function="stall_fraction",
        )
    )
    m, se = mean_se(kept)
    want = theory.retained_fraction(n + extra / 2 + 0.5, d, d, "bfloat16")
    rows.append(
        eq(
            "T17",
            f"linear d = dv = {d}, bfloat16, write {n}: part of the increment kept (3 s.e.)",
            m,
            want,
            3 * se,
            function="retained_fraction",
        )
    )


def _t18(dev: torch.device, seed: int, rows: list[Check]) -> None:
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
            function="decay_rounding_floor",
        )
    )


def _t19(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T19: the delta rule's error feedback bounds its step-rounding deviation."""
    d, B, n = 32, 256, 512
    m, se = mean_se(_deviation("delta(beta=1.0)", "bfloat16", "step", n, d, d, B, seed, dev))
    want = theory.delta_rounding_floor(d, d, "bfloat16", beta=1.0)
    rows.append(
        eq(
            "T19",
            f"delta beta = 1, d = dv = {d}, bfloat16 step, n = {n}: deviation = floor (3 s.e.)",
            m,
            want,
            3 * se,
            function="delta_rounding_floor",
        )
    )


def _heads_mse(H: int, HV: int, K: torch.Tensor, V: torch.Tensor, n: int) -> torch.Tensor:
    """Per item [B]: the additive memory split into H key and HV value heads, its read error after n writes."""
    mem = heads.split(variants.get("linear"), heads=H, value_heads=HV)
    return torch.as_tensor(probe.recall(mem, K, V, checkpoints=[n], decode=False).mse.values[0])


def _t20(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T20: the additive memory in heads: mean error (n - 1) min(H, HV) / d for random keys."""
    n, d, B = 128, 64, 128
    K, V = _pairs(n, d, d, B, seed, dev)
    eps = 0.25
    for H, HV in ((4, 4), (2, 8), (8, 2)):
        m, se = mean_se(measured(("heads", H, HV, n, d, B, seed), partial(_heads_mse, H, HV, K, V, n)))
        want = theory.heads_random_keys_error(n, d, heads=H, value_heads=HV)
        layout = f"linear in H = {H} key, HV = {HV} value heads, d = {d}"
        rows.append(eq("T20", f"{layout}, n = {n}: mse (3 s.e.)", m, want, 3 * se, function="heads_random_keys_error"))
        if (H, HV) == (2, 8):
            # the single-head dimension with the same error: T7's (n - 1)/d_eff at d_eff = heads_effective_d
            d_eff = theory.heads_effective_d(d, heads=H, value_heads=HV)
            t7 = theory.random_keys_error(n, d_eff)
            rows.append(
                eq(
                    "T20",
                    f"{layout}, n = {n}: mse = T7 at d / min(H, HV) (3 s.e.)",
                    m,
                    t7,
                    3 * se,
                    function="heads_effective_d",
                )
            )
            # capacity at eps from the measured error per stored pair (the error grows linearly in n, T7)
            cap, cap_se = 1 + eps * (n - 1) / m, eps * (n - 1) / m**2 * se
            want = theory.heads_capacity(eps, d, heads=H, value_heads=HV)
            rows.append(
                eq(
                    "T20",
                    f"{layout}: capacity at eps = {eps} from the measured error per pair (3 s.e.)",
                    cap,
                    want,
                    3 * cap_se,
                    function="heads_capacity",
                )
            )
    for H, HV in ((4, 4), (2, 8), (8, 2)):  # the numbers the layout keeps, as the wrapper counts them
        got = heads.split(variants.get("linear"), heads=H, value_heads=HV).state_numel(d, d)
        want = theory.heads_state_numel(d, d, heads=H, value_heads=HV)
        rows.append(
            eq(
                "T20",
                f"H = {H}, HV = {HV}, d = dv = {d}: numbers in the state (exact)",
                got,
                want,
                0.0,
                function="heads_state_numel",
            )
        )


def _largest_error(x: torch.Tensor, dt: str) -> float:
    return float((precision.round_(x.clone()[None], dt)[0] - x).abs().max())


def _squared_errors(z: torch.Tensor, sr: bool, seed: int) -> torch.Tensor:
    """[N]: the squared error of each number of ``z`` [1, N] rounded to bfloat16."""
    rounded: torch.Tensor = precision.round_(z.clone(), "bfloat16", stochastic=sr, seed=int(seed))  # [1, N]
    return ((rounded - z).double() ** 2)[0]


def _formats(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T14's ingredients on the rounding code itself: u, half an ulp of 1, is the largest error of rounding the
    numbers in [1, 2); the mean squared error of rounding Gaussian numbers once is rounding_variance."""
    x = 1 + torch.arange(2**16, device=dev, dtype=torch.float32) / 2**16  # [1, 2) in steps of 2^-16
    for dt in ("bfloat16", "float8_e4m3fn"):
        err = measured(("largest rounding error", dt), partial(_largest_error, x, dt))
        want: Floats = theory.unit_roundoff(dt)
        rows.append(
            eq("T14", f"{dt}: largest rounding error in [1, 2) = u (exact)", err, want, 0.0, function="unit_roundoff")
        )
    sigma, N = 3.0, 1 << 20
    g = torch.Generator(device=dev).manual_seed(int(seed))
    z = torch.randn(1, N, generator=g, device=dev) * sigma  # [1, N]
    for sr in (False, True):
        e2 = measured(("rounding of N(0, sigma^2)", sigma, N, sr, seed), partial(_squared_errors, z, sr, seed))
        m, se = mean_se(e2)
        want = theory.rounding_variance(sigma, "bfloat16", stochastic=sr)
        how = "stochastic rounding" if sr else "round-to-nearest"
        rows.append(
            eq(
                "T14",
                f"bfloat16 {how} of N(0, {sigma:g}^2): mean squared error (3 s.e.)",
                m,
                want,
                3 * se,
                function="rounding_variance",
            )
        )


def _onset(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T17's onset inverts the stall fraction that T17's rows measure: stall_fraction(stall_onset(f)) = f. (Measured
    directly it needs about 0.7/u^2 = 46,000 bfloat16 writes; in float8_e4m3fn, 194 writes, the stall model itself
    is 5% off: 0.475 of the entries stall at its onset, d = 16, 256 items, 2026-12-02.)"""
    d = 32
    for f in (0.25, 0.5):
        n = theory.stall_onset(d, d, "bfloat16", fraction=f)
        got = float(theory.stall_fraction(n, d, d, "bfloat16"))
        what = f"d = dv = {d}, bfloat16: stall fraction at the onset of fraction {f} (bisection to 1e-3)"
        rows.append(eq("T17", what, got, f, 1e-3, function="stall_onset"))


GROUPS = [
    (("T14",), _t14),
    (("T15",), _t15),
    (("T16",), _t16),
    (("T17",), _t17),
    (("T18",), _t18),
    (("T19",), _t19),
    (("T20",), _t20),
    (("T14",), _formats),
    (("T17",), _onset),
]
