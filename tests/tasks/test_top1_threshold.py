"""The probe's top-1 and list-wise recall of the additive memory against the sharp threshold of Barnfield et al. 2026
(arXiv 2605.05189): top-1 needs d^2 of order n log n (conjectured threshold d^2 = 2 n ln n), list-wise recall d^2 of
order n. The pairs are the paper's isotropic Gaussian ones, drawn here; docs/scripts/top1_threshold.py draws the
figure."""

import math

import numpy as np
import pytest

from lacapacity import probe, variants


def _threshold(d):
    """n* with d^2 = 2 n* ln n*."""
    lo, hi = 2.0, float(d * d)
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if 2 * mid * math.log(mid) < d * d else (lo, mid)
    return lo


def _recall(d, ns, batch, seed):
    """Mean top-1 recall and list-wise recall (own value in the top ceil(n / 20)) at each n, with standard errors."""
    import torch

    g = torch.Generator().manual_seed(seed)
    K = torch.randn(batch, max(ns), d, generator=g) / math.sqrt(d)
    V = torch.randn(batch, max(ns), d, generator=g) / math.sqrt(d)
    ks = sorted({math.ceil(n / 20) for n in ns})
    ds = probe.recall(variants.get("linear"), K, V, checkpoints=sorted(ns), top_k=ks)
    out = {}
    for n in ns:
        top = ds.recall.sel(n=n).values
        lw = ds.recall_at.sel(n=n, k=math.ceil(n / 20)).values
        out[n] = (top.mean(), top.std(ddof=1) / math.sqrt(batch), lw.mean(), lw.std(ddof=1) / math.sqrt(batch))
    return out


def test_top1_recall_falls_across_the_conjectured_threshold():
    d = 16
    star = _threshold(d)
    assert 2 * star * math.log(star) == pytest.approx(d * d, rel=1e-9) and round(star) == 36
    low, at, high = round(star / 3), round(star), round(3 * star)
    r = _recall(d, [low, at, high], batch=256, seed=1)
    assert r[low][0] > 0.7  # well below the threshold: most pairs recalled (measured 0.80)
    assert 0.3 < r[at][0] < 0.6  # at it: the transition (0.44)
    assert r[high][0] < 0.2  # well above it: few (0.12)


@pytest.mark.slow
def test_top1_needs_d2_of_order_n_log_n_and_listwise_d2_of_order_n():
    """At a fixed n / d^2 top-1 recall falls as d grows (the log factor), list-wise recall hardly moves; at
    d^2 = 2 n ln n top-1 is about the same for both d, and its fall there is steeper for the larger d."""
    got = {}
    for d, batch in ((16, 256), (32, 64)):
        star = _threshold(d)
        ns = {
            "low": round(star / 3),
            "at": round(star),
            "high": round(3 * star),
            "eighth": d * d // 8,
            "half": d * d // 2,
        }
        r = _recall(d, list(ns.values()), batch=batch, seed=2)
        got[d] = {name: r[n] for name, n in ns.items()}
    a, b = got[16], got[32]
    se = lambda x, y, i: 3 * math.hypot(x[i + 1], y[i + 1])  # 3 standard errors of a difference
    drop = a["eighth"][0] - b["eighth"][0]  # top-1 at n / d^2 = 1/8: 0.48 at d = 16, 0.38 at d = 32
    assert drop > se(a["eighth"], b["eighth"], 0)
    assert abs(a["half"][2] - b["half"][2]) < drop / 2  # list-wise at n / d^2 = 1/2: 0.34 and 0.37
    assert abs(a["at"][0] - b["at"][0]) < 0.1  # at the threshold of each d
    assert b["low"][0] - a["low"][0] > se(a["low"], b["low"], 0)  # sharper: higher below ...
    assert a["high"][0] - b["high"][0] > se(a["high"], b["high"], 0)  # ... and lower above
    assert np.all([got[d]["half"][2] > got[d]["half"][0] + 0.2 for d in got])  # list-wise holds past top-1
