"""One name per concept (docs/naming.md): every registry lists itself with available(), every old spelling warns
and gives the same result as the new one, both spellings at once are an error, and no public signature uses an
old spelling."""

import importlib
import inspect
import warnings

import numpy as np
import pytest
import torch
from capacity.kernels import reference

from capacity import (
    CapacityError,
    cli,
    features,
    kernels,
    keys,
    labels,
    plots,
    probe,
    studies,
    sweep,
    theory,
    values,
    variants,
)
from capacity.variants.delta import GatedDelta
from capacity.variants.gated import Decay
from capacity.variants.softmax import Softmax

DEPRECATED = DeprecationWarning
render_mod = importlib.import_module("capacity.plots.render")  # the module (capacity.plots.render is the function)


def _kv(n=24, d=8, dv=6, batch=2):
    return keys.make("gaussian", n, d, batch=batch, seed=0), values.make("gaussian", n, dv, batch=batch, seed=1)


def _reads(mem, K, V):
    return mem.read(mem.write(mem.init_state(K.shape[0], K.shape[2], V.shape[2]), K, V), K)


# ------------------------------------------------------------------ registries: available() everywhere


def test_every_registry_lists_itself_with_available():
    listed = {
        "keys": keys.available(),
        "values": values.available(),
        "variants": variants.available(),
        "features": features.available(),
        "studies": studies.available(),
        "kernels": kernels.available(),
        "plots": plots.available(),
    }
    for where, found in listed.items():
        assert isinstance(found, dict) and found, where
        assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in found.items()), where
    assert {"gaussian", "orthogonal", "simplex", "correlated", "anisotropic", "pretrained", "learned"} <= set(
        listed["keys"]
    )
    assert list(listed["values"]) == ["gaussian", "orthonormal"]
    assert tuple(listed["kernels"]) == reference.MODES
    assert list(listed["plots"]) == sorted(plots.FIGURES)
    assert {"linear", "decay", "gla", "delta", "gated_delta", "kda", "softmax"} <= set(listed["variants"])
    assert list(listed["studies"])[0] == "capacity-vs-d"


def test_the_old_listings_warn_and_list_the_same_names():
    with pytest.warns(DEPRECATED, match=r"capacity.keys: 'families\(\)' is deprecated, use 'available\(\)'"):
        fams = keys.families()
    assert list(fams) == list(keys.available())
    assert all(isinstance(f, keys.Family) and f is keys.family(name) for name, f in fams.items())
    with pytest.warns(DEPRECATED, match=r"capacity.values: 'FAMILIES' is deprecated, use 'available\(\)'"):
        assert values.FAMILIES == values.available()
    with pytest.warns(DEPRECATED, match=r"capacity.kernels: 'MODES' is deprecated, use 'available\(\)'"):
        assert kernels.MODES == tuple(kernels.available()) == reference.MODES
    with pytest.warns(DEPRECATED, match=r"capacity.plots: 'studies\(\)' is deprecated, use 'available\(\)'"):
        assert plots.studies() == list(plots.available())
    with pytest.warns(DEPRECATED, match="studies"):
        assert render_mod.studies() == sorted(plots.FIGURES)
    with pytest.raises(AttributeError):
        values.NOPE  # noqa: B018
    with pytest.raises(AttributeError):
        kernels.NOPE  # noqa: B018


def test_the_command_line_lists_what_available_lists(capsys):
    assert cli.main(["list", "keys"]) == 0
    printed = capsys.readouterr().out
    assert all(f"  {name}" in printed for name in keys.available())
    assert cli.main(["list", "values"]) == 0
    printed = capsys.readouterr().out
    assert all(f"  {name}" in printed for name in values.available())


# ------------------------------------------------------------------ the selector: name


