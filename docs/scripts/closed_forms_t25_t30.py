"""The numbers of docs/theory.md, T25-T30: closed forms against simulation, and T10 against the published asymptotics.

Run from the repository root: ``python docs/scripts/closed_forms_t25_t30.py`` (about two minutes on one CPU core).
Every simulation is seeded; the tables are printed in the form the page quotes them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy import optimize

from lacapacity import theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe


def unit(rng, *shape):
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def cos2_mc(phi, d, rng, n=400_000):
    a, b = phi(unit(rng, n, d)), phi(unit(rng, n, d))
    num, den = (a * b).sum(-1) ** 2, (a * a).sum(-1) * (b * b).sum(-1)
    c = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    return c.mean(), c.std() / math.sqrt(n)


def dpfp(nu):
    def f(x):
        r = np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], -1)
        return np.concatenate([r * np.roll(r, j, axis=-1) for j in range(1, nu + 1)], -1)

    return f


def crosstalk_table():
    print("rho2 = E cos^2(phi(k), phi(k')): closed form, simulation (mean +- s.e., 400k pairs), relative difference")
    rng = np.random.default_rng(0)
    maps = {
        "relu": (lambda x: np.maximum(x, 0), lambda d: theory.feature_crosstalk("relu", d)),
        "elu1": (
            lambda x: np.where(x > 0, x + 1, np.exp(np.minimum(x, 0))),
            lambda d: theory.feature_crosstalk("elu1", d),
        ),
        "dpfp(nu=1)": (dpfp(1), lambda d: theory.feature_crosstalk("dpfp", d, nu=1)),
        "dpfp(nu=2)": (dpfp(2), lambda d: theory.feature_crosstalk("dpfp", d, nu=2)),
    }
    for name, (phi, form) in maps.items():
        for d in (16, 32, 64):
            m, se = cos2_mc(phi, d, rng)
            f = form(d)
            print(f"  {name:11s} d = {d:3d}: {f:.5f}  sim {m:.5f} +- {se:.5f}  ({100 * (f / m - 1):+.2f}%)")
    for d in (16, 32, 64, 512):
        print(f"  taylor2 d = {d}: rho2 = {theory.feature_crosstalk('taylor2', d):.4f} (limit 0.16)")
    for d in (16, 32, 64):
        print(
            f"  performer(m=256) d = {d}: rho2 = {theory.feature_crosstalk('performer', d, m=256):.4f},"
            f" exp kernel limit e^-2 M_d(2) = {theory.exp_kernel_error(2, d, 1.0):.4f}"
        )


def taylor_recall_table():
    print("Taylor map (unit features) against identity: mean error and argmax recall, 16 draws, d = dv")
    for d in (16, 32, 64):
        ns = [d // 2, d, 2 * d, 4 * d]
        K = keys.make("gaussian", max(ns), d, batch=16, seed=0)
        V = values.make("gaussian", max(ns), d, batch=16, seed=1)
        for feat in ("identity", "taylor2"):
            ds = probe.recall(variants.get("linear", normalize=True, feature=feat), K, V, checkpoints=ns)
            mse = ds.mse.mean("batch").values
            rec = ds.recall.mean("batch").values
            form = theory.feature_map_error(feat, np.array(ns), d)
            row = "  ".join(f"n={n}: mse {a:.2f} (T {b:.2f}) recall {r:.3f}" for n, a, b, r in zip(ns, mse, form, rec))
            print(f"  d = {d:3d} {feat:9s} {row}")


def exp_kernel_table():
    print("exponential kernel: Gaussian hypothesis exp(2 b^2/d - 2 b) over the exact e^-2b M_d(2b), per pair")
    for d in (16, 32, 64, 128, 256, 512):
        cells = []
        for b in (2.0, 4.0, 8.0, 16.0, d / 2):
            hyp = math.exp(2 * b * b / d - 2 * b)
            cells.append(f"b={b:g}: {hyp / theory.exp_kernel_error(2, d, b):.3g}")
        b3 = 0.29 * d**0.75
        cells.append(
            f"b=0.29 d^3/4={b3:.1f}: {math.exp(2 * b3 * b3 / d - 2 * b3) / theory.exp_kernel_error(2, d, b3):.3f}"
        )
        print(f"  d = {d:3d}: " + ", ".join(cells))
    print("softmax (exact, T29) at n = 4d: mean error and weight on the correct value; plug-in where n >> M(2b)/M(b)^2")
    for d in (32, 64):
        n = 4 * d
        for b in (2.0, 4.0, 8.0, 16.0):
            mu1 = theory.exp_kernel_error(2, d, b / 2)  # e^-b M_d(b)
            mu2 = theory.exp_kernel_error(2, d, b)  # e^-2b M_d(2b)
            plug = ((n - 1) ** 2 * mu1**2 + (n - 1) * mu2) / (1 + (n - 1) * mu1) ** 2
            print(
                f"  d = {d}, n = {n}, scale {b:g}: error {theory.softmax_error(n, d, b):.4g} (plug-in {plug:.4g},"
                f" n / (M(2b)/M(b)^2) = {n * mu1**2 / mu2:.3g}), weight {theory.softmax_weight(n, d, b):.4f},"
                f" kernel read {theory.exp_kernel_error(n, d, b):.4g}"
            )


def asymptotics_table():
    print("T10 against the asymptotics for a d x d memory: n ln n = d^2 / 2 (Barnfield et al. conjecture, sharp top-1;")
    print("Giorlandino et al., p_c ln p_c / d^2 = 1/2) and the measured 90% / 50% capacities' closed forms")
    for d in (16, 32, 64, 128, 256, 512):
        n_asym = optimize.brentq(lambda n, d=d: n * math.log(n) - d * d / 2, 2, 1e9)
        g90, g50 = theory.argmax_capacity(d, d, 0.9), theory.argmax_capacity(d, d, 0.5)
        r90 = theory.argmax_capacity_refined(d, d, 0.9) if d <= 256 else float("nan")
        r50 = theory.argmax_capacity_refined(d, d, 0.5) if d <= 256 else float("nan")
        print(
            f"  d = {d:3d}: asymptotic n = {n_asym:8.1f}; T10 Gaussian 90% {g90:8.1f} ({g90 / n_asym:.2f}), 50% "
            f"{g50:8.1f} ({g50 / n_asym:.2f}); refined 90% {r90:8.1f} ({r90 / n_asym:.2f}), 50% {r50:8.1f} ({r50 / n_asym:.2f})"
        )
    print("recall@k (refined, T30): the 90% capacity at k = 1, 5, 25 over d^2")
    for d in (16, 32, 64):
        cells = [f"k={k}: {theory.recall_at_capacity_refined(d, d, k, 0.9) / d**2:.3f}" for k in (1, 5, 25)]
        print(f"  d = {d}: " + ", ".join(cells))


if __name__ == "__main__":
    torch.set_num_threads(1)
    crosstalk_table()
    taylor_recall_table()
    exp_kernel_table()
    asymptotics_table()
