"""Reuse is a proof: a stored point is returned only when the current code, data, parameters and libraries would
compute it, and a run measures only what is new.

Each of the five ways a rerun used to return old numbers (an edited helper module, an edited module holding a
memory object, an object built with other constructor arguments, an edited ``--import`` module, an edited data
file) is tried through Python and through the command line; each time the rerun must equal a fresh run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from test_sweep_support import one_torch_thread  # noqa: F401 - autouse fixture

from lacapacity import CapacityError, studies, sweep, variants
from lacapacity.sweep import Grid, Study, provenance
from lacapacity.sweep.plan import Plan

SMALL = dict(keys=("gaussian",), d=(16,), load=(0.5, 2.0), seed=(0, 1))


def _run(out, *memories, **grid):
    study = Study("reuse", "reuse test", Grid(variant=tuple(memories), **{**SMALL, **grid}))
    return sweep.run(study, out=out, device="cpu", executor="serial", progress=False)


def _same(a, b) -> bool:
    return a.dataset.drop_attrs().equals(b.dataset.drop_attrs())


def _module(folder: Path, name: str, text: str, *, fresh: bool = True) -> None:
    """Write the user's module ``name``; ``fresh``: forget every module of the folder, as a new session would."""
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    for cached in folder.glob(f"__pycache__/{name}.*"):
        cached.unlink()
    if fresh:
        for mod in [m for m, x in sys.modules.items() if str(getattr(x, "__file__", "")).startswith(str(folder))]:
            sys.modules.pop(mod)


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    """A folder of the user's modules on sys.path (and PYTHONPATH, for subprocesses)."""
    folder = tmp_path / "user"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    yield folder
    for name in [m for m, mod in sys.modules.items() if str(getattr(mod, "__file__", "")).startswith(str(folder))]:
        sys.modules.pop(name)


SCALED = """
    import torch
    from {helper} import GAIN


    class Scaled:
        name = "scaled"

        def init_state(self, batch, d, dv, *, device=None):
            return torch.zeros(batch, d, dv, device=device)

        def write(self, state, k, v):
            return state + k.transpose(1, 2) @ v

        def read(self, state, q):
            return GAIN * (q @ state)

        def state_numel(self, d, dv):
            return d * dv
    """


# ---------------------------------------------------------------- the five stale paths, in Python


def test_an_edited_helper_module_is_measured_again(user_dir, tmp_path):
    _module(user_dir, "gainhelper", "GAIN = 1.0\n")
    _module(user_dir, "scaledmem", SCALED.format(helper="gainhelper"))
    first = _run(tmp_path / "r", "scaledmem:Scaled")
    _module(user_dir, "gainhelper", "GAIN = 0.5\n")  # only the helper changes, not the memory's own file
    again = _run(tmp_path / "r", "scaledmem:Scaled")
    assert again.reused == 0 and again.measured == first.measured
    assert _same(again, _run(tmp_path / "fresh", "scaledmem:Scaled"))
    assert not _same(again, first)


@pytest.mark.slow
def test_an_edit_that_this_session_did_not_import_again_is_never_stored_as_new(user_dir, tmp_path):
    """Edited on disk but not imported again, the old code still runs here: its points are the old ones (reused),
    and a new process, which runs the new code, measures again instead of taking them."""
    _module(user_dir, "gainhelper", "GAIN = 1.0\n")
    _module(user_dir, "scaledmem", SCALED.format(helper="gainhelper"))
    first = _run(tmp_path / "r", "scaledmem:Scaled")
    _module(user_dir, "gainhelper", "GAIN = 0.5\n", fresh=False)
    _module(user_dir, "scaledmem", SCALED.format(helper="gainhelper") + "\n    # edited\n", fresh=False)
    stale_session = _run(tmp_path / "r", "scaledmem:Scaled")
    assert stale_session.reused == first.measured and _same(stale_session, first)
    script = "from lacapacity import sweep; from lacapacity.sweep import Grid, Study\n"
    script += f"s = Study('reuse', 'reuse test', Grid(variant=('scaledmem:Scaled',), **{SMALL!r}))\n"
    script += f"r = sweep.run(s, out={str(tmp_path / 'r')!r}, device='cpu', executor='serial', progress=False)\n"
    script += "print(r.measured, r.reused)"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.stdout.split() == [str(first.measured), "0"], proc.stderr


