"""Print the Markdown table of docs/fla.md: flash-linear-attention's plain-torch references through ``from_fla``.

Every recurrent reference of fla-core 0.6.0 that keeps one [B, H, K, V] state is wrapped with
``lacapacity.variants.from_fla`` (no adapter functions) and probed: mean squared read error at
n = 32, 64, 256 for d = dv = 64, gaussian unit keys and values, 4 seeds. Where a built-in
variant is the same memory, the table gives the max relative difference of the two states
(max |S_fla - S_ours| / max |S_ours| over the checkpoints).

    python docs/scripts/fla_table.py            # needs: pip install --no-deps fla-core==0.6.0 einops

``references(d)`` is the list the table and tests/variants/test_fla.py share. Ops with other conventions go through
from_fla's ``names``, ``states`` and ``read`` (momentum delta rule, MesaNet, TTT-linear; for MesaNet, whose state
holds K^T K, the reads are compared). ``refused(d)`` lists the ops that do not fit and the one-line error each
raises, and ``interpreted()`` runs fla's fused Triton ops on the CPU under ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import math
import os
import platform
import subprocess
import sys
import time
import warnings

import torch

from lacapacity import variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.variants import from_fla

GATE = 0.95  # scalar gate a
ALPHA = (0.9, 1.0)  # per-channel gates alpha: linspace over the d key channels


def _fn(path: str):
    module, name = path.rsplit(".", 1)
    with warnings.catch_warnings():  # importing fla on a CPU warns that Triton is not supported
        warnings.simplefilter("ignore")
        return getattr(importlib.import_module(module), name)


def ident(k):
    return k


def neg(k):
    return -k


def mesa_read(q, state, lam):
    """MesaNet's read: q* = (H_kk + lam I)^-1 q, o = q* H_kv (its state keeps H_kk = sum k^T k, H_kv = sum k^T v)."""
    A = state["h_kk_init"].double() + lam * torch.eye(q.shape[-1], dtype=torch.float64, device=q.device)
    x = torch.linalg.solve(A, q.double().transpose(1, 2))  # [B, d, m]
    return (x.transpose(1, 2) @ state["h_kv_init"].double()).float()


def ttt_read(q, state):
    """TTT-linear's prediction of the value: q + w LN(q h + hb) with the table's LN weight w = d^-1/2 and bias 0
    (it learns the residual v - k; the weight gives LN's output the unit norm of the values)."""
    z = q @ state["initial_state"] + state["initial_state_bias"]
    return q + torch.nn.functional.layer_norm(z, (z.shape[-1],), eps=1e-6) * z.shape[-1] ** -0.5


LAM = 0.05  # MesaNet's ridge lambda


def _entry(name: str, path: str, call: str, kwargs: dict, label: str, **more: object) -> dict:
    """A row of a table: ``name``, ``path`` (the fla function), ``call`` (the from_fla call as text), ``make()``
    (``from_fla`` of that function with ``kwargs``, named ``label``) and ``more`` (``builtin`` or ``why``)."""
    return {"name": name, "path": path, "call": call, "make": lambda: from_fla(_fn(path), name=label, **kwargs), **more}


def _reference(name: str, path: str, call: str, kwargs: dict, builtin: object) -> dict:
    """A row of the references table; ``builtin`` builds the same memory built in (or is None)."""
    return _entry(name, path, call, kwargs, f"fla:{name}", builtin=builtin)


def _refused(name: str, path: str, call: str, kwargs: dict, why: str) -> dict:
    """A row of the table of the ops that do not fit; ``why`` says why, in a sentence."""
    return _entry(name, path, call, kwargs, f"fla:{path.rsplit('.', 1)[1]}", why=why)


