"""lacapacity.sweep: configuration validation, the Dataset schema, batching against unbatched draws,
the default study against theory (T5, T7, T12), and configurations never mixed in."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import xarray as xr
from test_sweep_support import one_torch_thread  # noqa: F401 - autouse fixture

from lacapacity import CapacityError, studies, sweep, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.sweep import Grid, Spec, Study
from lacapacity.sweep.jobs import check
from lacapacity.sweep.plan import Plan
from lacapacity.sweep.store import Store
from lacapacity.tasks import Bill, probe
from lacapacity.tasks.metrics import capacity

SMALL = ["variant=linear,delta", "keys=gaussian,orthogonal", "d=16,32", "load=1/2,1,3/2,2", "seed=0,1"]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    study = studies.get("capacity-vs-d").with_overrides(SMALL)
    out = tmp_path_factory.mktemp("small")
    return study, out, sweep.run(study, out=out, device="cpu", executor="serial", progress=False)


# ---------------------------------------------------------------- configuration


def test_unknown_fields_are_rejected_with_the_allowed_ones():
    base = studies.get("capacity-vs-d").to_json()
    with pytest.raises(CapacityError, match=r"unknown study field\(s\) colour; allowed: name, description, grid, task"):
        Study.from_dict({**base, "colour": "red"})
    with pytest.raises(
        CapacityError,
        match=r"unknown grid field\(s\) dims; allowed: variant, keys, feature, d, load, n, seed, dtype, dv",
    ):
        Study.from_dict({**base, "grid": {**base["grid"], "dims": [1]}})
    with pytest.raises(
        CapacityError,
        match=r"unknown recall field\(s\) metric; allowed: age_bins, decode, key_stats, queries, recent, top_k",
    ):
        Study.from_dict({**base, "task": {"kind": "recall", "metric": "mse"}})
    with pytest.raises(CapacityError, match=r"^vocab applies to mqar studies only \(kind=mqar\)$"):
        Study.from_dict({**base, "task": {"vocab": 8}})  # a field of another task names it
    with pytest.raises(
        CapacityError, match=r"unknown task kind 'recal'; known: bill, model, mqar, needle, recall, trained"
    ):
        Study.from_dict({**base, "task": {"kind": "recal"}})
    with pytest.raises(
        CapacityError, match=r"unknown --set field\(s\) width; allowed: variant, keys, .*, queries, recent$"
    ):
        studies.get("capacity-vs-d").with_overrides(["width=3"])
    assert Study.from_dict(base) == studies.get("capacity-vs-d")  # the dict form round-trips


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("d=0", "d must be a whole number >= 1"),
        ("d=16.5", "d must be a whole number >= 1"),
        ("load=-1", "load must be a finite number > 0"),
        ("seed=-2", "seed must be a whole number >= 0"),
        ("dtype=float64", "unknown dtype 'float64'; known: bfloat16, float16, float32"),
        ("values=uniform", "unknown value family 'uniform'; known: gaussian, orthonormal"),
        ("kind=train", "unknown task kind 'train'; known: bill, model, mqar, needle, recall, trained"),
        ("key_stats=maybe", "key_stats must be true or false"),
        ("variant=", "grid axis variant must list at least one value"),
        ("seed=1,1", "seed lists 1 more than once"),
        ("variant=delta(beta)", "parameters are written k=v"),
        ("d", "--set takes key=value"),
    ],
)
def test_bad_values_are_rejected(assignment, message):
    with pytest.raises(CapacityError, match=message):
        studies.get("capacity-vs-d").with_overrides([assignment])


def test_exactly_one_of_load_and_n():
    with pytest.raises(CapacityError, match="exactly one of load"):
        Grid(d=(16,), load=(1,), n=(4,))
    with pytest.raises(CapacityError, match="exactly one of load"):
        Grid(d=(16,))
    g = studies.get("capacity-vs-d").with_overrides(["n=4,8"]).grid  # setting n clears load
    assert g.load == () and g.n == (4, 8) and g.curve == "n"


@pytest.mark.parametrize(
    "assignment, message",
    [
        ("variant=linear,nosuch", "unknown variant 'nosuch'; known: .*delta.*linear"),
        ("variant=linear(colour=1)", "variant .linear. got unknown parameter\\(s\\) colour; allowed: normalize"),
        ("variant=delta(beta=3)", r"beta must lie in \(0, 2\)"),
        ("keys=nosuch", "unknown key family 'nosuch'; known: .*gaussian"),
        ("keys=correlated(rho=2)", r"rho must lie in \[0, 1\)"),
        ("keys=gaussian(rho=0.5)", r"key family 'gaussian' got unknown parameter\(s\) rho; allowed: none"),
        ("keys=simplex", "simplex keys exist for n <= d \\+ 1"),
        ("values=orthonormal", "orthonormal values need n <= dv"),
    ],
)
def test_names_and_parameters_are_checked_before_any_work(assignment, message):
    study = studies.get("capacity-vs-d").with_overrides(["d=16", "load=1,2", assignment])
    with pytest.raises(CapacityError, match=message):
        check(study)


def test_labels_parse_and_print():
    s = Spec.parse("gated_delta(alpha=0.99, beta=1)", "variant")
    assert s.name == "gated_delta" and s.kwargs == {"alpha": 0.99, "beta": 1}
    assert s.label == "gated_delta(alpha=0.99, beta=1)"
    assert Spec.parse({"name": "delta", "params": {"beta": 0.5}}, "variant").label == "delta(beta=0.5)"
    g = studies.get("capacity-vs-d").with_overrides(["variant=linear,delta(beta=0.5)", "load=1/8,1,16"]).grid
    assert [v.label for v in g.variant] == ["linear", "delta(beta=0.5)"] and g.load == (0.125, 1.0, 16.0)


def test_every_study_is_listed_and_either_checks_or_names_what_is_missing():
    names = studies.available()
    assert list(names)[0] == "capacity-vs-d"
    assert set(names) == {
        "capacity-vs-d",
        "interference-bound",
        "orthogonality",
        "variants",
        "feature-maps",
        "bill",
        "learned-keys",
        "pretrained-keys",
        "mqar",
        "frontier",
        "forgetting",
        "needle",
        "precision",
        "heads",
        "log-linear",
        "trained",
        "model",
    }
    assert all(desc and "\n" not in desc for desc in names.values())
    known = variants.available()
    for name in names:
        study = studies.get(name)
        assert study.name == name
        try:
            check(study)
        except CapacityError as exc:
            assert (
                "unknown variant" in str(exc)
                or "does not take" in str(exc)
                or "unknown key family" in str(exc)
                or "linear-attention-capacity[models]" in str(exc)
            ), (name, exc)
    for missing, study in (("softmax", "bill"), ("decay", "variants")):
        if missing not in known:
            with pytest.raises(CapacityError, match=f"unknown variant '{missing}'; known: "):
                check(studies.get(study))
    with pytest.raises(CapacityError, match="unknown study 'nosuch'; known: bill, capacity-vs-d"):
        studies.get("nosuch")


# ---------------------------------------------------------------- the Dataset


def test_dataset_follows_the_schema(small):
    study, out, res = small
    ds = xr.open_dataset(res.path)  # plain xarray, default engine
    assert res.path == out / "capacity-vs-d.nc"
    assert list(ds.mse.dims) == ["variant", "key_family", "d", "load", "seed"]
    assert list(ds.variant.values) == ["linear", "delta"] and list(ds["key_family"].values) == [
        "gaussian",
        "orthogonal",
    ]
    assert (
        list(ds.d.values) == [16, 32] and list(ds.seed.values) == [0, 1] and list(ds["load"].values) == [0.5, 1, 1.5, 2]
    )
    assert ds.n.dims == ("d", "load")
    assert ds.n.values.tolist() == [[max(1, round(x * d)) for x in (0.5, 1, 1.5, 2)] for d in (16, 32)]
    assert ds.dv.dims == ("d",) and ds.dv.values.tolist() == [16, 32] and str(ds.dtype.values) == "float32"
    for m, (long_name, units, desc) in probe.METRICS.items():
        assert ds[m].dims == ds.mse.dims and ds[m].attrs == {
            "long_name": long_name,
            "units": units,
            "description": desc,
        }
        assert np.isfinite(ds[m].values).all()
    n, d = ds.n.values.astype(float), ds.d.values[:, None].astype(float)
    expected = {
        "frame_bound": np.maximum(n / d - 1, 0),
        "welch_bound": np.where(n > d, np.sqrt(np.clip(n - d, 0, None) / (d * (n - 1))), 0),
        "random_keys_error": (n - 1) / d,
        "rank_bound": np.maximum(1 - d / n, 0),
        "optimal_gain_error": (n - 1) / (d + n - 1),
        "argmax_recall_pred": theory.argmax_recall(n, d, d),
    }
    for name, want in expected.items():
        assert ds[name].dims == ("d", "load") and "T" in ds[name].attrs["description"]
        np.testing.assert_allclose(ds[name].values, want, rtol=1e-12, err_msg=name)
    for attr in ("study", "description", "config", "config_hash", "versions", "device", "git_commit", "created"):
        assert isinstance(ds.attrs[attr], str) and ds.attrs[attr], attr
    config = json.loads(ds.attrs["config"])
    assert Study.from_dict({k: config[k] for k in ("name", "description", "grid", "task")}) == study
    assert config["run"]["executor"] == "serial" and ds.attrs["device"] == "cpu"
    assert ds.attrs["config_hash"] == study.config_hash()
    assert set(json.loads(ds.attrs["versions"])) >= {"capacity", "python", "torch", "triton", "numpy", "xarray"}
    memories = json.loads(ds.attrs["memories"])  # every parameter of every memory, defaults too
    assert memories["delta"] == {
        "class": "lacapacity.variants.delta:Delta",
        "params": {"beta": 1.0, "normalize": True, "backend": "auto"},
    }
    # capacity() reduces load; T7 puts n*(0.75) = 1 + 3d/4 for gaussian keys, between the loads 1/2 and 1
    # (well inside: T7's errors there are 1/2 - 1/d and 1 - 1/d)
    cap = capacity(ds.mean("seed"), metric="mse", threshold=0.75)
    assert cap.dims == ("variant", "key_family", "d")
    assert bool(
        (
            (cap.sel(variant="linear", key_family="gaussian") > cap.d / 2)
            & (cap.sel(variant="linear", key_family="gaussian") < cap.d)
        ).all()
    )
    ds.close()


def _brute_force(K, V):
    """mse, recall, signal of the additive memory, from scratch. K [n, d], V [n, dv] float64."""
    R = K @ (K.T @ V)  # [n, dv]
    mse = ((R - V) ** 2).sum(1).mean()
    recall = ((R @ V.T).argmax(1) == torch.arange(len(K))).double().mean()
    signal = ((R * V).sum(1) / (V * V).sum(1)).mean()
    return float(mse), float(recall), float(signal)


def test_one_write_pass_per_cell(small):
    """i.i.d. families: one write pass per (variant, keys, d) with every n and seed; orthogonal keys: one per n."""
    study, _, _ = small
    by = {}
    for p in Plan(study, torch.device("cpu")).passes({}):
        assert p.seeds == (0, 1)
        by.setdefault((p.cell.variant.label, p.cell.keys.label, p.cell.d), []).append(p.ns)
    for (_variant, fam, d), ns in by.items():
        pairs = tuple(max(1, round(x * d)) for x in (0.5, 1, 1.5, 2))
        assert ns == ([pairs] if fam == "gaussian" else [(n,) for n in pairs])
    assert len(by) == 2 * 2 * 2


def test_batched_groups_equal_independent_unbatched_draws(small):
    """Each point equals a from-scratch computation with that point's own seed and n (per-n draws for orthogonal keys)."""
    _, _, res = small
    ds = res.dataset.sel(variant="linear")
    for fam in ("gaussian", "orthogonal"):
        for d in (16, 32):
            for load in (0.5, 1.5, 2.0):
                for seed in (0, 1):
                    n = max(1, round(load * d))
                    n_draw = (
                        2 * d if fam == "gaussian" else n
                    )  # gaussian: prefix of the n_max draw; orthogonal: its own draw
                    K = keys.make(fam, n_draw, d, seed=seed)[0, :n].double()
                    V = values.make("gaussian", 2 * d, d, seed=seed)[0, :n].double()
                    want = _brute_force(K, V)
                    got = ds.sel(key_family=fam, d=d, load=load, seed=seed)
                    np.testing.assert_allclose(
                        [float(got.mse), float(got.recall), float(got.signal)],
                        want,
                        rtol=2e-5,
                        atol=2e-6,
                        err_msg=f"{fam} d={d} n={n} seed={seed}",
                    )