@pytest.mark.slow  # a pool of worker processes: about 6 s on the loaded 2-core VM
def test_a_module_edited_after_import_is_never_measured_by_workers_into_the_old_points(user_dir, tmp_path):
    """Issue 51's notebook: a run on worker processes, the memory's file edited (not imported again), the same run
    with one more load: the workers would run the new file while this process keys the old code. Refused in one
    line; ``auto`` measures in this process (the old code, every point of one version); a reload measures anew."""
    _module(user_dir, "gainhelper", "GAIN = 1.0\n")
    _module(user_dir, "editme", SCALED.format(helper="gainhelper"))

    def compare(load, executor, out="r"):
        return sweep.compare(
            ["editme:Scaled"], d=16, load=load, seeds=1, out=tmp_path / out, executor=executor, progress=False
        )

    first = compare([0.5, 1], "processes")
    assert first.measured == 2
    edited = SCALED.format(helper="gainhelper").replace("return GAIN * (q @ state)", "return 3 * GAIN * (q @ state)")
    _module(user_dir, "editme", edited, fresh=False)
    with pytest.raises(CapacityError, match=r"module editme \(.*editme.py\) was edited after this process imported"):
        compare([0.5, 1, 2], "processes")
    old = compare([0.5, 1, 2], "auto")  # in this process: the old code, as the stored points
    assert (old.reused, old.measured) == (2, 1)
    linear = sweep.compare(["linear"], d=16, load=[0.5, 1, 2], seeds=1, out=tmp_path / "lin", progress=False)
    np.testing.assert_array_equal(old.dataset.mse.values, linear.dataset.mse.values)  # GAIN 1: the linear memory
    _module(user_dir, "editme", edited)  # a new session: the new file imported
    new = compare([0.5, 1, 2], "processes")
    assert (new.reused, new.measured) == (0, 3)
    assert (np.abs(new.dataset.mse.values - linear.dataset.mse.values) > 0.1).all()  # every point of the new code


def test_a_module_edited_before_its_first_run_is_refused_for_workers(user_dir, tmp_path):
    """Imported, edited, then run for the first time: its functions are not what the file compiles to."""
    _module(user_dir, "gainhelper", "GAIN = 1.0\n")
    _module(user_dir, "editfirst", SCALED.format(helper="gainhelper"))
    import editfirst  # noqa: F401 - imported as a notebook would, before the edit

    _module(
        user_dir, "editfirst", SCALED.format(helper="gainhelper").replace("q @ state", "state.sum() * q"), fresh=False
    )
    with pytest.raises(CapacityError, match="module editfirst .* was edited after this process imported it"):
        sweep.compare(["editfirst:Scaled"], d=16, load=[1], seeds=1, out=tmp_path / "r", executor="processes")


def test_an_edited_module_holding_a_memory_object_is_measured_again(user_dir, tmp_path):
    _module(user_dir, "presets", "from lacapacity import variants\nSLOW = variants.get('delta', beta=0.3)\n")
    first = _run(tmp_path / "r", "presets:SLOW")
    _module(user_dir, "presets", "from lacapacity import variants\nSLOW = variants.get('delta', beta=0.6)\n")
    again = _run(tmp_path / "r", "presets:SLOW")
    assert again.reused == 0 and not _same(again, first)
    assert _same(again, _run(tmp_path / "fresh", "delta(beta=0.6)"))
    assert list(again.dataset.variant.values) == ["delta(beta=0.6)"]  # the object's own label, as by name


class NoParams:
    """A memory without ``params`` whose constructor argument changes its numbers."""

    name = "noparams"

    def __init__(self, scale=1.0):
        self._scale = scale  # kept under another name: not readable back as a constructor argument

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state, k, v):
        return state + k.transpose(1, 2) @ v

    def read(self, state, q):
        return self._scale * (q @ state)

    def state_numel(self, d, dv):
        return d * dv


@pytest.mark.slow
def test_an_object_built_with_other_arguments_is_measured_again(tmp_path):
    first = _run(tmp_path / "r", NoParams(1.0))
    again = _run(tmp_path / "r", NoParams(0.5))
    assert again.reused == 0 and not _same(again, first)
    assert _same(again, _run(tmp_path / "fresh", NoParams(0.5)))
    assert _run(tmp_path / "r", NoParams(0.5)).reused == again.measured  # and the same object is reused


