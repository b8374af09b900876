"""T34 (lacapacity.theory.log_linear) against a simulation written here: the Fenwick buckets built by merging token by
token (as log-linear attention does), random unit keys and unit values drawn with numpy, the reads summed in float64."""

import numpy as np
import pytest

from lacapacity import CapacityError, theory


def _levels_by_merging(n):
    """{level: tokens} after n writes, each write merging the levels below its carry (not from the bits of n)."""
    levels: dict[int, list[int]] = {}
    for t in range(n):
        c = 0
        while t >> c & 1:  # trailing one bits of t: levels 1 .. c merge with the new token into level c + 1
            c += 1
        merged = [tok for lv in range(1, c + 1) for tok in levels.pop(lv, [])] + [t]
        levels[c + 1] = sorted(merged)
    return levels


def _simulate(n, d, lam, alpha, draws, seed):
    """Per-pair squared errors ``[draws, n]`` of reads sum_c w_c (k_i . k_c) v_c, w_c = lam_l(c) alpha^(n-1-c)."""
    rng = np.random.default_rng(seed)
    weight = np.empty(n)
    for level, toks in _levels_by_merging(n).items():
        lam_l = lam ** (level - 1) if np.isscalar(lam) else lam[min(level - 1, len(lam) - 1)]
        weight[toks] = lam_l * alpha ** (n - 1 - np.asarray(toks))
    K = rng.standard_normal((draws, n, d))
    K /= np.linalg.norm(K, axis=-1, keepdims=True)
    V = rng.standard_normal((draws, n, 8)) / np.sqrt(8)  # E |v|^2 = 1
    G = K @ K.transpose(0, 2, 1)  # [draws, n, n]
    R = G @ (weight[None, :, None] * V)
    return ((R - V) ** 2).sum(-1)


@pytest.mark.parametrize("n,lam,alpha", [(13, [1.0, 0.6, 0.3, 0.2], 1.0), (22, 0.5, 0.95)])
def test_log_linear_error_matches_a_simulation_of_the_buckets(n, lam, alpha):
    d, draws = 16, 4000
    err = _simulate(n, d, lam, alpha, draws, seed=n)
    item = err.mean(1)
    assert abs(item.mean() - theory.log_linear_error(n, d, lam, alpha)) < 3 * item.std() / draws**0.5
    per = theory.log_linear_level_error(n, d, lam, alpha)
    levels = _levels_by_merging(n)
    assert set(per) == set(levels)
    for level, toks in levels.items():
        x = err[:, toks].mean(1)
        assert abs(x.mean() - per[level]) < 3 * x.std() / draws**0.5, (level, x.mean(), per[level])


def test_log_linear_error_limits():
    d = 16
    for n in (1, 5, 13, 64, 100):  # lam = alpha = 1: T7 for every n
        assert theory.log_linear_error(n, d, 1.0, 1.0) == pytest.approx(theory.random_keys_error(n, d), rel=1e-12)
    for m, lam in ((4, 0.5), (6, 0.8)):  # n = 2^m: one bucket, every weight lam^m
        n, w = 2**m, lam**m
        assert theory.log_linear_error(n, d, lam) == pytest.approx((1 - w) ** 2 + (n - 1) * w * w / d, rel=1e-12)
        assert list(theory.log_linear_level_error(n, d, lam)) == [m + 1]
    # lam = 1 with a gate: the decaying memory's crosstalk, pair by pair (T11's weights alpha^age)
    n, a = 9, 0.9
    w = a ** np.arange(n - 1, -1, -1.0)
    want = np.mean((1 - w) ** 2 + (np.sum(w * w) - w * w) / d)
    assert theory.log_linear_error(n, d, 1.0, a) == pytest.approx(want, rel=1e-12)
    with pytest.raises(CapacityError, match="alpha must be a number in"):
        theory.log_linear_error(8, d, 0.5, 1.5)
    with pytest.raises(CapacityError, match="lam must be"):
        theory.log_linear_level_error(8, d, [])