def test_default_study_numbers_meet_theory(tmp_path):
    """Gaussian keys: mse within 3 standard errors (over seeds) of T7's (n - 1)/d; orthogonal keys on T5."""
    study = studies.get("capacity-vs-d").with_overrides(["d=32,64", "load=1/2,2,4", "seed=0,1,2,3,4,5,6,7"])
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    for variant in ("linear",):
        g = ds.mse.sel(variant=variant, key_family="gaussian")
        mean, se = g.mean("seed"), g.std("seed", ddof=1) / math.sqrt(g.sizes["seed"])
        assert bool((abs(mean - ds.random_keys_error) <= 3 * se).all()), (mean - ds.random_keys_error) / se
        o = ds.mse.sel(variant=variant, key_family="orthogonal")
        mean, se = o.mean("seed"), o.std("seed", ddof=1) / math.sqrt(o.sizes["seed"])
        assert bool((abs(mean - ds.frame_bound) <= 3 * se + 1e-6).all()), (mean - ds.frame_bound) / se
    # below n = d orthonormal keys read back exactly with both rules (T5: error 0; T12 for delta)
    below = ds.mse.sel(key_family="orthogonal", load=0.5)
    assert float(below.max()) < 1e-10
    # the delta rule never does worse than the additive rule on these keys past d (it overwrites, not adds)
    past = ds.mse.sel(key_family="gaussian", load=4).mean("seed")
    assert bool((past.sel(variant="delta") < past.sel(variant="linear")).all())


