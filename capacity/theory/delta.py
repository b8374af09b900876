"""T12: the delta rule's exact mean error for random unit keys, and its capacity."""

from __future__ import annotations

import numpy as np

from lacapacity.errors import CapacityError
from lacapacity.theory._common import FloatArray, Floats, Numbers, _counts, _numbers, _out

__all__ = ["delta_rule_error", "delta_rule_capacity"]


def _delta_trajectory(n_max: int, d: FloatArray, beta: FloatArray) -> FloatArray:
    """Expected mean error after t = 1..n_max writes for each (d, beta); returns ``[n_max, U]``.

    ``d``, ``beta``: float arrays ``[U]``. Runs the exact second-moment recursion of
    ``delta_rule_error`` on the sums over stored pairs, O(n_max) steps for all U pairs at once.
    """
    b = beta
    m2, m4 = 1.0 / d, 3.0 / (d * (d + 2.0))  # E c^2, E c^4 for c = k_i . k_t (T7)
    kap = b * b * (m2 - m4) / (d - 1.0)
    alpha = 1.0 - 2.0 * b * m2 + b * b * m4 - kap  # A -> A
    gamma = -2.0 * b * (m2 - b * m4) - 2.0 * kap  # B -> A
    const = b * b * (m4 + m2) - kap
    shrink = 1.0 - b * (2.0 - b) / d  # F -> F
    F = np.zeros_like(d)  # E ||S_t||_F^2
    SA = np.zeros_like(d)  # sum over stored pairs of E ||e_i||^2
    SB = np.zeros_like(d)  # sum over stored pairs of E e_i . v_i
    out = np.empty((int(n_max), d.size))
    for t in range(1, int(n_max) + 1):
        old = t - 1.0  # pairs already stored, each updated by write t
        SA = alpha * SA + gamma * SB + old * (kap * F + const) + (1.0 - b) ** 2 * (F / d + 1.0)
        SB = (1.0 - b * m2) * SB - old * b * m2 - (1.0 - b)
        F = shrink * F + b * b
        out[t - 1] = SA / t
    return out


def delta_rule_error(n: Numbers, d: Numbers, beta: Numbers = 1.0, dv: Numbers | None = None) -> Floats:
    """T12: expected mean error mean_i ||k_i S_n - v_i||^2 of the delta rule after n writes (exact, recursion).

    S_t = (I - b k_t^T k_t) S_{t-1} + b k_t^T v_t with i.i.d. unit keys uniform on the sphere in R^d
    (d >= 2) and i.i.d. values with E v = 0, ||v|| = 1 (``values.make("gaussian", ...)``); b in (0, 2).
    This is the probe's ``mse`` of ``variants.get("delta", beta=b)`` in expectation. It does not
    depend on dv (``dv`` is accepted and checked only).

    Derivation (docs/theory-delta.md). Let e_i = k_i S - v_i, c = k_i . k_t, m2 = E c^2 = 1/d,
    m4 = E c^4 = 3/(d (d + 2)), kappa = b^2 (m2 - m4)/(d - 1). Write t updates every stored pair,

        e_i <- (1 - b c^2) e_i - b c^2 v_i - b c (k_perp S - v_t),     k_perp = k_t - c k_i,

    and the new key k_t is independent of everything before, so the second moments
    F = E||S||_F^2, A_i = E||e_i||^2, B_i = E e_i . v_i follow a closed linear recursion:

        F <- (1 - b (2 - b)/d) F + b^2                                    (F -> b d / (2 - b))
        B_i <- (1 - b/d) B_i - b/d                     (so 1 + B_i = b (1 - b/d)^(age), the signal)
        A_i <- (1 - 2 b m2 + b^2 m4) A_i - 2 b (m2 - b m4) B_i + b^2 (m2 + m4)
               + kappa (F - 1 - 2 B_i - A_i)

    starting, when pair t is written, from A_t = (1 - b)^2 (1 + F/d), B_t = -(1 - b). The
    result is mean_i A_i, computed on the sums over pairs in O(n) steps. Nothing is approximated:
    it is the exact expectation for every n >= 1 and d >= 2 (n = 1 gives (1 - b)^2).
    ``n`` must hold whole numbers; n, d, beta (and dv) broadcast; a float for scalar input.

    >>> round(delta_rule_error(1, 64, beta=0.5), 6)
    0.25
    >>> delta_rule_error([16, 64, 256], 64).round(3).tolist()
    [0.135, 0.598, 1.496]
    """
    n, d = _counts(n=n, d=d)
    if np.any(n != np.round(n)):
        raise CapacityError(f"n must hold whole numbers of pairs (>= 1), got {n!r}")
    if np.any(d < 2):
        raise CapacityError(f"d must be >= 2 for random unit keys, got {d!r}")
    b = np.asarray(beta, dtype=np.float64)
    if not np.all(np.isfinite(b)) or np.any(b <= 0) or np.any(b >= 2):
        raise CapacityError(f"beta must lie in (0, 2) (the delta rule is stable there), got {beta!r}")
    if dv is not None:
        _counts(dv=dv)
    parts = [n, d, b] if dv is None else [n, d, b, np.asarray(dv, dtype=np.float64)]
    n, d, b = np.broadcast_arrays(*parts)[:3]
    pairs, index = np.unique(np.stack([d.ravel(), b.ravel()], axis=1), axis=0, return_inverse=True)
    traj = _delta_trajectory(n.max(), pairs[:, 0], pairs[:, 1])  # [n_max, U]
    value = traj[n.ravel().astype(np.int64) - 1, index.ravel()]
    return _out(value.reshape(n.shape))