def references(d: int) -> list[dict]:
    """One entry per reference: ``name``, ``path`` (fla function), ``call`` (the from_fla call as text),
    ``make()`` (builds the variant) and ``builtin`` (the same memory built in, or None)."""
    alpha = torch.linspace(*ALPHA, d)  # [d]
    log_alpha = alpha.log().tolist()
    g = math.log(GATE)
    return [
        _reference(
            "linear attention",
            "fla.ops.linear_attn.naive.naive_recurrent_linear_attn",
            "from_fla(naive_recurrent_linear_attn)",
            {},
            lambda: variants.get("linear"),
        ),
        _reference(
            "delta rule",
            "fla.ops.delta_rule.naive.delta_rule_recurrence",
            'from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 1.0})',
            {"layout": "BHTK", "per_token": {"beta": 1.0}},
            lambda: variants.get("delta", beta=1.0, normalize=False),
        ),
        _reference(
            "gated delta rule",
            "fla.ops.gated_delta_rule.naive.naive_recurrent_gated_delta_rule",
            'from_fla(naive_recurrent_gated_delta_rule, per_token={"beta": 1.0, "g": math.log(0.95)})',
            {"per_token": {"beta": 1.0, "g": g}},
            lambda: variants.get("gated_delta", alpha=GATE, beta=1.0, normalize=False),
        ),
        _reference(
            "KDA",
            "fla.ops.kda.naive.naive_recurrent_kda",
            'from_fla(naive_recurrent_kda, per_token={"beta": 1.0, "g": alpha.log().tolist()})',
            {"per_token": {"beta": 1.0, "g": log_alpha}},
            lambda: variants.get("kda", alpha=alpha.tolist(), beta=1.0, normalize=False),
        ),
        _reference(
            "GLA",
            "fla.ops.gla.naive.naive_recurrent_gla",
            'from_fla(naive_recurrent_gla, per_token={"gk": alpha.log().tolist()})',
            {"per_token": {"gk": log_alpha}},
            lambda: variants.get("gla", alpha=alpha.tolist()),
        ),
        _reference(
            "simple GLA",
            "fla.ops.simple_gla.naive.naive_recurrent_simple_gla",
            'from_fla(naive_recurrent_simple_gla, per_token={"g": math.log(0.95)})',
            {"per_token": {"g": g}},
            lambda: variants.get("decay", alpha=GATE),
        ),
        _reference(
            "RWKV-6",
            "fla.ops.rwkv6.recurrent_naive.naive_recurrent_rwkv6",
            'from_fla(naive_recurrent_rwkv6, layout="BHTK", per_token={"w": alpha.log().tolist()}, u=torch.zeros(1, d))',
            {"layout": "BHTK", "per_token": {"w": log_alpha}, "u": torch.zeros(1, d)},
            lambda: variants.get("gla", alpha=alpha.tolist()),
        ),
        _reference(
            "IPLR",
            "fla.ops.generalized_delta_rule.iplr.naive.iplr_recurrence",
            'from_fla(iplr_recurrence, layout="BHTK", per_token={"alpha": lambda k: -k, "beta": lambda k: k})',
            {"layout": "BHTK", "per_token": {"alpha": lambda k: -k, "beta": lambda k: k}},
            lambda: variants.get("delta", beta=1.0, normalize=False),
        ),
        _reference(
            "DPLR",
            "fla.ops.generalized_delta_rule.dplr.naive.dplr_recurrence",
            'from_fla(dplr_recurrence, layout="BHTK", '
            'per_token={"alpha": lambda k: -k * alpha, "beta": lambda k: k, "gk": alpha.log().tolist()})',
            {
                "layout": "BHTK",
                "per_token": {"alpha": lambda k: -k * alpha.to(k.device), "beta": lambda k: k, "gk": log_alpha},
            },
            lambda: variants.get("kda", alpha=alpha.tolist(), beta=1.0, normalize=False),
        ),
        _reference(
            "Comba",
            "fla.ops.comba.naive.naive_recurrent_comba",
            'from_fla(naive_recurrent_comba, per_token={"p": lambda k: k, "beta": 1.0, "g": math.log(0.95)})',
            {"per_token": {"p": lambda k: k, "beta": 1.0, "g": g}},
            lambda: variants.get("gated_delta", alpha=GATE, beta=1.0, normalize=False),
        ),
        _reference(
            "Comba, p = k/2",
            "fla.ops.comba.naive.naive_recurrent_comba",
            'from_fla(naive_recurrent_comba, per_token={"p": lambda k: 0.5 * k, "beta": 1.0, "g": math.log(0.95)})',
            {"per_token": {"p": lambda k: 0.5 * k, "beta": 1.0, "g": g}},
            None,
        ),
        _reference(
            "gated delta product",
            "fla.ops.gated_delta_product.naive.naive_recurrent_gated_delta_product",
            'from_fla(naive_recurrent_gated_delta_product, per_token={"g": math.log(0.95), "beta": 1.0}, scale=1.0)',
            {"per_token": {"g": g, "beta": 1.0}, "scale": 1.0},
            lambda: variants.get("gated_delta", alpha=GATE, beta=1.0, normalize=False),
        ),
        _reference(
            "momentum delta rule",
            "fla.ops.momentum_delta_rule.naive.recurrent_momentum_delta_rule_ref",
            'from_fla(recurrent_momentum_delta_rule_ref, states={"initial_S": "KV", "initial_M": "KV"}, '
            'per_token={"log_alpha": math.log(0.95), "log_mu": math.log(0.5), "p": ident, "beta": 1.0, "eta": 0.5})',
            {
                "states": {"initial_S": "KV", "initial_M": "KV"},
                "per_token": {"log_alpha": g, "log_mu": math.log(0.5), "p": ident, "beta": 1.0, "eta": 0.5},
            },
            None,
        ),
        _reference(
            "MesaNet",
            "fla.ops.mesa_net.naive.naive_mesa_net_exact",
            'from_fla(naive_mesa_net_exact, states={"h_kk_init": "KK", "h_kv_init": "KV"}, '
            'per_token={"g": 0.0, "beta": 1.0}, read=partial(mesa_read, lam=0.05), lamb=torch.full((1, d), 0.05), dims=d)',
            {
                "states": {"h_kk_init": "KK", "h_kv_init": "KV"},
                "per_token": {"g": 0.0, "beta": 1.0},
                "read": functools.partial(mesa_read, lam=LAM),
                "lamb": torch.full((1, d), LAM),
                "dims": d,
            },
            lambda: variants.get("lsq", lam=LAM),
        ),
        _reference(
            "TTT-linear",
            "fla.ops.ttt.naive.ttt_linear",
            'from_fla(ttt_linear, layout="BHTK", states={"initial_state": "KV", "initial_state_bias": "1V"}, '
            'per_token={"eta": 0.1}, read=ttt_read, w=torch.full((1, d), d**-0.5), b=torch.zeros(1, d), scale=1.0, '
            "eps=1e-6, mini_batch_size=1, dims=d)",
            {
                "layout": "BHTK",
                "states": {"initial_state": "KV", "initial_state_bias": "1V"},
                "per_token": {"eta": 0.1},
                "read": ttt_read,
                "w": torch.full((1, d), d**-0.5),
                "b": torch.zeros(1, d),
                "scale": 1.0,
                "eps": 1e-6,
                "mini_batch_size": 1,
                "dims": d,
            },
            None,
        ),
    ]


