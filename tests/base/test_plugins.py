"""A researcher's own memory through everything: labels, import paths, objects in grids, entry points, workers."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from lacapacity import CapacityError, sweep, variants
from lacapacity.base import labels, plugins
from lacapacity.sweep import Grid, Study
from lacapacity.tasks import Recall, probe

HERE = Path(__file__).resolve().parent
PKG = HERE.parent / "plugin_pkg"
sys.path.insert(0, str(PKG))
import usermem  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(PKG) + os.pathsep + os.environ.get("PYTHONPATH", ""), "OMP_NUM_THREADS": "1"}


def _in_two_workers(out) -> list[str]:
    """The end of a quiet run's command line without figures, measured in two worker processes (each of which must
    find the plug-in again) and saved under ``out``."""
    return ["--executor", "processes", "--workers", "2", "--out", str(out), "--quiet", "--no-figures"]


@pytest.mark.parametrize(
    "label",
    [
        "linear",
        "delta(beta=0.5)",
        "gla(alpha=['uniform', 0.9, 1.0], seed=0)",
        "usermem:GainMemory(c=0.25)",
        "x(a=[1, [2, 3.5]], b='two words', c=None, d=true)",
        "correlated(rho=0.2)",
    ],
)
def test_labels_round_trip(label):
    name, params = labels.parse(label)
    again = labels.format(name, params)
    assert labels.parse(again) == (name, params)


def test_a_label_the_library_writes_reads_back_to_the_same_variant():
    for v in (
        variants.get("gla", alpha=("uniform", 0.9, 1.0), seed=0),
        variants.get("delta", beta=0.5),
        usermem.GainMemory(0.5),
    ):
        again = variants.resolve(variants.label(v))
        assert type(again) is type(v) and again.params == v.params


@pytest.mark.parametrize(
    "bad,match",
    [
        ("delta(beta=1, beta=0.5)", "more than once"),
        ("delta(beta=)", "parameters"),
        ("delta(1)", "k=v"),
        ("(x)", "not a label"),
    ],
)
def test_bad_labels_are_one_line_errors(bad, match):
    with pytest.raises(CapacityError, match=match):
        labels.parse(bad)


def test_resolve_takes_names_objects_and_import_paths():
    obj = usermem.GainMemory(2.0)
    assert variants.resolve(obj) is obj
    built = variants.resolve("usermem:GainMemory(c=2)")
    assert isinstance(built, usermem.GainMemory) and built.c == 2.0
    with pytest.raises(CapacityError, match="cannot import 'nosuchmodule'"):
        variants.resolve("nosuchmodule:Mem")
    with pytest.raises(CapacityError, match="unknown parameter"):
        variants.resolve("usermem:GainMemory(gain=2)")
    with pytest.raises(CapacityError, match="not a variant"):
        variants.resolve("lacapacity.theory:frame_bound(n=2, d=1)")


@pytest.mark.slow
def test_an_object_in_a_grid_measures_what_the_probe_measures(tmp_path):
    obj = usermem.GainMemory(0.5)
    study = Study(
        "mine", "", Grid(variant=(obj, "linear"), keys=("gaussian",), d=(16,), load=(0.5, 2), seed=(0, 1)), Recall()
    )
    res = sweep.run(study, out=tmp_path, device="cpu", executor="processes", workers=2, progress=False)
    from lacapacity.inputs import keys, values

    K = keys.make("gaussian", 32, 16, batch=2, seed=[0, 1])
    V = values.make("gaussian", 32, 16, batch=2, seed=[0, 1])
    direct = probe.recall(obj, K, V, checkpoints=[8, 32])
    got = res.dataset.mse.sel(variant=variants.label(obj), key_family="gaussian", d=16).transpose("load", "seed").values
    np.testing.assert_allclose(got, direct.mse.values, rtol=1e-6)
    assert bool(res.dataset.linear_read.sel(variant="linear")) and not bool(
        res.dataset.additive.sel(variant=variants.label(obj))
    )


def test_a_class_from_main_runs_serially_and_is_refused_by_workers(tmp_path):
    Local = type("Local", (usermem.GainMemory,), {"__module__": "__main__"})
    study = Study("local", "", Grid(variant=(Local(1.0),), keys=("gaussian",), d=(8,), load=(1,), seed=(0,)), Recall())
    with pytest.raises(CapacityError, match="defined in __main__"):
        sweep.run(study, out=tmp_path, device="cpu", executor="processes", progress=False)
    assert sweep.run(study, out=tmp_path, device="cpu", progress=False).measured == 1  # auto: in this process


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["auto", "processes", "dask"])
def test_compare_a_user_module_with_workers_that_never_ran_the_script(cli, tmp_path, executor):
    """The module is on PYTHONPATH only: workers import it by path, nothing registered it."""
    out = tmp_path / "out"
    proc = cli(
        "compare",
        "usermem:GainMemory(c=0.5)",
        "linear",
        "delta",
        "--d",
        "8,16",
        "--load",
        "1/2,1,2,4",
        "--seeds",
        "2",
        "--executor",
        executor,
        "--workers",
        "2",
        "--out",
        str(out),
        "--quiet",
        *(["--no-figures"] if executor != "auto" else []),  # the figures once: they do not depend on the executor
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    files = proc.stdout.split()
    assert files[0] == str(out / "compare.nc")
    if executor == "auto":
        assert any(f.endswith("compare_variants.png") for f in files) and any(
            f.endswith("compare_capacity.pdf") for f in files
        )
    with xr.open_dataset(out / "compare.nc") as ds:
        assert list(ds.variant.values) == ["usermem:GainMemory(c=0.5)", "linear", "delta"]
        assert np.isfinite(ds.mse.values).all()
        # c = 1/2 reads half of the linear read: r = 0.5 q S, so ||r - v||^2 differs; at n = 1 (no crosstalk) it is 1/4
        lin = ds.mse.sel(variant="linear")
        assert bool((ds.mse.sel(variant="usermem:GainMemory(c=0.5)") != lin).all())


@pytest.mark.slow
def test_entry_point_plugins_are_found_without_any_import(tmp_path):
    """A package that declares its memory and study through entry points, seen by name in this process and workers."""
    site = tmp_path / "site"
    (site / "mymems").mkdir(parents=True)
    (site / "mymems" / "__init__.py").write_text(
        textwrap.dedent(
            f"""
        import sys
        sys.path.insert(0, {str(PKG)!r})
        from usermem import GainMemory
        from lacapacity.sweep import Grid, Recall, Study
        STUDY = Study("halfgain", "a plug-in study", Grid(variant=("halfgain", "linear"), keys=("gaussian",), d=(8,), load=(0.5, 1, 2), seed=(0,)), Recall())
    """
        )
    )
    dist = site / "mymems-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mymems\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[lacapacity.variants]\nhalfgain = mymems:GainMemory\n\n[lacapacity.studies]\nhalfgain = mymems:STUDY\n"
    )
    env = {**ENV, "PYTHONPATH": str(site) + os.pathsep + ENV["PYTHONPATH"]}
    out = tmp_path / "out"
    listed = subprocess.run(
        [sys.executable, "-m", "lacapacity.cli", "list", "variants"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "halfgain" in listed.stdout, listed.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lacapacity.cli",
            "run",
            "halfgain",
            "--set",
            "variant=halfgain(c=0.5),linear",
            *_in_two_workers(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    with xr.open_dataset(out / "halfgain.nc") as ds:
        assert list(ds.variant.values) == ["halfgain(c=0.5)", "linear"]


def test_plugins_load_path_errors_are_one_line():
    with pytest.raises(CapacityError, match="module:attr"):
        plugins.load_path("nocolon")
    with pytest.raises(CapacityError, match="no attribute"):
        plugins.load_path("lacapacity.theory:nosuch")


@pytest.mark.slow
def test_import_registers_a_plugin_in_every_worker(cli, tmp_path):
    """--import MODULE: the module registers its variant on import, here and in every worker process."""
    out = tmp_path / "out"
    proc = cli(
        "run",
        "capacity-vs-d",
        "--import",
        "regmem",
        "--set",
        "variant=registered-gain(c=0.5),linear",
        "--set",
        "keys=gaussian",
        "--set",
        "d=8,16",
        "--set",
        "load=1/2,1,2",
        "--set",
        "seed=0",
        *_in_two_workers(out),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    with xr.open_dataset(out / "capacity-vs-d.nc") as ds:
        assert list(ds.variant.values) == ["registered-gain(c=0.5)", "linear"]
    cli.fails(cli.here("run", "capacity-vs-d", "--import", "nosuchplugin", "--out", str(out)), "--import nosuchplugin")


def test_feature_maps_from_an_import_path():
    from lacapacity.inputs import features

    fm = features.get("lacapacity.inputs.features:Dpfp", nu=2)
    assert fm.feature_dim(8) == 32
    with pytest.raises(CapacityError, match="feature map 'lacapacity.theory:frame_bound'"):
        features.get("lacapacity.theory:frame_bound")
    with pytest.raises(CapacityError, match="must build a lacapacity.features.FeatureMap"):
        features.get("lacapacity.theory:__doc__")