def test_family_keyword_warns_and_draws_the_same():
    with pytest.warns(DEPRECATED, match=r"keys.make: 'family' is deprecated, use 'name'"):
        old = keys.make(family="correlated", n=6, d=4, seed=3, rho=0.5)
    assert torch.equal(old, keys.make("correlated", 6, 4, seed=3, rho=0.5))
    assert torch.equal(old, keys.make(name="correlated", n=6, d=4, seed=3, rho=0.5))
    with pytest.warns(DEPRECATED, match=r"values.make: 'family' is deprecated, use 'name'"):
        old = values.make(family="orthonormal", n=4, dv=8, seed=2)
    assert torch.equal(old, values.make("orthonormal", 4, 8, seed=2))


# ------------------------------------------------------------------ the gate: alpha


@pytest.mark.parametrize(
    "name,gate,extra",
    [
        ("decay", 0.9, {}),
        ("decay", ("uniform", 0.8, 1.0), {"seed": 4}),
        ("gated_delta", 0.9, {"beta": 0.7}),
        ("gated_delta", ("uniform", 0.8, 1.0), {"beta": ("uniform", 0.5, 1.0), "seed": 4}),
    ],
)
def test_the_old_gate_a_warns_and_gives_the_same_reads(name, gate, extra):
    K, V = _kv()
    new = variants.get(name, alpha=gate, **extra)
    with pytest.warns(DEPRECATED, match=rf"{name}: 'a' is deprecated, use 'alpha'"):
        old = variants.get(name, a=gate, **extra)
    assert old.params == new.params and "a" not in new.params
    assert torch.equal(_reads(old, K, V), _reads(new, K, V))
    cls = {"decay": Decay, "gated_delta": GatedDelta}[name]
    with pytest.warns(DEPRECATED, match="'a' is deprecated"):
        direct = cls(a=gate, **extra)
    assert direct.params == new.params


def test_a_drawn_gate_keeps_the_draws_it_had_under_its_old_name():
    """The scalar gate's seeded stream is still named "a": results computed before the rename stay the same."""
    from capacity import _random

    mem = variants.get("decay", alpha=("uniform", 0.5, 1.0), seed=7)
    drawn = mem._params["alpha"].values(2, 0, 10, 1, 7, "cpu")
    u = torch.rand(2, 256, generator=_random.generator(7, "variants/decay/a/0"), dtype=torch.float64)
    assert torch.equal(drawn, (0.5 + 0.5 * u[:, :10]).float())


def test_kernel_gate_and_theory_g_warn_and_agree():
    K, V = _kv()
    with pytest.warns(DEPRECATED, match=r"kernels.update: 'gate' is deprecated, use 'alpha'"):
        old = kernels.update(torch.zeros(2, 8, 6), K, V, mode="gla", gate=torch.full((8,), 0.9))
    new = kernels.update(torch.zeros(2, 8, 6), K, V, mode="gla", alpha=torch.full((8,), 0.9))
    assert torch.equal(old, new)
    with pytest.warns(DEPRECATED, match=r"theory.decay_readout: 'g' is deprecated, use 'alpha'"):
        old = theory.decay_readout(K.double(), V.double(), g=0.9)
    assert torch.equal(old, theory.decay_readout(K.double(), V.double(), alpha=0.9))
    assert torch.equal(old, theory.decay_readout(K.double(), V.double(), 0.9))


# ------------------------------------------------------------------ softmax's inverse temperature: scale


def test_softmax_beta_warns_and_reads_like_scale():
    K, V = _kv()
    new = variants.get("softmax", scale=16.0)
    with pytest.warns(DEPRECATED, match=r"softmax: 'beta' is deprecated, use 'scale'"):
        old = variants.get("softmax", beta=16.0)
    assert old.params == new.params == {"scale": 16.0, "normalize": False}
    assert torch.equal(_reads(old, K, V), _reads(new, K, V))
    with pytest.warns(DEPRECATED, match="'beta' is deprecated"):
        assert new.beta == 16.0  # the old attribute
    with pytest.warns(DEPRECATED, match="'beta' is deprecated"):
        assert Softmax(beta=2.0).scale == 2.0
    ds_old = None
    with pytest.warns(DEPRECATED):
        ds_old = probe.recall("softmax(beta=16)", K, V, checkpoints=[8, 24])
    ds_new = probe.recall("softmax(scale=16)", K, V, checkpoints=[8, 24])
    assert np.array_equal(ds_old.mse.values, ds_new.mse.values)


