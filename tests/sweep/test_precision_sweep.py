"""The sweep's state_dtype, rounding, heads, value_heads axes and its queries field."""

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, studies, sweep, variants
from lacapacity.inputs import keys, values
from lacapacity.sweep.config import Grid, Study
from lacapacity.sweep.plan import Plan
from lacapacity.tasks import Recall, probe
from lacapacity.variants import heads, precision


def _study(**grid):
    base = dict(variant=("linear", "delta"), d=(16,), n=(8, 64), seed=(0, 1))
    return Study("axes", "axes", Grid(**{**base, **grid}), Recall(values="gaussian"))


def test_the_axes_are_set_keys_and_coordinates(tmp_path):
    st = _study().with_overrides(
        ["state_dtype=float32,bfloat16", "rounding=step,chunk=4+stochastic", "heads=1,2", "queries=16"]
    )
    assert st.grid.rounding == ("step", "chunk=4+stochastic") and st.task.queries == 16
    ds = sweep.run(st, out=tmp_path, device="cpu", progress=False).dataset
    assert {"state_dtype", "rounding", "heads"} <= set(ds.mse.dims) and "value_heads" not in ds.dims
    assert ds["value_heads"].dims == ("heads",) and "mse_se" in ds and "recall_se" in ds
    # the numbers are the probe's on the wrapped memory
    K = keys.make("gaussian", 64, 16, batch=2, seed=[0, 1])
    V = values.make("gaussian", 64, 16, batch=2, seed=[0, 1])
    mem = heads.split(precision.stored(variants.get("delta"), "bfloat16", "chunk=4+stochastic", seed=[0, 1]), 2)
    want = probe.recall(mem, K, V, checkpoints=[8, 64], queries=16)
    got = ds.mse.sel(variant="delta", state_dtype="bfloat16", rounding="chunk=4+stochastic", heads=2).squeeze()
    np.testing.assert_array_equal(got.transpose("n", "seed").values, want.mse.values)


def test_defaults_keep_the_dataset_as_it_was(tmp_path):
    ds = sweep.run(_study(), out=tmp_path, device="cpu", progress=False).dataset
    assert set(ds.mse.dims) == {"variant", "key_family", "d", "n", "seed"}
    assert ds["state_dtype"].item() == "float32" and ds["rounding"].item() == "step" and ds["heads"].item() == 1
    assert "mse_se" not in ds


@pytest.mark.slow
def test_each_setting_has_its_own_reuse_key(tmp_path):
    st = _study(state_dtype=("float32", "bfloat16"), rounding=("step", "final"), heads=(1, 2), value_heads=(2, 4))
    keyed = list(Plan(st, torch.device("cpu")).keys.values())
    assert len(set(keyed)) == len(keyed) == 2 * 2 * 2 * 2 * 2  # one file per cell
    points = len(keyed) * 2 * 2  # two pair counts, two seeds
    first = sweep.run(st, out=tmp_path, device="cpu", progress=False)
    again = sweep.run(st, out=tmp_path, device="cpu", progress=False)
    assert first.measured == points and again.reused == points and again.measured == 0
    assert {"heads", "value_heads"} <= set(first.dataset.mse.dims)


@pytest.mark.parametrize(
    "sets,match",
    [
        (["state_dtype=float64"], "unknown state_dtype 'float64'; known: bfloat16"),
        (["rounding=chunk=0"], "rounding must be step, final or chunk=C"),
        (["heads=3"], "heads = 3 must divide the key dimension d = 16"),
        (["heads=2", "value_heads=3"], "must divide"),
        (["queries=-1"], "queries must be a whole number >= 0"),
    ],
)
def test_bad_settings_are_one_line(sets, match, tmp_path):
    with pytest.raises(CapacityError, match=match):
        sweep.run(_study().with_overrides(sets), out=tmp_path, device="cpu", progress=False)


def test_other_kinds_refuse_the_axes():
    with pytest.raises(CapacityError, match="apply to recall studies only"):
        studies.get("bill").with_overrides(["state_dtype=bfloat16"])


@pytest.mark.slow
def test_the_command_line_runs_the_precision_study_small(tmp_path, cli):
    argv = ["run", "precision", "--out", str(tmp_path), "--device", "cpu", "--quiet"]
    argv += ["--set", "variant=linear", "--set", "n=16,64", "--set", "seed=0", "--set", "state_dtype=float32,bfloat16"]
    argv += ["--set", "rounding=step,final"]
    assert cli.here(*argv).returncode == 0
    import xarray as xr

    with xr.open_dataset(tmp_path / "precision.nc", engine="h5netcdf") as ds:
        assert list(ds.state_dtype.values) == ["float32", "bfloat16"] and list(ds.rounding.values) == ["step", "final"]


def test_the_work_estimate_counts_only_the_sampled_reads():
    def cost(study):
        plan = Plan(study, torch.device("cpu"))
        return sum(plan.work(p) for p in plan.passes({}))

    full, sampled = _study(), _study().with_overrides(["queries=16"])
    d = dv = 16
    per_memory = lambda q: 2 * (64 * d * dv + sum(min(c, q or c) * c for c in (8, 64)) * dv)  # 2 seeds, n = 8, 64
    assert cost(full) == 2 * per_memory(0) and cost(sampled) == 2 * per_memory(16) < cost(full)
