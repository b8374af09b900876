"""T21-T24: how fast each rule forgets, per age of a pair (writes since it was stored; age 0 = the last written pair).

One family of recurrences covers the four rules, for i.i.d. unit keys uniform on the sphere in R^d and i.i.d.
unit values (``values.make("gaussian", ...)``), read with the stored key:

    S_t = alpha_t (I - b k_t^T k_t) S_{t-1} + omega_t k_t^T v_t

    delta        alpha = 1,                 b = beta, omega = beta       (T21)
    decay        alpha fixed,               b = 0,    omega = 1          (T22)
    gated_delta  alpha fixed,               b = beta, omega = beta       (T23)
    mamba2       alpha = exp(-A dt_t),      b = 0,    omega = dt_t,  dt_t = softplus(k_t . w + bias)   (T24)

Write t multiplies the expected read-back of an older pair i (its signal s_i = E <k_i S, v_i>) by
E[alpha] (1 - b/d), and its own write leaves s = E[omega]; so, exactly,

    signal(age) = E[omega] (E[alpha] (1 - b/d))^age.

The second moments F = E ||S||_F^2 and R_i = E ||k_i S||^2 follow a closed linear recursion (docs/theory.md, T21),
with m2 = 1/d, m4 = 3/(d (d + 2)), kappa = b^2 (m2 - m4)/(d - 1):

    R_i <- E[alpha^2] ((1 - 2 b m2 + b^2 m4 - kappa) R_i + kappa F) + E[omega^2] m2
    F   <- E[alpha^2] (1 - b (2 - b)/d) F + E[omega^2]
    new pair t:  R_t = E[alpha^2] (1 - b)^2 F_{t-1}/d + E[omega^2],   s_t = E[omega]

and the error of a pair is E ||k_i S - v_i||^2 = R_i - 2 s_i + 1. This is exact for delta, decay and gated delta;
for mamba2 the signal is exact and the error neglects the dependence of a pair's own step dt_i on its key's overlap
with older keys (a relative correction of order 1/d).

Time constants (``forgetting_horizon``): the signal decays as exp(-age / tau) with tau = -1 / ln(E[alpha](1 - b/d));
the energy E ||Q k_i^T||^2 of the trace a pair leaves in the state (Q: the product of the later transitions) as
exp(-age / tau_energy), tau_energy = -1 / ln(E[alpha^2](1 - b (2 - b)/d)); its root-mean-square size as
exp(-age / tau_trace), tau_trace = 2 tau_energy.
"""

from __future__ import annotations

import math

import numpy as np

from lacapacity.errors import CapacityError
from lacapacity.theory._common import FloatArray, Floats, Numbers, _numbers, _out, _scipy

__all__ = [
    "forgetting_signal",
    "forgetting_error",
    "forgetting_horizon",
    "forgetting_hypothesis",
    "mamba2_step_moments",
]

RULES = {
    "delta": ("beta",),
    "decay": ("alpha",),
    "gated_delta": ("alpha", "beta"),
    "mamba2": ("A", "dt", "w_std"),
}
QUANTITIES = ("signal", "energy", "trace")


def _scalar(name: str, x: Numbers, low: float, high: float, *, high_open: bool, low_open: bool = True) -> float:
    a = _numbers(name, x)
    if a.ndim != 0 or not np.isfinite(a):
        raise CapacityError(f"{name} must be one finite number, got {x!r}")
    v = float(a)
    ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        interval = ("(" if low_open else "[") + f"{low:g}, {high:g}" + (")" if high_open else "]")
        raise CapacityError(f"{name} must lie in {interval}, got {x!r}")
    return v


def _dim(d: Numbers) -> int:
    a = _numbers("d", d)
    if a.ndim != 0 or not np.isfinite(a) or a != np.round(a) or a < 2:
        raise CapacityError(f"d must be one whole number >= 2 (unit keys in R^d), got {d!r}")
    return int(a)


def mamba2_step_moments(d: Numbers, A: Numbers = 1.0, dt: Numbers = 0.01, w_std: Numbers = 1.0) -> dict[str, float]:
    """T24: moments of the mamba2 step for unit keys uniform on the sphere in R^d (exact, by quadrature).

    dt = softplus(x + bias) with bias = log(expm1(dt)) (so that dt is the step of a key orthogonal to w) and
    x = k . w; the built-in draws w with norm w_std sqrt(d), so x = w_std sqrt(d) u with u one coordinate of a
    uniform unit vector (density proportional to (1 - u^2)^((d - 3)/2); x has variance w_std^2). Returns
    {"omega": E dt, "omega2": E dt^2, "alpha": E exp(-A dt), "alpha2": E exp(-2 A dt)}.

    >>> m = mamba2_step_moments(64, A=1.0, dt=0.01, w_std=1e-9)
    >>> round(m["omega"], 6), round(m["alpha"], 6)
    (0.01, 0.99005)
    """
    d = _dim(d)
    A = _scalar("A", A, 0.0, math.inf, high_open=True)
    dt = _scalar("dt", dt, 0.0, math.inf, high_open=True)
    w_std = _scalar("w_std", w_std, 0.0, math.inf, high_open=True, low_open=False)
    integrate, _, special = _scipy()
    bias = math.log(math.expm1(dt))
    scale = w_std * math.sqrt(d)
    log_norm = -special.betaln(0.5, (d - 1) / 2.0)

    def moments(u: float) -> FloatArray:
        step = np.logaddexp(0.0, scale * u + bias)  # softplus, stable
        density = np.exp(log_norm + (d - 3) / 2.0 * np.log1p(-u * u))
        out: FloatArray = np.array([step, step * step, np.exp(-A * step), np.exp(-2.0 * A * step)]) * density
        return out

    if scale == 0.0:
        step = math.log1p(math.exp(bias))
        vals = np.array([step, step * step, math.exp(-A * step), math.exp(-2 * A * step)])
    else:
        vals, _ = integrate.quad_vec(moments, -1.0, 1.0, epsabs=1e-14, epsrel=1e-11, limit=400)
    return {"omega": float(vals[0]), "omega2": float(vals[1]), "alpha": float(vals[2]), "alpha2": float(vals[3])}