@pytest.mark.parametrize(
    "old,new",
    [
        ("decay(a=0.99)", "decay(alpha=0.99)"),
        ("gated_delta(a=0.95, beta=1.0)", "gated_delta(alpha=0.95, beta=1.0)"),
        ("softmax(beta=16)", "softmax(scale=16)"),
    ],
)
def test_labels_in_older_result_files_still_resolve(old, new):
    with pytest.warns(DEPRECATED, match="is deprecated, use"):
        built = variants.resolve(old)
    assert variants.label(built) == variants.label(variants.resolve(new))
    assert "alpha" in variants.label(built) or "scale" in variants.label(built)


def test_the_built_in_studies_use_the_new_names():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in studies.available():
            study = studies.get(name)
            for spec in study.grid.variant:
                variants.resolve(spec.label)
                name_, params = labels.parse(spec.label)
                assert not ({"a", "gate", "g"} & set(params)) or name_ == "dplr", spec.label
                assert not (name_ == "softmax" and "beta" in params), spec.label


# ------------------------------------------------------------------ both spellings at once


@pytest.mark.parametrize(
    "call",
    [
        lambda: keys.make("gaussian", 4, 4, family="gaussian"),
        lambda: keys.make(name="gaussian", n=4, d=4, family="gaussian"),
        lambda: values.make("gaussian", 4, 4, family="gaussian"),
        lambda: variants.get("decay", a=0.9, alpha=0.9),
        lambda: variants.resolve("gated_delta(a=0.9, alpha=0.9)"),
        lambda: Decay(a=0.9, alpha=0.9),
        lambda: variants.get("softmax", beta=2.0, scale=2.0),
        lambda: kernels.update(torch.zeros(1, 4, 2), *_kv(2, 4, 2, 1), mode="decay", gate=0.9, alpha=0.9),
        lambda: theory.decay_readout(np.eye(3), np.eye(3), 0.9, g=0.9),
        lambda: plots.render(None, "a", out="b"),
        lambda: plots.render(None, out_dir="a", out="b"),
    ],
)
def test_old_and_new_spelling_together_is_one_line_error(call):
    with pytest.raises(CapacityError, match=r"got both '.*' and '.*'|takes 1 positional") as err:
        call()
    assert "\n" not in str(err.value)


# ------------------------------------------------------------------ output folders: out


def test_render_takes_the_folder_as_out_and_still_reads_the_old_forms(monkeypatch, tmp_path):
    saved = []
    monkeypatch.setattr(render_mod, "figures", lambda ds: [("stem", object())])
    monkeypatch.setattr(render_mod, "save", lambda fig, out, stem: saved.append(out) or [out])
    assert plots.render("ds", out=tmp_path) == [tmp_path]
    with pytest.warns(DEPRECATED, match=r"plots.render: 'out_dir \(positional\)' is deprecated, use 'out='"):
        assert plots.render("ds", tmp_path / "p") == [tmp_path / "p"]
    with pytest.warns(DEPRECATED, match=r"plots.render: 'out_dir' is deprecated, use 'out'"):
        assert plots.render("ds", out_dir=tmp_path / "k") == [tmp_path / "k"]
    assert saved == [tmp_path, tmp_path / "p", tmp_path / "k"]
    assert list(inspect.signature(plots.render).parameters) == ["ds", "out"]


