"""Print the Markdown table of docs/fla.md: flash-linear-attention's plain-torch references through ``from_fla``.

Every recurrent reference of fla-core 0.6.0 that keeps one [B, H, K, V] state is wrapped with
``capacity.variants.from_fla`` (no adapter functions) and probed: mean squared read error at
n = 32, 64, 256 for d = dv = 64, gaussian unit keys and values, 4 seeds. Where a built-in
variant is the same memory, the table gives the max relative difference of the two states
(max |S_fla - S_ours| / max |S_ours| over the checkpoints).

    python docs/scripts/fla_table.py            # needs: pip install --no-deps fla-core==0.6.0 einops

``references(d)`` is the list the table and tests/test_fla.py share.
"""

from __future__ import annotations

import argparse
import importlib
import math
import platform
import time
import warnings

import torch

from capacity import keys, probe, values, variants
from capacity.variants import from_fla

GATE = 0.95  # scalar gate a
ALPHA = (0.9, 1.0)  # per-channel gates alpha: linspace over the d key channels


def _fn(path: str):
    module, name = path.rsplit(".", 1)
    with warnings.catch_warnings():  # importing fla on a CPU warns that Triton is not supported
        warnings.simplefilter("ignore")
        return getattr(importlib.import_module(module), name)


def references(d: int) -> list[dict]:
    """One entry per reference: ``name``, ``path`` (fla function), ``call`` (the from_fla call as text),
    ``make()`` (builds the variant) and ``builtin`` (the same memory built in, or None)."""
    alpha = torch.linspace(*ALPHA, d)  # [d]
    log_alpha = alpha.log().tolist()
    g = math.log(GATE)
    out = []

    def add(name, path, call, kwargs, builtin):
        out.append(
            {
                "name": name,
                "path": path,
                "call": call,
                "make": lambda: from_fla(_fn(path), name=f"fla:{name}", **kwargs),
                "builtin": builtin,
            }
        )

    add(
        "linear attention",
        "fla.ops.linear_attn.naive.naive_recurrent_linear_attn",
        "from_fla(naive_recurrent_linear_attn)",
        {},
        lambda: variants.get("linear"),
    )
    add(
        "delta rule",
        "fla.ops.delta_rule.naive.delta_rule_recurrence",
        'from_fla(delta_rule_recurrence, layout="BHTK", per_token={"beta": 1.0})',
        {"layout": "BHTK", "per_token": {"beta": 1.0}},
        lambda: variants.get("delta", beta=1.0, normalize=False),
    )
    add(
        "gated delta rule",
        "fla.ops.gated_delta_rule.naive.naive_recurrent_gated_delta_rule",
        'from_fla(naive_recurrent_gated_delta_rule, per_token={"beta": 1.0, "g": math.log(0.95)})',
        {"per_token": {"beta": 1.0, "g": g}},
        lambda: variants.get("gated_delta", alpha=GATE, beta=1.0, normalize=False),
    )
    add(
        "KDA",
        "fla.ops.kda.naive.naive_recurrent_kda",
        'from_fla(naive_recurrent_kda, per_token={"beta": 1.0, "g": alpha.log().tolist()})',
        {"per_token": {"beta": 1.0, "g": log_alpha}},
        lambda: variants.get("kda", alpha=alpha.tolist(), beta=1.0, normalize=False),
    )
    add(
        "GLA",
        "fla.ops.gla.naive.naive_recurrent_gla",
        'from_fla(naive_recurrent_gla, per_token={"gk": alpha.log().tolist()})',
        {"per_token": {"gk": log_alpha}},
        lambda: variants.get("gla", alpha=alpha.tolist()),
    )
    add(
        "simple GLA",
        "fla.ops.simple_gla.naive.naive_recurrent_simple_gla",
        'from_fla(naive_recurrent_simple_gla, per_token={"g": math.log(0.95)})',
        {"per_token": {"g": g}},
        lambda: variants.get("decay", alpha=GATE),
    )
    add(
        "RWKV-6",
        "fla.ops.rwkv6.recurrent_naive.naive_recurrent_rwkv6",
        'from_fla(naive_recurrent_rwkv6, layout="BHTK", per_token={"w": alpha.log().tolist()}, u=torch.zeros(1, d))',
        {"layout": "BHTK", "per_token": {"w": log_alpha}, "u": torch.zeros(1, d)},
        lambda: variants.get("gla", alpha=alpha.tolist()),
    )
    add(
        "IPLR",
        "fla.ops.generalized_delta_rule.iplr.naive.iplr_recurrence",
        'from_fla(iplr_recurrence, layout="BHTK", per_token={"alpha": lambda k: -k, "beta": lambda k: k})',
        {"layout": "BHTK", "per_token": {"alpha": lambda k: -k, "beta": lambda k: k}},
        lambda: variants.get("delta", beta=1.0, normalize=False),
    )
    add(
        "DPLR",
        "fla.ops.generalized_delta_rule.dplr.naive.dplr_recurrence",
        'from_fla(dplr_recurrence, layout="BHTK", '
        'per_token={"alpha": lambda k: -k * alpha, "beta": lambda k: k, "gk": alpha.log().tolist()})',
        {
            "layout": "BHTK",
            "per_token": {"alpha": lambda k: -k * alpha.to(k.device), "beta": lambda k: k, "gk": log_alpha},
        },
        lambda: variants.get("kda", alpha=alpha.tolist(), beta=1.0, normalize=False),
    )
    add(
        "Comba",
        "fla.ops.comba.naive.naive_recurrent_comba",
        'from_fla(naive_recurrent_comba, per_token={"p": lambda k: k, "beta": 1.0, "g": math.log(0.95)})',
        {"per_token": {"p": lambda k: k, "beta": 1.0, "g": g}},
        lambda: variants.get("gated_delta", alpha=GATE, beta=1.0, normalize=False),
    )
    add(
        "Comba, p = k/2",
        "fla.ops.comba.naive.naive_recurrent_comba",
        'from_fla(naive_recurrent_comba, per_token={"p": lambda k: 0.5 * k, "beta": 1.0, "g": math.log(0.95)})',
        {"per_token": {"p": lambda k: 0.5 * k, "beta": 1.0, "g": g}},
        None,
    )
    add(
        "gated delta product",
        "fla.ops.gated_delta_product.naive.naive_recurrent_gated_delta_product",
        'from_fla(naive_recurrent_gated_delta_product, per_token={"g": math.log(0.95), "beta": 1.0}, scale=1.0)',
        {"per_token": {"g": g, "beta": 1.0}, "scale": 1.0},
        lambda: variants.get("gated_delta", alpha=GATE, beta=1.0, normalize=False),
    )
    return out


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-30))


