"""Rows of T31-T33: integer states with scales and error feedback (``lacapacity.variants.quantise`` through
``lacapacity.variants.precision.stored``).

Each row measures the package's wrapper on random unit keys and values and compares with the closed form of
``lacapacity.theory`` within 3 standard errors over the batch, each batch sized so that a 3% error in the formula
fails. The deviation is measured through reads, as for T14-T19: the wrapped and the float32 memory read the d unit
basis vectors, so the mean squared difference of the reads is ||S_stored - S_float32||_F^2 / d.
"""

from __future__ import annotations

import torch

from lacapacity import theory
from lacapacity.check._rows import Check, eq, mean_se, measured
from lacapacity.check.precision import _deviation
from lacapacity.variants import quantise


def _t31(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T31: one rounding of the finished additive state, int8 per row and int4 per column; the scale moment and
    the rounding variance on Gaussian numbers through ``quantise.quantise``."""
    n, d, B = 1024, 32, 96  # 3 s.e. about 2.4%: a form 3% off either way fails the int4 row (measured 0.997 of it)
    for dt, bits, scope in (("int8/row", 8, "row"), ("int4/col", 4, "col")):
        m, se = mean_se(measured(("final", dt), lambda dt=dt: _deviation("linear", dt, "final", n, d, d, B, seed, dev)))  # type: ignore[misc]  # a lambda binding a loop variable by default: mypy cannot infer it
        want = theory.quantised_final_error(n, d, d, bits, scope)
        what = f"linear d = dv = {d}, n = {n}, {dt} final: deviation (3 s.e.)"
        rows.append(eq("T31", what, m, want, 3 * se, function="quantised_final_error"))
    # one scale per tensor over a short memory's heavy-tailed entries (kappa from their tails, not kappa_m): 3 s.e.
    # about 2.4% at this batch; the Gaussian form is 31% low here
    n, d, B = 200, 64, 1024
    label, dt = "decay(alpha=0.9)", "int8"
    m, se = mean_se(_deviation(label, dt, "final", n, d, d, B, seed, dev))
    want = theory.quantised_final_error(n, d, d, 8, "tensor", memory="decay", alpha=0.9)
    what = f"{label} d = dv = {d}, n = {n}, int8 (one scale per tensor) final: deviation (3 s.e.)"
    rows.append(eq("T31", what, m, want, 3 * se, function="quantised_final_error"))
    G, m_, sigma = 4096, 32, 2.0
    g = torch.Generator(device=dev).manual_seed(int(seed))
    x = torch.randn(1, G, m_, generator=g, device=dev) * sigma  # [1, G, m]: G rows of m entries
    for sr in (False, True):
        u = torch.rand(x.shape, generator=g, device=dev) if sr else None
        y = quantise.quantise(x, "int4/row", u)
        if not sr:  # the largest entry of each row is kept: the scale moment from the stored rows
            mm, se = mean_se((y.abs().amax(-1) ** 2 / sigma**2)[0])
            rows.append(
                eq(
                    "T31",
                    f"rows of {m_} N(0, {sigma:g}^2): mean squared largest entry / sigma^2 (3 s.e.)",
                    mm,
                    theory.scale_moment(m_),
                    3 * se,
                    function="scale_moment",
                )
            )
        mm, se = mean_se(((y - x).double() ** 2).mean(-1)[0])
        want = theory.quantised_rounding_variance(sigma, m_, 4, stochastic=sr)
        how = "stochastic rounding" if sr else "round-to-nearest"
        rows.append(
            eq(
                "T31",
                f"int4 per row of {m_} N(0, {sigma:g}^2), {how}: mean squared error (3 s.e.)",
                mm,
                want,
                3 * se,
                function="quantised_rounding_variance",
            )
        )


def _t32(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T32: rounded after every write, without feedback (additive, decaying) and with it (additive: T31 at every n;
    the delta rule: bounded at dv w (1 + g / (1 - c))). Without feedback the closed form is 1-2% high at these
    settings (measured 2026-12-03); the batches give 3 s.e. of about 2.5%, so a form 3% off fails."""
    d = 32
    cases = (
        ("linear", "linear", 1.0, 1.0, "int8/row", "step", 256, 48, False),
        ("delta(beta=1.0)", "delta", 1.0, 1.0, "int8/row", "step", 512, 96, False),
        ("decay(alpha=0.95)", "decay", 0.95, 1.0, "int8/row", "step", 512, 64, False),
        ("linear", "linear", 1.0, 1.0, "int8/row+ef", "step", 512, 32, True),
        ("delta(beta=1.0)", "delta", 1.0, 1.0, "int8/row+ef", "step", 512, 64, True),
        ("gated_delta(alpha=0.95, beta=1.0)", "gated_delta", 0.95, 1.0, "int8/row+ef", "step", 512, 64, True),
    )
    for label, memory, a, b, dt, rounding, n, B, fb in cases:
        key = (label, dt, rounding, n, B)
        # a lambda binding a loop variable by default: mypy cannot infer it, nor count *key[:4]
        got = measured(("step", *key), lambda key=key: _deviation(*key[:4], d, d, key[4], seed, dev))  # type: ignore[misc, call-arg]
        m, se = mean_se(got)
        want = theory.quantised_step_error(n, d, d, 8, "row", feedback=fb, memory=memory, alpha=a, beta=b)
        what = f"{label} d = dv = {d}, n = {n}, {dt} {rounding}: deviation (3 s.e.)"
        # the additive memory's rows hold T32 within its stated accuracy (1-2% high without feedback, T31 exactly with
        # it, measured 2026-12-03) but cannot also catch a form 3% low: they check the wrapper; the delta, decay and
        # gated rows check the closed form itself
        function = "variants.quantise" if memory == "linear" else "quantised_step_error"
        rows.append(eq("T32", what, m, want, 3 * se, function=function))


def _t33(dev: torch.device, seed: int, rows: list[Check]) -> None:
    """T33: where the additive state's deviation without feedback reaches the crosstalk: n* solves its equation,
    and int4 per row with stochastic rounding is measured there (about 2% below the crosstalk: the row's batch gives
    3 s.e. of 3%)."""
    d, B = 32, 32
    n_star = float(theory.quantised_crossover(d, d, 4, "row", stochastic=True))
    A = float(theory.quantised_rounding_variance(1.0, d, 4, stochastic=True))
    ratio = A * n_star * (n_star + 1) / 2 / (n_star - 1)  # uniform errors' deviation / crosstalk at n*
    what = f"d = dv = {d}, int4/row stochastic: A n (n + 1) / 2 / (n - 1) at n* = {n_star:.1f} (1e-9)"
    rows.append(eq("T33", what, ratio, 1.0, 1e-9, function="quantised_crossover"))
    n = int(round(n_star))
    got = measured(("cross", n), lambda: _deviation("linear", "int4/row", "step+stochastic", n, d, d, B, seed, dev))
    m, se = mean_se(got * d / (n - 1))
    what = f"linear d = dv = {d}, int4/row step+stochastic: measured deviation / crosstalk at n* = {n} (3 s.e.)"
    rows.append(eq("T33", what, m, 1.0, 3 * se, function="variants.quantise"))


GROUPS = [
    (("T31",), _t31),
    (("T32",), _t32),
    (("T33",), _t33),
]