def test_the_executor_default_is_the_same_in_python_and_on_the_command_line():
    default = inspect.signature(sweep.run).parameters["executor"].default
    assert default == "auto"
    for command in (["run", "capacity-vs-d"], ["compare", "linear"]):
        assert cli.build_parser().parse_args(command).executor == default
    assert cli.build_parser().parse_args(["run", "capacity-vs-d"]).out == "results"
    assert inspect.signature(sweep.run).parameters["out"].default == "results"


# ------------------------------------------------------------------ per-query variables


def test_per_query_variables_are_named_like_their_means():
    K, V = _kv()
    ds = probe.recall("linear", K, V, checkpoints=[8, 24], per_query=True)
    per_query = {str(v) for v in ds.data_vars if "query" in ds[v].dims}
    assert per_query == {f"{m}_q" for m in probe.METRICS} == set(probe.PER_QUERY.values())
    assert not {"sq_error", "rel_sq_error", "correct"} & set(ds.data_vars)
    for m in probe.METRICS:
        assert np.allclose(ds[f"{m}_q"].mean("query", skipna=True), ds[m], rtol=1e-5, atol=1e-6), m
    lean = probe.recall("linear", K, V, checkpoints=[24], per_query=True, decode=False)
    assert "recall_q" not in lean and "mse_q" in lean


def test_read_error_keys_match_the_probe_and_the_old_keys_warn():
    K, V = _kv()
    S = kernels.update(torch.zeros(2, 8, 6), K, V, mode="linear")
    out = kernels.read_error(S, K, V)
    assert set(out) == {"mse_q", "signal_q", "cosine_q"}
    for old, new in (("sq_error", "mse_q"), ("signal", "signal_q"), ("cosine", "cosine_q")):
        with pytest.warns(DEPRECATED, match=rf"kernels.read_error: '{old}' is deprecated, use '{new}'"):
            assert out[old] is out[new]
    ds = probe.recall("linear", K, V, checkpoints=[24], per_query=True)
    assert np.allclose(out["mse_q"].numpy(), ds.mse_q.isel(n=0).values, rtol=1e-4, atol=1e-5)
    with pytest.raises(KeyError):
        out["nope"]


# ------------------------------------------------------------------ no old spelling in a public signature

PUBLIC = [
    "capacity.keys",
    "capacity.values",
    "capacity.variants",
    "capacity.features",
    "capacity.probe",
    "capacity.metrics",
    "capacity.theory",
    "capacity.mqar",
    "capacity.learned",
    "capacity.pretrained",
    "capacity.conformance",
    "capacity.labels",
    "capacity.decode",
    "capacity.kernels",
    "capacity.studies",
    "capacity.plots",
    "capacity.sweep",
    "capacity.check",
    "capacity.plugins",
]
OLD = {"family", "a", "gate", "g", "out_dir"}


def _signature(obj):
    target = obj.__init__ if isinstance(obj, type) else obj
    try:
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


def test_public_signatures_use_no_old_spelling():
    checked = 0
    for modname in PUBLIC:
        mod = importlib.import_module(modname)
        for attr in mod.__all__:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # the deprecated names themselves
                obj = getattr(mod, attr)
            if not callable(obj) or attr in ("families", "studies"):
                continue
            sig = _signature(obj)
            if sig is None:
                continue
            checked += 1
            clash = OLD & set(sig.parameters)
            assert not clash, f"{modname}.{attr}{sig} uses {sorted(clash)}"
    assert checked > 60
    # the registered memories: no old gate name; softmax's temperature is not beta (dplr's a, b: RWKV-7's vectors)
    for name in variants.available():
        factory = variants._REGISTRY[name].factory if name in variants._REGISTRY else None
        if factory is None:
            continue
        params = set(inspect.signature(factory).parameters)
        if name != "dplr":
            assert not (OLD & params), (name, params)
        assert not (name == "softmax" and "beta" in params)
    assert "alpha" in inspect.signature(kernels.update).parameters
    assert list(inspect.signature(keys.make).parameters)[0] == "name"
    assert list(inspect.signature(values.make).parameters)[0] == "name"