def delta_rule_capacity(eps: Numbers, d: Numbers, beta: Numbers = 1.0) -> Floats:
    """Capacity under the delta rule's exact mean error: the largest n with ``delta_rule_error(n, d, beta) <= eps``.

    Whole numbers for each broadcast (eps, d, beta); 0 when even one pair misses (eps < (1 - b)^2); inf when the
    error never exceeds eps (it tends to 2 / (2 - b) as n grows, so for eps >= 2 / (2 - b)). d must be whole.
    The recursion runs to 64 d pairs, and further (4 times at a time, up to 4096 d) for an eps so close to the
    limit that the error has not passed it there; closer still, a CapacityError says so.

    >>> delta_rule_capacity(0.5, 64)
    53.0
    """
    eps = _numbers("eps", eps)
    if np.any(np.isnan(eps)):
        raise CapacityError(f"eps must be an error bound (a number, not NaN), got {eps!r}")
    (d,) = _counts(d=d)
    b = _numbers("beta", beta)
    if np.any(d < 2) or np.any(d != np.round(d)):
        raise CapacityError(f"d must be a whole number >= 2, got {d!r}")
    if not np.all(np.isfinite(b)) or np.any(b <= 0) or np.any(b >= 2):
        raise CapacityError(f"beta must lie in (0, 2), got {beta!r}")
    eps, d, b = np.broadcast_arrays(eps, d, b)
    pairs, index = np.unique(np.stack([d.ravel(), b.ravel()], axis=1), axis=0, return_inverse=True)
    limit = 2.0 / (2.0 - pairs[:, 1])  # [U], what the error tends to
    out = np.full(eps.size, np.inf)
    todo = eps.ravel() < limit[index.ravel()]  # the others never exceed eps: inf
    horizon = 64
    while todo.any():
        us = np.unique(index.ravel()[todo])
        traj = _delta_trajectory(int(horizon * pairs[us, 0].max()), pairs[us, 0], pairs[us, 1])  # [n_max, len(us)]
        for i in np.nonzero(todo)[0]:
            u = int(np.searchsorted(us, index.ravel()[i]))
            over = np.nonzero(traj[: int(horizon * pairs[us[u], 0]), u] > eps.ravel()[i])[0]  # first n past eps, - 1
            if over.size:
                out[i], todo[i] = float(over[0]), False
        if todo.any() and horizon >= 4096:
            raise CapacityError(
                f"eps = {float(eps.ravel()[todo][0])!r} lies so close to the delta rule's limiting error 2 / (2 - beta) that "
                "its capacity is beyond 4096 d pairs; use a smaller eps"
            )
        horizon *= 4
    return _out(out.reshape(eps.shape))