def measure(entry: dict, d: int, checkpoints: list[int], seeds: list[int]) -> dict:
    """Mean mse at each checkpoint (over the seeds) and, with a built-in, the max relative state difference."""
    n = checkpoints[-1]
    K = keys.make("gaussian", n, d, batch=len(seeds), seed=seeds)  # [B, n, d], unit rows
    V = values.make("gaussian", n, d, batch=len(seeds), seed=seeds)  # [B, n, dv], unit rows
    mem = entry["make"]()
    mse = probe.recall(mem, K, V, checkpoints=checkpoints, decode=False).mse.mean("batch").values
    row = {"mse": [float(x) for x in mse], "rel_diff": None}
    if entry["builtin"] is not None:
        ours = entry["builtin"]()
        a, b = mem.init_state(len(seeds), d, d), ours.init_state(len(seeds), d, d)
        worst, start = 0.0, 0
        for c in checkpoints:
            a, b = mem.write(a, K[:, start:c], V[:, start:c]), ours.write(b, K[:, start:c], V[:, start:c])
            worst, start = max(worst, _rel(a, b)), c
        row["rel_diff"] = worst
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
        mses = " | ".join(f"{x:.3f}" for x in r["mse"])
        print(f"| {e['name']} | `{e['path'].removeprefix('fla.ops.')}` | `{e['call']}` | {mses} | {same} | {diff} |")
    print(
        f"\nd = dv = {args.d}, gaussian unit keys and values, seeds {seeds}, alpha = linspace({ALPHA[0]}, "
        f"{ALPHA[1]}, d); "
        f"torch {torch.__version__}, {platform.machine()}, {time.perf_counter() - t0:.1f} s"
    )


if __name__ == "__main__":
    main()