def test_an_edited_import_module_is_measured_again(user_dir, tmp_path):
    register = """
        from lacapacity import variants
        from lacapacity.variants.linear import Linear


        class Scale(Linear):
            def read(self, state, q):
                return {c} * super().read(state, q)


        variants.register("scale", Scale, "a linear memory read with a gain")
        """
    _module(user_dir, "regmem", register.format(c=1.0))
    study = studies.get("capacity-vs-d").with_overrides(["variant=scale", "keys=gaussian", "d=16", "load=1/2,2"])
    run = lambda out: sweep.run(study, out=out, device="cpu", executor="serial", progress=False, imports=["regmem"])
    first = run(tmp_path / "r")
    _module(user_dir, "regmem", register.format(c=0.5))
    variants._REGISTRY.remove("scale")
    again = run(tmp_path / "r")
    assert again.reused == 0 and not _same(again, first)
    assert _same(again, run(tmp_path / "fresh"))
    variants._REGISTRY.remove("scale")


def test_an_edited_data_file_is_measured_again(tmp_path, monkeypatch):
    """The package's own data files are part of the key: here a copy of the package data, edited."""
    import lacapacity

    text = Path(lacapacity.__file__).parent / "data" / "pretrained_text.txt"
    before = provenance.package()
    original = text.read_bytes()
    try:
        text.write_bytes(original + b" one more sentence.")
        provenance.package.cache_clear()
        assert provenance.package() != before
    finally:
        text.write_bytes(original)
        provenance.package.cache_clear()
    assert provenance.package() == before
    # and a file named in a parameter (a text a key family reads) is hashed by its bytes
    f = tmp_path / "text.txt"
    f.write_text("one")
    one = provenance.files([f])
    f.write_text("two")
    assert provenance.files([f]) != one


def test_a_monkeypatch_no_source_shows_is_seen_by_the_behaviour(tmp_path, monkeypatch):
    first = _run(tmp_path / "r", "linear")
    from lacapacity.variants.linear import Linear

    monkeypatch.setattr(Linear, "read", lambda self, state, q: 0.5 * (q.float() @ state))
    again = _run(tmp_path / "r", "linear")
    assert again.reused == 0 and not _same(again, first)


# ---------------------------------------------------------------- the same paths through the command line


SERIAL = ("--device", "cpu", "--executor", "serial", "--verbose", "--no-figures")


def _summary(proc) -> tuple[int, int]:
    line = next(x for x in proc.stderr.splitlines() if "measured in" in x)
    measured = int(line.split(" measured in")[0].rsplit(" ", 1)[1])
    reused = int(line.split(", ")[-1].split(" reused")[0])
    return measured, reused


@pytest.mark.slow
def test_the_command_line_measures_edited_user_code_again(cli, user_dir, tmp_path):
    _module(user_dir, "gainhelper", "GAIN = 1.0\n")
    _module(user_dir, "scaledmem", SCALED.format(helper="gainhelper"))
    _module(user_dir, "presets", "from lacapacity import variants\nSLOW = variants.get('delta', beta=0.3)\n")
    args = ["compare", "scaledmem:Scaled", "presets:SLOW", "--d", "16", "--load", "1/2,2", "--seeds", "2"]
    args += ["--out", str(tmp_path / "r")]
    first = cli(*args, *SERIAL)
    assert first.returncode == 0, first.stderr
    assert _summary(first) == (2 * 2 * 2, 0)
    assert _summary(cli(*args, *SERIAL)) == (0, 8)
    _module(user_dir, "gainhelper", "GAIN = 0.5\n")  # the helper of one memory
    assert _summary(cli(*args, *SERIAL)) == (4, 4)
    _module(user_dir, "presets", "from lacapacity import variants\nSLOW = variants.get('delta', beta=0.6)\n")
    assert _summary(cli(*args, *SERIAL)) == (4, 4)


# ---------------------------------------------------------------- reuse per point


