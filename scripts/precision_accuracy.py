"""How close T14-T19's closed forms come to the package's low-precision states: the table of docs/precision-accuracy.md.

Each row writes random unit keys and values through ``lacapacity.variants.precision.stored`` (the wrapper, tested against
plain-torch simulations in tests/variants/test_precision.py) and measures one quantity over a batch, mean and standard error
over the items; the closed form of ``lacapacity.theory`` is printed beside it with the ratio and z = (measured -
predicted) / SE. Settings span bfloat16, float16, float8_e4m3fn and float8_e5m2, round-to-nearest and stochastic
rounding, d = 16 ... 128. ``stall_onset`` is held to a measured onset: the first n where the mean share of entries
a write leaves unchanged reaches 1/2 (writes binned by 2% of n; the standard error from 8 groups of items).

    .venv/bin/python scripts/precision_accuracy.py                 # writes docs/precision-accuracy.md
    .venv/bin/python scripts/precision_accuracy.py --batch 16 --out -  # a smaller batch, to stdout

Each measurement is seeded (``--seed``); the table records the date, the machine and the run time.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time

import numpy as np
import torch

from lacapacity import theory, variants
from lacapacity.inputs import keys, values
from lacapacity.variants import precision

U2 = {dt: theory.unit_roundoff(dt) ** 2 for dt in ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")}


def _pairs(n, d, B, seed):
    return keys.make("gaussian", n, d, batch=B, seed=seed), values.make("gaussian", n, d, batch=B, seed=seed)


def _deviations(label, dtype, rounding, ns, d, B, seed):
    """Per item ||S_stored - S_float32||_F^2 / d at each n of ``ns`` (increasing), one write pass. [len(ns), B]"""
    K, V = _pairs(max(ns), d, B, seed)
    base = variants.resolve(label)
    mem = precision.stored(base, dtype, rounding, seed=seed)
    st, F, prev, out = mem.init_state(B, d, d), base.init_state(B, d, d), 0, []
    for n in ns:
        st = mem.write(st, K[:, prev:n], V[:, prev:n])
        F = base.write(F, K[:, prev:n], V[:, prev:n])
        prev = n
        S = st.inner if rounding.split("+")[0] != "final" else precision.round_(F.clone(), dtype, seed=seed)
        if rounding == "final+stochastic":
            S = precision.round_(F.clone(), dtype, stochastic=True, seed=seed)
        out.append(((S.double() - F.double()) ** 2).sum((1, 2)) / d)
    return torch.stack(out)


def _row(rows, form, setting, x, predicted):
    x = torch.as_tensor(x, dtype=torch.float64).flatten()
    m, se = float(x.mean()), float(x.std() / math.sqrt(x.numel()))
    p = float(predicted)
    rows.append((form, setting, m, se, p, m / p if p else math.nan, (m - p) / se if se else math.nan))


def t14(rows, B, seed):
    n = 1024
    for dt in U2:
        for d in (16, 64, 128):
            for sr in (False, True):
                r = "final+stochastic" if sr else "final"
                x = _deviations("linear", dt, r, [n], d, B, seed)[0]
                _row(
                    rows,
                    "final_rounding_error",
                    f"linear {dt} {r}, d = {d}, n = {n}",
                    x,
                    theory.final_rounding_error(n, d, d, dt, stochastic=sr),
                )


def t15(rows, B, seed):
    d = 32
    for dt, u2n in (
        ("bfloat16", (1 / 16,)),
        ("float16", (1 / 1024,)),
        ("float8_e4m3fn", (0.25, 1.0, 3.5, 8.0)),
        ("float8_e5m2", (0.25, 1.0, 3.5, 8.0)),
    ):
        ns = sorted({int(round(v / U2[dt])) for v in u2n})
        for sr in (False, True):
            r = "step+stochastic" if sr else "step"
            x = _deviations("linear", dt, r, ns, d, B, seed)
            for i, n in enumerate(ns):
                if not sr and n * U2[dt] > 0.3:
                    continue  # round-to-nearest past the stall: T15 does not claim it
                _row(
                    rows,
                    "step_rounding_error",
                    f"linear {dt} {r}, d = {d}, n = {n} (u^2 n = {n * U2[dt]:.3g})",
                    x[i],
                    theory.step_rounding_error(n, d, d, dt, stochastic=sr),
                )


def t16(rows, B, seed):
    d = 32
    for dt in ("float8_e4m3fn", "float8_e5m2"):
        n = int(round(float(theory.rounding_crossover(d, d, dt, stochastic=True))))
        x = _deviations("linear", dt, "step+stochastic", [n], d, B, seed)[0] * d / (n - 1)
        _row(
            rows,
            "rounding_crossover",
            f"linear {dt} step+stochastic, d = {d}: deviation / crosstalk at n* = {n}",
            x,
            1.0,
        )


def _stall_curve(dt, d, B, n_max, seed):
    """Share of entries each write leaves unchanged, per item: [n_max, B] (write t at row t - 1)."""
    K, V = _pairs(n_max, d, B, seed)
    mem = precision.stored(variants.get("linear"), dt, "step")
    st = mem.init_state(B, d, d)
    out = torch.empty(n_max, B)
    for t in range(n_max):
        before = st.inner.clone()
        st = mem.write(st, K[:, t : t + 1], V[:, t : t + 1])
        out[t] = (st.inner == before).double().mean((1, 2))
    return out


def t17(rows, B, seed):
    d = 16
    for dt in ("float8_e4m3fn", "float8_e5m2", "bfloat16"):
        n_max = int(round(1.6 / U2[dt]))
        curve = _stall_curve(dt, d, B, n_max, seed)
        for u2n in (0.25, 0.5, 0.75, 1.0):
            n = int(round(u2n / U2[dt]))
            w = max(4, n // 32)  # writes n - w/2 .. n + w/2
            x = curve[n - w // 2 - 1 : n + w // 2].mean(0)
            _row(
                rows,
                "stall_fraction",
                f"linear {dt} step, d = {d}, n = {n} (u^2 n = {u2n:g})",
                x,
                theory.stall_fraction(n, d, d, dt),
            )
        # the onset: the first bin of writes (2% of n wide) where the mean share reaches 1/2, per group of items
        G = 8
        edges = np.unique(np.round(np.geomspace(16, n_max, int(math.log(n_max / 16) / math.log(1.02)) + 1)))
        groups = curve[:, : B - B % G].reshape(n_max, G, -1).mean(-1).numpy()  # [n, G]
        onsets = []
        for g in range(G):
            mids, means = [], []
            for a, b in zip(edges[:-1], edges[1:]):
                mids.append(math.sqrt(a * b))
                means.append(groups[int(a) - 1 : int(b) - 1, g].mean())
            means = np.asarray(means)
            i = int(np.argmax(means >= 0.5)) if (means >= 0.5).any() else len(means) - 1
            lo = max(i - 1, 0)  # interpolate between the bins around the crossing
            if means[i] != means[lo]:
                onsets.append(mids[lo] + (0.5 - means[lo]) * (mids[i] - mids[lo]) / (means[i] - means[lo]))
            else:
                onsets.append(mids[i])
        _row(
            rows,
            "stall_onset",
            f"linear {dt} step, d = {d}: writes to a stall share of 1/2 (8 groups)",
            onsets,
            theory.stall_onset(d, d, dt),
        )


def t18_t19(rows, B, seed):
    for dt in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        for d in (16, 64):
            c = 1 - 1 / d
            n = int(math.ceil(30 / (1 - c)))
            for sr in (False, True):
                r = "step+stochastic" if sr else "step"
                x = _deviations("delta(beta=1.0)", dt, r, [n], d, B, seed)[0]
                _row(
                    rows,
                    "delta_rounding_floor",
                    f"delta beta = 1, {dt} {r}, d = {d}, n = {n}",
                    x,
                    theory.delta_rounding_floor(d, d, dt, beta=1.0, stochastic=sr),
                )
    for dt in ("bfloat16", "float8_e4m3fn"):
        a, d, n = 0.95, 32, 512
        x = _deviations(f"decay(alpha={a})", dt, "step", [n], d, B, seed)[0]
        _row(
            rows,
            "decay_rounding_floor",
            f"decay alpha = {a}, {dt} step, d = {d}, n = {n}",
            x,
            theory.decay_rounding_floor(d, d, dt, a),
        )


def _machine() -> str:
    """``<n>-core <CPU model> (<arch>)``, the model from /proc/cpuinfo where there is one."""
    model = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    except OSError:
        pass
    return f"{os.cpu_count()}-core {model} ({platform.machine()})".replace("  ", " ")


def table(rows, *, seconds: float, B: int, seed: int) -> str:
    about = (
        "Measured: mean and standard error over the batch items (stall_onset: over 8 groups of items) of the "
        "package's wrapper; predicted: the closed form of `lacapacity.theory`; z = (measured - predicted) / SE."
    )
    title, library = "Precision forms against measurement", f"torch {torch.__version__}"
    return page(rows, "precision_accuracy.py", title, library, about, seconds=seconds, B=B, seed=seed)


def page(rows, script: str, title: str, library: str, about: str, *, seconds: float, B: int, seed: int) -> str:
    """A generated page of the accuracy scripts: ``title``, how, where and with what ``library`` ``script`` made it,
    what its columns mean (``about``) and the table of ``rows``."""
    lines = [
        f"# {title} (generated)",
        "",
        f"Generated by `scripts/{script}` (batch {B}, seed {seed}) on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {_machine()}, {library}; "
        f"{seconds:.0f} s of wall time on that machine. Do not edit: rerun the script.",
        "",
        about,
        "",
    ]
    return "\n".join(lines + markdown_rows(rows)) + "\n"


def markdown_rows(rows) -> list[str]:
    """The table's header and one line per (form, setting, measured, SE, predicted, ratio, z)."""
    lines = ["| form | setting | measured | SE | predicted | ratio | z |", "|---|---|---|---|---|---|---|"]
    for form, setting, m, se, p, ratio, z in rows:
        lines.append(f"| `{form}` | {setting} | {m:.4g} | {se:.2g} | {p:.4g} | {ratio:.3f} | {z:+.1f} |")
    return lines


def run(argv, *, doc: str, batch: int, out: str, only: str, forms: dict, table) -> int:
    """The command line of the accuracy scripts (this one and quantised_accuracy.py): run the settings of each form
    named in ``--only`` (``forms[name](rows, batch, seed)`` appends its rows), then write ``table(rows, ...)``."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=batch, help=f"items a setting (the docs' table: {batch})")
    parser.add_argument("--out", default=out, help="a file, or - for stdout")
    parser.add_argument("--only", default=only)
    args = parser.parse_args(argv)
    rows, start = [], time.perf_counter()
    for name in args.only.split(","):
        forms[name.strip()](rows, args.batch, args.seed)
        print(f"{name}: {time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)
    emit(table(rows, seconds=time.perf_counter() - start, B=args.batch, seed=args.seed), args.out)
    return 0


def main(argv=None) -> int:
    torch.set_num_threads(1)
    only = "t14,t15,t16,t17,t18_t19"
    return run(argv, doc=__doc__, batch=32, out="docs/precision-accuracy.md", only=only, forms=globals(), table=table)


def emit(text: str, out: str) -> None:
    """``text`` to the file ``out``, or to stdout for ``-``."""
    if out == "-":
        print(text)
    else:
        with open(out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