def _rule(rule: str, d: int, params: dict[str, Numbers | None]) -> dict[str, float]:
    """The per-token moments of ``rule``: {alpha, alpha2, omega, omega2, b}."""
    if rule not in RULES:
        raise CapacityError(f"unknown rule {rule!r}; known: {', '.join(RULES)}")
    want = RULES[rule]
    given = {k: v for k, v in params.items() if v is not None}
    extra = sorted(set(given) - set(want))
    if extra:
        raise CapacityError(f"rule {rule!r} takes {', '.join(want)}; got {', '.join(extra)}")
    missing = [k for k in want if k not in given and not (rule == "mamba2")]
    if missing:
        raise CapacityError(f"rule {rule!r} needs {', '.join(missing)}")
    if rule == "mamba2":
        m = mamba2_step_moments(d, **given)
        return {**m, "b": 0.0}
    b = _scalar("beta", given["beta"], 0.0, 2.0, high_open=True) if "beta" in want else 0.0
    a = _scalar("alpha", given["alpha"], 0.0, 1.0, high_open=False) if "alpha" in want else 1.0
    omega = b if rule in ("delta", "gated_delta") else 1.0
    return {"alpha": a, "alpha2": a * a, "omega": omega, "omega2": omega * omega, "b": b}


def _ages(age: Numbers) -> FloatArray:
    a = _numbers("age", age)
    if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(a != np.round(a)):
        raise CapacityError(f"age must hold whole numbers >= 0 (writes since the pair was stored), got {age!r}")
    return a


def forgetting_signal(
    age: Numbers,
    d: Numbers,
    rule: str = "delta",
    *,
    alpha: Numbers | None = None,
    beta: Numbers | None = None,
    A: Numbers | None = None,
    dt: Numbers | None = None,
    w_std: Numbers | None = None,
) -> Floats:
    """T21-T24: expected read-back coefficient E <k_i S, v_i> of a pair of the given age (exact).

    signal = E[omega] (E[alpha] (1 - b/d))^age: delta beta (1 - beta/d)^age; decay alpha^age; gated_delta
    beta (alpha (1 - beta/d))^age; mamba2 E[dt] E[exp(-A dt)]^age (``mamba2_step_moments``). It does not depend on
    how many pairs were written. ``rule`` and its parameters as in the module docstring (mamba2's default to the
    built-in's: A = 1, dt = 0.01, w_std = 1). ``age`` broadcasts; a float for a scalar.

    >>> forgetting_signal(0, 64, "delta", beta=0.5), round(forgetting_signal(64, 64, "delta", beta=1.0), 4)
    (0.5, 0.365)
    """
    d = _dim(d)
    m = _rule(rule, d, dict(alpha=alpha, beta=beta, A=A, dt=dt, w_std=w_std))
    a = _ages(age)
    return _out(m["omega"] * (m["alpha"] * (1.0 - m["b"] / d)) ** a)


def _moments(n: int, d: int, m: dict[str, float]) -> tuple[FloatArray, FloatArray]:
    """Signal and E ||r||^2 of every stored pair after n writes, ``[n]`` each, index = age."""
    b, aa, w2 = m["b"], m["alpha2"], m["omega2"]
    m2, m4 = 1.0 / d, 3.0 / (d * (d + 2.0))
    kap = b * b * (m2 - m4) / (d - 1.0)
    keep = aa * (1.0 - 2.0 * b * m2 + b * b * m4 - kap)  # R -> R
    shrink = aa * (1.0 - b * (2.0 - b) / d)  # F -> F
    R = np.zeros(n)  # by write time: R[t] of the pair written at step t
    F = 0.0
    for t in range(n):
        new = aa * (1.0 - b) ** 2 * F / d + w2
        R[:t] = keep * R[:t] + aa * kap * F + w2 * m2
        F = shrink * F + w2
        R[t] = new
    s = m["omega"] * (m["alpha"] * (1.0 - b / d)) ** np.arange(n, dtype=np.float64)
    by_age: FloatArray = R[::-1].copy()  # index = age
    return s, by_age