def refused(d: int) -> list[dict]:
    """The ops that do not fit: ``name``, ``path``, ``call`` (text), ``make()`` and ``why`` (a sentence)."""
    alpha = torch.linspace(*ALPHA, d)
    return [
        _refused(
            "Titans",
            "fla.ops.titans.naive.titans_linear",
            'from_fla(titans_linear, layout="BHTK", per_token={"theta": 0.1, "alpha": 0.1, "eta": 0.9}, '
            "w=torch.ones(1, d), b=torch.zeros(1, d), eps=1e-6, chunk_size=16, dims=d)",
            {
                "layout": "BHTK",
                "per_token": {"theta": 0.1, "alpha": 0.1, "eta": 0.9},
                "w": torch.ones(1, d),
                "b": torch.zeros(1, d),
                "eps": 1e-6,
                "chunk_size": 16,
                "dims": d,
            },
            "its theta, alpha and eta are indexed [B, H, T, 1] (one per token, with a trailing axis of 1), which "
            "per_token builds as [B, H, T] or [B, H, T, K]; and it returns only M, not its momentum S or the M the "
            "gradient is taken at, so a second write could not continue the first",
        ),
        _refused(
            "HGRN",
            "fla.ops.hgrn.naive.naive_recurrent_hgrn",
            "from_fla(naive_recurrent_hgrn)",
            {},
            "it takes (x, g), not (q, k, v): h = exp(g) h + x is one number per channel, a vector state with no key "
            "or value to map (names= cannot help: there is no outer product k^T v to store pairs in)",
        ),
        _refused(
            "RWKV-7",
            "fla.ops.rwkv7.fused_recurrent_rwkv7",
            'from_fla(fused_recurrent_rwkv7, names={"q": "r"}, per_token={"w": alpha.log().tolist(), "a": neg, '
            '"b": ident}, scale=1.0)',
            {"names": {"q": "r"}, "per_token": {"w": alpha.log().tolist(), "a": neg, "b": ident}, "scale": 1.0},
            "names maps its receptance r to q, but fla 0.6.0 ships RWKV-7 as fused Triton kernels only (no plain-torch "
            "reference), and these are autotuned: on a CPU, even under TRITON_INTERPRET=1, the autotuner finds no GPU "
            "driver to time its configurations with. On a CUDA device the same call wraps it (its recurrence is "
            "DPLR's, the row above)",
        ),
    ]