@pytest.mark.slow
def test_adding_a_memory_a_seed_a_d_or_a_load_measures_only_what_is_new(tmp_path):
    out = tmp_path / "r"
    first = _run(out, "linear", "delta")
    assert (first.measured, first.reused) == (2 * 2 * 2, 0)
    grown = _run(out, "linear", "delta", "decay", seed=(0, 1, 2), d=(16, 32), load=(0.5, 1.0, 2.0))
    assert grown.reused == 8 and grown.measured == 3 * 3 * 2 * 3 - 8
    assert _same(
        grown, _run(tmp_path / "fresh", "linear", "delta", "decay", seed=(0, 1, 2), d=(16, 32), load=(0.5, 1.0, 2.0))
    )


def test_compare_with_one_more_memory_measures_only_that_memory(tmp_path):
    kw = dict(d=(16, 32), load=(0.5, 2), seeds=2, out=tmp_path, device="cpu", executor="serial", progress=False)
    first = sweep.compare(["linear", "delta"], **kw)
    more = sweep.compare(["linear", "delta", "gated_delta"], **kw)
    assert more.reused == first.measured and more.measured == first.measured // 2
    assert more.dataset.sel(variant=["linear", "delta"]).drop_attrs().equals(first.dataset.drop_attrs())


def test_a_batch_coupled_memory_is_stored_as_a_whole(tmp_path):
    """A memory whose reads depend on the other items of its batch: its seeds are never stored one by one."""

    class Coupled(NoParams):
        def read(self, state, q):
            return (q @ state) * (1 + state.mean())  # the mean over the whole batch

    plan = Plan(Study("x", "x", Grid(variant=(Coupled(),), **SMALL)), torch.device("cpu"))
    assert not plan.per_seed(plan.cells[0]) and plan.per_n(plan.cells[0])
    first = _run(tmp_path / "r", Coupled())
    more = _run(tmp_path / "r", Coupled(), seed=(0, 1, 2))
    assert more.reused == 0 and first.reused == 0
    assert _same(more, _run(tmp_path / "fresh", Coupled(), seed=(0, 1, 2)))


# ---------------------------------------------------------------- one label, every parameter recorded


def test_one_memory_one_label_from_python_the_command_line_and_import_paths(user_dir, tmp_path):
    _module(user_dir, "presets", "from lacapacity import variants\nHALF = variants.get('delta', beta=0.5)\n")
    objects = _run(tmp_path / "a", variants.get("delta", beta=0.5)).dataset
    names = _run(tmp_path / "b", "delta(beta=0.5, normalize=true)").dataset
    paths = _run(tmp_path / "c", "presets:HALF").dataset
    assert [str(v) for v in objects.variant.values] == ["delta(beta=0.5)"]
    assert objects.variant.values.tolist() == names.variant.values.tolist() == paths.variant.values.tolist()
    memories = json.loads(objects.attrs["memories"])["delta(beta=0.5)"]
    assert memories["params"] == {"beta": 0.5, "normalize": True, "backend": "auto"}
    with pytest.raises(CapacityError, match="are the same memory"):
        _run(tmp_path / "d", "delta(beta=0.5, normalize=true)", variants.get("delta", beta=0.5))


def test_labels_never_drop_a_value():
    assert variants.label(variants.get("delta", normalize=False)) == "delta(normalize=false)"
    assert variants.label(variants.get("linear", normalize=True)) == "linear(normalize=true)"
    assert variants.label(variants.get("gated_delta", alpha=1.0, beta=0.5)) == "gated_delta(alpha=1.0, beta=0.5)"
    from lacapacity.plots import names

    assert names.keys_name("pretrained(layer=0)").endswith("layer = 0")
    assert "normalize = false" in names.variant_name("delta(normalize=false)")


# ---------------------------------------------------------------- flash-linear-attention objects sweep too


def test_a_from_fla_object_sweeps_and_equals_the_built_in(tmp_path):
    naive = pytest.importorskip("fla.ops.delta_rule.naive")
    fla = variants.from_fla(naive.delta_rule_recurrence, per_token={"beta": 1.0}, layout="BHTK", delta_rule=True)
    res = _run(tmp_path / "r", fla, "delta")
    a, b = (res.dataset.mse.isel(variant=i).values for i in (0, 1))
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    memories = json.loads(res.dataset.attrs["memories"])
    assert any("fla" in m["class"] or "fla" in json.dumps(m["params"]) for m in memories.values())
    more = sweep.compare([fla, "delta"], d=(16,), load=(0.5, 2), seeds=2, out=tmp_path / "c", progress=False)
    np.testing.assert_allclose(
        more.dataset.mse.isel(variant=0).values, more.dataset.mse.isel(variant=1).values, rtol=2e-5, atol=1e-6
    )