def forgetting_error(
    age: Numbers,
    n: Numbers,
    d: Numbers,
    rule: str = "delta",
    *,
    alpha: Numbers | None = None,
    beta: Numbers | None = None,
    A: Numbers | None = None,
    dt: Numbers | None = None,
    w_std: Numbers | None = None,
) -> Floats:
    """T21-T24: expected squared error E ||k_i S_n - v_i||^2 of the pair of the given age after n writes.

    Runs the second-moment recursion of the module docstring (O(n^2) numbers, vectorised over pairs); exact for
    delta, decay and gated_delta, first order in 1/d for mamba2. ``age`` must lie in 0 .. n - 1 (broadcasts);
    ``n`` one whole number. Its mean over ages 0 .. n - 1 is ``delta_rule_error(n, d, beta)`` for the delta rule.

    >>> round(forgetting_error(0, 1, 64, "delta", beta=0.5), 6)          # (1 - b)^2
    0.25
    >>> round(forgetting_error(5, 6, 32, "decay", alpha=0.9), 6)   # (1 - a^5)^2 + sum_{j<5} a^(2 j) / d
    0.274824
    """
    d = _dim(d)
    nn = _numbers("n", n)
    if nn.ndim != 0 or not np.isfinite(nn) or nn != np.round(nn) or nn < 1:
        raise CapacityError(f"n must be one whole number >= 1 (pairs written), got {n!r}")
    count = int(nn)
    m = _rule(rule, d, dict(alpha=alpha, beta=beta, A=A, dt=dt, w_std=w_std))
    a = _ages(age)
    if np.any(a > count - 1):
        raise CapacityError(f"age must lie in 0 .. n - 1 = {count - 1}, got {age!r}")
    s, R = _moments(count, d, m)
    return _out((R - 2.0 * s + 1.0)[a.astype(np.int64)])


def forgetting_horizon(
    d: Numbers,
    rule: str = "delta",
    *,
    quantity: str = "signal",
    alpha: Numbers | None = None,
    beta: Numbers | None = None,
    A: Numbers | None = None,
    dt: Numbers | None = None,
    w_std: Numbers | None = None,
) -> float:
    """T21-T24: the time constant tau (in writes) over which ``quantity`` of a pair falls by e.

    ``quantity``: ``"signal"`` (the read-back coefficient, which sets error and recall; tau =
    -1 / ln(E[alpha] (1 - b/d))), ``"energy"`` (E ||Q k_i^T||^2, the squared size of the pair's trace in the state;
    -1 / ln(E[alpha^2] (1 - b (2 - b)/d))) or ``"trace"`` (its root-mean-square size, 2x the energy's). inf where
    nothing decays (decay with alpha = 1). To first order in 1 - alpha and 1/d:

        delta        signal d/beta          energy d/(beta (2 - beta))         trace 2 d/(beta (2 - beta))
        decay        signal 1/(1 - alpha)   energy 1/(2 (1 - alpha))           trace 1/(1 - alpha)
        gated_delta  signal 1/((1 - alpha) + beta/d)     trace 1/((1 - alpha) + beta (2 - beta)/(2 d))

    >>> round(forgetting_horizon(64, "delta", beta=1.0), 2), round(forgetting_horizon(64, "delta", beta=0.5), 2)
    (63.5, 127.5)
    >>> round(forgetting_horizon(64, "delta", beta=0.5, quantity="energy"), 2)
    84.83
    """
    d = _dim(d)
    if quantity not in QUANTITIES:
        raise CapacityError(f"quantity must be one of {', '.join(QUANTITIES)}, got {quantity!r}")
    m = _rule(rule, d, dict(alpha=alpha, beta=beta, A=A, dt=dt, w_std=w_std))
    b = m["b"]
    rate = m["alpha"] * (1.0 - b / d) if quantity == "signal" else m["alpha2"] * (1.0 - b * (2.0 - b) / d)
    if rate >= 1.0:
        return math.inf
    tau = -1.0 / math.log(rate)
    return 2.0 * tau if quantity == "trace" else tau


def forgetting_hypothesis(d: float, rule: str, **params: float) -> float | None:
    """The time constant the outside analyses give for ``rule`` at key dimension ``d`` (None for mamba2, which they
    do not cover), set beside ``forgetting_horizon`` by the forgetting figure: delta d / (beta (2 - beta)), decay
    1 / (1 - alpha) (inf at alpha = 1), gated delta 1 / ((1 - alpha) + beta (2 - beta) / (2 d)). ``params``: the
    rule's parameters (``alpha``, ``beta``; others are not read).

    >>> forgetting_hypothesis(64, "delta", beta=0.5)
    85.33333333333333
    """
    b, a = params.get("beta", 0.0), params.get("alpha", 1.0)
    if rule == "delta":
        return d / (b * (2 - b))
    if rule == "decay":
        return math.inf if a == 1 else 1 / (1 - a)
    if rule == "gated_delta":
        return 1 / ((1 - a) + b * (2 - b) / (2 * d))
    return None