def refusal(entry: dict, d: int) -> str:
    """The one-line CapacityError a user meets when writing through a refused op."""
    from lacapacity.errors import CapacityError

    mem = entry["make"]()
    K = keys.make("gaussian", 8, d, batch=1, seed=0)
    V = values.make("gaussian", 8, d, batch=1, seed=0)
    try:
        mem.write(mem.init_state(1, d, d), K, V)
    except CapacityError as exc:
        return str(exc)
    return "(no error: it ran)"


INTERPRETED = """
import math, warnings, torch
warnings.simplefilter("ignore")
from lacapacity import variants
from lacapacity.inputs import keys
from lacapacity.inputs import values
from lacapacity.errors import CapacityError
from lacapacity.variants import from_fla
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule
from fla.ops.rwkv7 import fused_recurrent_rwkv7
K = keys.make("gaussian", 32, 16, batch=2, seed=0); V = values.make("gaussian", 32, 16, batch=2, seed=0)
mem = from_fla(fused_recurrent_gated_delta_rule, per_token={"g": math.log(0.95), "beta": 1.0})
ours = variants.get("gated_delta", alpha=0.95, beta=1.0, normalize=False)
a, b = mem.write(mem.init_state(2, 16, 16), K, V), ours.write(ours.init_state(2, 16, 16), K, V)
print("gated_delta_rule.fused_recurrent_gated_delta_rule: runs; max rel. diff to the built-in %.1e"
      % float((a - b).abs().max() / b.abs().max()))
rw = from_fla(fused_recurrent_rwkv7, names={"q": "r"}, per_token={"w": [0.0] * 16, "a": lambda k: -k, "b": lambda k: k})
try:
    rw.write(rw.init_state(2, 16, 16), K, V); print("rwkv7.fused_recurrent_rwkv7: runs")
except CapacityError as exc:
    print("rwkv7.fused_recurrent_rwkv7: " + str(exc).split(" raised ", 1)[1])
"""