# ---------------------------------------------------------------- any file xarray reads


def test_a_netcdf3_copy_of_a_result_plots(tmp_path, cli):
    res = _run(tmp_path / "r", "linear", "delta")
    ds = res.dataset.copy()
    for name in list(ds.coords) + list(ds.data_vars):
        if ds[name].dtype == bool:
            ds[name] = ds[name].astype("int8")
    classic = tmp_path / "classic.nc"
    ds.to_netcdf(classic, engine="scipy")  # netCDF3
    assert classic.read_bytes()[:3] == b"CDF"
    assert cli.here("plot", classic, "--out", tmp_path / "figs").returncode == 0
    assert list((tmp_path / "figs").glob("*.png"))


@pytest.mark.slow
def test_the_key_does_not_depend_on_what_else_a_process_imported(tmp_path):
    """The same study gets the same keys in a process that imported other things first (dask, matplotlib)."""
    script = textwrap.dedent(
        f"""
        import sys, json, torch
        if sys.argv[1] == "more":
            import distributed, matplotlib.pyplot, scipy.stats  # noqa: F401
        from lacapacity.sweep import Grid, Study
        from lacapacity.sweep.plan import Plan
        s = Study("k", "k", Grid(variant=("linear", "delta", "gated_delta(alpha=0.9)"), **{SMALL!r}))
        print(json.dumps(sorted(Plan(s, torch.device("cpu")).keys.values())))
        """
    )
    plain = subprocess.run([sys.executable, "-c", script, "plain"], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 0, plain.stderr
    import distributed  # noqa: F401  # this process: the test runner's imports, and these
    import matplotlib.pyplot  # noqa: F401
    import scipy.stats  # noqa: F401

    from lacapacity.sweep.plan import Plan

    here = Study("k", "k", Grid(variant=("linear", "delta", "gated_delta(alpha=0.9)"), **SMALL))
    assert json.loads(plain.stdout) == sorted(Plan(here, torch.device("cpu")).keys.values())


# ---------------------------------------------------------------- what a results folder holds


def test_capacity_store_lists_and_prunes_what_no_latest_run_uses(tmp_path, cli):
    out = tmp_path / "r"
    _run(out, "linear", "delta")
    _run(out, "linear")  # the latest run of the study no longer uses delta's cells
    store = out / ".sweep" / "reuse"
    assert len(list(store.glob("*.json"))) == 3  # two cells and the manifest
    code, listing, _ = cli.here("store", out)
    table = listing.splitlines()
    assert code == 0
    assert table[0].split()[:4] == ["study", "cells", "used", "points"]
    assert table[1].split()[:4] == ["reuse", "2", "1", "8"]
    code, listing, _ = cli.here("store", out, "--prune", "--dry-run")
    assert code == 0 and "would remove" in listing and len(list(store.glob("*.json"))) == 3
    assert cli.here("store", out, "--prune").returncode == 0
    assert len(list(store.glob("*.json"))) == 2
    assert _run(out, "linear").reused == 4  # what the latest run used is kept
    cli.fails(cli.here("store", tmp_path / "nothing"), "holds no stored points")


def test_a_memory_keeps_its_colour_in_every_figure_of_a_run(tmp_path):
    from matplotlib.colors import to_hex

    from lacapacity import plots

    res = sweep.compare(
        ["linear", "delta(beta=0.5)", "gated_delta", "kda(normalize=false)"],
        d=(16, 32),
        load=(0.5, 1, 2),
        seeds=1,
        out=tmp_path,
        device="cpu",
        progress=False,
    )
    seen = {}
    for stem, fig in plots.figures(res.dataset):
        colours = {}
        for ax in fig.axes:
            for line in ax.get_lines():
                if str(line.get_gid()).startswith("measured:"):
                    colours.setdefault(str(line.get_gid()).split(":", 1)[1].split("|")[0], set()).add(
                        to_hex(line.get_color())
                    )
        assert colours, stem
        for label, found in colours.items():
            assert len(found) == 1, (stem, label, found)
            assert seen.setdefault(label, found) == found, (stem, label)
    assert {"linear", "delta(beta=0.5)", "gated_delta", "kda(normalize=false)"} <= set(seen)
