"""One name per concept (docs/naming.md): every registry lists itself with available(), the old spellings are gone
(each is an unknown name, refused in one line), and no public signature uses one."""

import importlib
import inspect

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, kernels, plots, studies, sweep, theory, variants
from lacapacity.base import labels
from lacapacity.inputs import features, keys, values
from lacapacity.kernels import reference
from lacapacity.tasks import probe

render_mod = importlib.import_module("lacapacity.plots.render")  # the module (lacapacity.plots.render is the function)


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


def test_the_old_listings_are_gone():
    """Pre-1.0, no deprecated aliases: each old listing is simply absent."""
    for mod, old in (
        (keys, "families"),
        (values, "FAMILIES"),
        (kernels, "MODES"),
        (plots, "studies"),
        (render_mod, "studies"),
    ):
        assert not hasattr(mod, old), f"{mod.__name__}.{old}"
    assert not importlib.util.find_spec("lacapacity._deprecated")


def test_the_command_line_lists_what_available_lists(cli):
    code, printed, _ = cli.here("list", "keys")
    assert code == 0 and all(f"  {name}" in printed for name in keys.available())
    code, printed, _ = cli.here("list", "values")
    assert code == 0 and all(f"  {name}" in printed for name in values.available())


# ------------------------------------------------------------------ the old spellings are errors, in one line


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: keys.make(family="gaussian", n=4, d=4), "required positional argument: 'name'"),
        (
            lambda: values.make(family="gaussian", n=4, dv=4),
            "required positional argument: 'name'",
        ),
        (lambda: variants.get("decay", a=0.9), r"variant 'decay' got unknown parameter\(s\) a"),
        (lambda: variants.resolve("gated_delta(a=0.9)"), r"variant 'gated_delta' got unknown parameter\(s\) a"),
        (
            lambda: variants.get("softmax", beta=2.0),
            r"variant 'softmax' got unknown parameter\(s\) beta; allowed: scale",
        ),
        (lambda: probe.recall("softmax(beta=16)", *_kv()), r"got unknown parameter\(s\) beta"),
    ],
)
def test_an_old_spelling_is_an_unknown_name(call, message):
    with pytest.raises((CapacityError, TypeError), match=message) as err:
        call()
    assert "\n" not in str(err.value)


def test_old_spellings_are_unknown_keywords_of_the_plain_functions():
    K, V = _kv()
    with pytest.raises(TypeError, match="gate"):
        kernels.update(torch.zeros(2, 8, 6), K, V, mode="gla", gate=torch.full((8,), 0.9))
    with pytest.raises(TypeError, match="'g'"):
        theory.decay_readout(K.double(), V.double(), g=0.9)
    with pytest.raises(TypeError):
        plots.render("ds", out_dir="x")
    assert list(inspect.signature(plots.render).parameters) == ["ds", "out"]


def test_a_drawn_gate_keeps_its_seeded_stream():
    """The scalar gate's seeded stream keeps its first name ("a"): the numbers of a seed never changed."""
    from lacapacity.base import _random

    mem = variants.get("decay", alpha=("uniform", 0.5, 1.0), seed=7)
    drawn = mem._params["alpha"].values(2, 0, 10, 1, 7, "cpu")
    u = torch.rand(2, 256, generator=_random.generator(7, "variants/decay/a/0"), dtype=torch.float64)
    assert torch.equal(drawn, (0.5 + 0.5 * u[:, :10]).float())


def test_the_built_in_studies_use_the_new_names():
    for name in studies.available():
        study = studies.get(name)
        for spec in study.grid.variant:
            name_, params = labels.parse(spec.label)
            assert not ({"a", "gate", "g"} & set(params)) or name_ == "dplr", spec.label
            assert not (name_ == "softmax" and "beta" in params), spec.label


def test_the_executor_default_is_the_same_in_python_and_on_the_command_line():
    from lacapacity import cli

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


# ------------------------------------------------------------------ no old spelling in a public signature

PUBLIC = [
    "lacapacity.inputs.keys",
    "lacapacity.inputs.values",
    "lacapacity.variants",
    "lacapacity.inputs.features",
    "lacapacity.tasks.probe",
    "lacapacity.tasks.metrics",
    "lacapacity.theory",
    "lacapacity.tasks.mqar.probe",
    "lacapacity.tasks.learned",
    "lacapacity.inputs.pretrained",
    "lacapacity.check.conformance",
    "lacapacity.base.labels",
    "lacapacity.tasks.decode",
    "lacapacity.kernels",
    "lacapacity.studies",
    "lacapacity.plots",
    "lacapacity.sweep",
    "lacapacity.check",
    "lacapacity.base.plugins",
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
        own = [n for n, o in vars(mod).items() if not n.startswith("_") and getattr(o, "__module__", None) == modname]
        for attr in getattr(mod, "__all__", own):  # a module outside the pinned surface: what it defines
            obj = getattr(mod, attr)
            if not callable(obj):
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
        factory = variants._REGISTRY.own()[name].factory if name in variants._REGISTRY else None
        if factory is None:
            continue
        params = set(inspect.signature(factory).parameters)
        if name != "dplr":
            assert not (OLD & params), (name, params)
        assert not (name == "softmax" and "beta" in params)
    assert "alpha" in inspect.signature(kernels.update).parameters
    assert list(inspect.signature(keys.make).parameters)[0] == "name"
    assert list(inspect.signature(values.make).parameters)[0] == "name"