def interpreted() -> list[str]:
    """Two fused Triton ops of fla run on this CPU under TRITON_INTERPRET=1 (a subprocess): one line each."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", INTERPRETED], capture_output=True, text=True, env=env, timeout=900)
    lines = [x for x in proc.stdout.splitlines() if x.strip()]
    return lines or [f"(the interpreter run failed: {proc.stderr.strip().splitlines()[-1:]})"]


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def measure(entry: dict, d: int, checkpoints: list[int], seeds: list[int]) -> dict:
    """Mean mse at each checkpoint (over the seeds) and, with a built-in, the max relative state difference."""
    n = checkpoints[-1]
    K = keys.make("gaussian", n, d, batch=len(seeds), seed=seeds)  # [B, n, d], unit rows
    V = values.make("gaussian", n, d, batch=len(seeds), seed=seeds)  # [B, n, dv], unit rows
    mem = entry["make"]()
    mse = probe.recall(mem, K, V, checkpoints=checkpoints, decode=False).mse.mean("batch").values
    row = {"mse": [float(x) for x in mse], "rel_diff": None, "compared": None}
    if entry["builtin"] is not None:
        ours = entry["builtin"]()
        a, b = mem.init_state(len(seeds), d, d), ours.init_state(len(seeds), d, d)
        reads = isinstance(a, dict) or not isinstance(b, torch.Tensor)  # states of other forms: compare the reads
        worst, start = 0.0, 0
        for c in checkpoints:
            a, b = mem.write(a, K[:, start:c], V[:, start:c]), ours.write(b, K[:, start:c], V[:, start:c])
            diff = _rel(mem.read(a, K[:, :c]), ours.read(b, K[:, :c])) if reads else _rel(a, b)
            worst, start = max(worst, diff), c
        row["rel_diff"], row["compared"] = worst, "reads" if reads else "states"
    return row


BUILTIN_CALL = {  # the built-in each row is compared with, as text
    "linear attention": 'get("linear")',
    "delta rule": 'get("delta", beta=1.0, normalize=False)',
    "gated delta rule": 'get("gated_delta", alpha=0.95, beta=1.0, normalize=False)',
    "KDA": 'get("kda", alpha=alpha, beta=1.0, normalize=False)',
    "GLA": 'get("gla", alpha=alpha)',
    "simple GLA": 'get("decay", alpha=0.95)',
    "RWKV-6": 'get("gla", alpha=alpha)',
    "IPLR": 'get("delta", beta=1.0, normalize=False)',
    "DPLR": 'get("kda", alpha=alpha, beta=1.0, normalize=False)',
    "Comba": 'get("gated_delta", alpha=0.95, beta=1.0, normalize=False)',
    "gated delta product": 'get("gated_delta", alpha=0.95, beta=1.0, normalize=False)',
    "MesaNet": 'get("lsq", lam=0.05)',
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args(argv)
    cps, seeds = [32, 64, 256], list(range(args.seeds))
    print(
        f"| memory | fla 0.6.0 reference | wrapped as | mse n = {cps[0]} | mse n = {cps[1]} | mse n = {cps[2]} | "
        "built-in, same memory | max rel. diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for e in references(args.d):
        r = measure(e, args.d, cps, seeds)
        same = f"`{BUILTIN_CALL[e['name']]}`" if e["builtin"] is not None else "none"
        diff = f"{r['rel_diff']:.1e}" if r["rel_diff"] is not None else "n/a"
        diff += " (reads)" if r["compared"] == "reads" else ""
        mses = " | ".join(f"{x:.3f}" for x in r["mse"])
        print(f"| {e['name']} | `{e['path'].removeprefix('fla.ops.')}` | `{e['call']}` | {mses} | {same} | {diff} |")
    print(
        f"\nd = dv = {args.d}, gaussian unit keys and values, seeds {seeds}, alpha = linspace({ALPHA[0]}, "
        f"{ALPHA[1]}, d); "
        f"torch {torch.__version__}, {platform.machine()}, {time.perf_counter() - t0:.1f} s"
    )
    print("\n| op | fla 0.6.0 | tried as | why it does not fit | the error a user sees |")
    print("|---|---|---|---|---|")
    for e in refused(args.d):
        msg = refusal(e, args.d).replace("|", "\\|")
        print(f"| {e['name']} | `{e['path'].removeprefix('fla.ops.')}` | `{e['call']}` | {e['why']} | `{msg}` |")
    print("\nUnder TRITON_INTERPRET=1 on this CPU (d = 16, n = 32):\n")
    for line in interpreted():
        print(f"- {line}")


if __name__ == "__main__":
    main()