def test_orthonormal_values_put_tight_frames_exactly_on_t5(tmp_path):
    """T4 + T5: with orthonormal values a tight frame's mean error is exactly n/d - 1, at every seed."""
    study = studies.get("capacity-vs-d").with_overrides(
        ["variant=linear", "keys=orthogonal", "d=16", "load=1/2,1,3/2,2,4", "seed=0,1,2", "values=orthonormal", "dv=64"]
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    assert int(ds.dv) == 64
    np.testing.assert_allclose(
        ds.mse.sel(variant="linear", key_family="orthogonal", d=16).values,
        np.broadcast_to(ds.frame_bound.values[0][:, None], (5, 3)),
        atol=1e-5,
    )


def test_dtype_and_dv_axes(tmp_path):
    study = studies.get("capacity-vs-d").with_overrides(
        ["variant=linear", "keys=gaussian", "d=16", "load=1,2", "seed=0", "dtype=float32,bfloat16", "dv=16,32"]
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    assert list(ds.mse.dims) == ["variant", "key_family", "d", "load", "seed", "dtype", "dv"]
    assert ds.argmax_recall_pred.dims == ("d", "load", "dv")
    f32, bf16 = ds.mse.sel(dtype="float32"), ds.mse.sel(dtype="bfloat16")
    assert bool((abs(f32 - bf16) < 0.05).all()) and not bool(
        (f32 == bf16).all()
    )  # rounding of the inputs shows, slightly


def test_a_grid_of_pair_counts_has_n_as_dimension_and_load_as_coordinate(tmp_path):
    study = studies.get("capacity-vs-d").with_overrides(
        ["variant=linear", "keys=gaussian", "d=16,32", "n=4,16,64", "seed=0,1"]
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    assert list(ds.mse.dims) == ["variant", "key_family", "d", "n", "seed"]
    assert ds["load"].dims == ("d", "n") and ds["load"].values.tolist() == [[0.25, 1, 4], [0.125, 0.5, 2]]
    assert ds.random_keys_error.dims == ("d", "n") and ds.random_keys_error.sel(d=32, n=64) == 63 / 32
    cap = capacity(ds.mean("seed"), metric="mse", threshold=0.5)  # reduces n
    assert cap.dims == ("variant", "key_family", "d")


def test_key_statistics_match_describe(tmp_path):
    study = studies.get("orthogonality").with_overrides(
        ["keys=gaussian,correlated(rho=0.4)", "d=16", "load=1/2,2", "seed=0,1"]
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    K = keys.make("correlated", 32, 16, seed=1, rho=0.4)
    want = keys.describe(K)
    got = ds.sel(variant="linear", key_family="correlated(rho=0.4)", d=16, load=2.0, seed=1)
    for name in ("mean_sq_coherence", "max_coherence", "frame_potential_ratio", "effective_rank"):
        np.testing.assert_allclose(float(got[name]), float(want[name][0]), rtol=1e-6, err_msg=name)
    assert float(ds.mean_sq_coherence.sel(key_family="correlated(rho=0.4)").mean()) > 2.5 * float(
        ds.mean_sq_coherence.sel(key_family="gaussian").mean()
    )


class _KVCache:
    """A softmax-attention memory written for this test: it keeps every pair (a dict of two growing tensors)."""

    name = "kv-cache"

    def init_state(self, batch, d, dv, *, device=None):
        return {"k": torch.zeros(batch, 0, d), "v": torch.zeros(batch, 0, dv)}

    def write(self, state, k, v):
        return {"k": torch.cat([state["k"], k], 1), "v": torch.cat([state["v"], v], 1)}

    def read(self, state, q):
        return torch.softmax(8.0 * q @ state["k"].transpose(1, 2), -1) @ state["v"]

    def state_numel(self, d, dv):
        return 0  # grows with n: the bill measures it


def test_bill_measures_state_size_and_decode_time(tmp_path, monkeypatch):
    monkeypatch.setattr(variants, "_REGISTRY", variants._REGISTRY.copy())
    variants.register("kv-cache", _KVCache, "test: keeps every pair")
    study = Study(
        "bill-test",
        "bill of two memories",
        Grid(variant=("kv-cache", "linear"), keys=("gaussian",), d=(8, 16), n=(4, 64, 256), seed=(0,)),
        Bill(repeats=3),
    )
    ds = sweep.run(study, out=tmp_path, device="cpu", progress=False).dataset
    assert list(ds.state_numel.dims) == ["variant", "d", "n"]
    assert ds.state_numel.sel(variant="linear").values.tolist() == [[64] * 3, [256] * 3]  # d dv, whatever n
    np.testing.assert_array_equal(
        ds.state_numel.sel(variant="kv-cache").values, ds.softmax_cache.values
    )  # n (d + dv), measured
    assert bool((ds.decode_seconds > 0).all()) and bool((ds.decode_seconds < 1).all())
    np.testing.assert_allclose(ds.softmax_cache.values, [[n * 2 * d for n in (4, 64, 256)] for d in (8, 16)])
    assert ds.attrs["break_even_n"].tolist() == [4.0, 8.0]


# ---------------------------------------------------------------- never mixed in


@pytest.mark.slow
def test_a_different_configuration_is_never_mixed_in(tmp_path):
    study = studies.get("capacity-vs-d").with_overrides(
        ["variant=linear,delta", "keys=gaussian", "d=16", "load=1/2,2", "seed=0,1"]
    )
    out = tmp_path / "shared"
    first = sweep.run(study, out=out, device="cpu", progress=False)
    assert first.reused == 0 and first.measured == 2 * 2 * 2 and first.passes == 2
    again = sweep.run(study, out=out, device="cpu", progress=False)
    assert again.measured == 0 and again.reused == 8 and again.dataset.equals(first.dataset)
    # what a change keeps: the points of the first run it still asks for, and nothing else
    for change, kept in (
        (["seed=0,1,2"], 8),
        (["load=1/2,1"], 4),
        (["values=orthonormal", "dv=64"], 0),
        (["dtype=bfloat16"], 0),
    ):
        other = study.with_overrides(change)
        res = sweep.run(other, out=out, device="cpu", progress=False)
        assert res.reused == kept, change
        fresh = sweep.run(other, out=tmp_path / "_".join(change).replace("/", "-"), device="cpu", progress=False)
        assert res.dataset.drop_attrs().equals(fresh.dataset.drop_attrs()), change  # bit for bit a fresh run's


def test_a_file_with_another_hash_inside_is_not_taken(small, tmp_path):
    study, out, first = small
    store = Store(out / ".sweep" / study.name)
    plan = Plan(study, torch.device("cpu"))
    k0, k1 = (plan.keys[c] for c in plan.cells[:2])
    target = tmp_path / "copy"
    copy = Store(target / ".sweep" / study.name)
    copy.root.mkdir(parents=True)
    (copy.path(k1)).write_bytes(store.path(k0).read_bytes())  # cell 0's numbers under cell 1's name
    names = list(probe.METRICS)
    assert copy.load(k1, names, {}) == ({}, {}, "its key does not match its name")
    assert copy.load(k0, names, {}) == ({}, {}, None)
    res = sweep.run(study, out=target, device="cpu", progress=False)
    assert res.reused == 0 and res.dataset.drop_attrs().equals(first.dataset.drop_attrs())


def test_decode_false_drops_recall_and_keeps_the_rest(tmp_path):
    base = ["variant=linear", "keys=gaussian", "d=16", "load=1/2,2", "seed=0,1"]
    full = sweep.run(
        studies.get("capacity-vs-d").with_overrides(base), out=tmp_path, device="cpu", progress=False
    ).dataset
    lean = sweep.run(
        studies.get("capacity-vs-d").with_overrides(base + ["decode=false"]), out=tmp_path, device="cpu", progress=False
    ).dataset
    assert "recall" in full and "recall" not in lean
    np.testing.assert_array_equal(lean.mse.values, full.mse.values)
