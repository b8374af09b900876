"""lacapacity.metrics.capacity against hand-computed crossings."""

import math

import numpy as np
import pytest
import xarray as xr

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.tasks.metrics import capacity


def test_crossing_is_interpolated_in_log_n():
    ds = xr.Dataset(
        {"mse": ("n", [0.0, 0.25, 0.75, 1.5]), "recall": ("n", [1.0, 0.95, 0.5, 0.1])}, coords={"n": [8, 16, 32, 64]}
    )
    # mse crosses 0.5 halfway between 16 and 32 (in y), i.e. at sqrt(16 * 32) in log n
    assert float(capacity(ds, metric="mse", threshold=0.5)) == pytest.approx(math.sqrt(16 * 32))
    assert float(capacity(ds, metric="recall", threshold=0.9)) == pytest.approx(16 * 2 ** ((0.95 - 0.9) / 0.45))
    assert np.isnan(float(capacity(ds, metric="mse", threshold=5.0)))  # never fails on the grid
    assert np.isnan(float(capacity(ds, metric="recall", threshold=1.5)))  # fails at once


def test_two_dimensional_n_over_d_and_load():
    d, load = np.array([4, 8]), np.array([0.5, 1.0, 2.0])
    n = np.outer(d, load)
    err = (n - 1) / d[:, None]  # the T7 curve: capacity at eps is 1 + eps d
    ds = xr.Dataset({"mse": (("d", "load"), err)}, coords={"d": d, "load": load, "n": (("d", "load"), n)})
    cap = capacity(ds, metric="mse", threshold=0.5)
    assert cap.dims == ("d",) and "n" not in cap.coords
    for i, dd in enumerate(d):
        lo, hi = n[i][err[i] <= 0.5].max(), n[i][err[i] > 0.5].min()
        y0, y1 = (lo - 1) / dd, (hi - 1) / dd
        want = math.exp(math.log(lo) + (0.5 - y0) / (y1 - y0) * (math.log(hi) - math.log(lo)))
        assert float(cap[i]) == pytest.approx(want)


def test_probe_capacity_tracks_t7():
    K = keys.make("gaussian", 200, 32, batch=16, seed=0)
    V = values.make("gaussian", 200, 32, batch=16, seed=1)
    ds = probe.recall(variants.get("linear"), K, V, checkpoints=list(range(2, 201, 2)))
    cap = capacity(ds, metric="mse", threshold=1.0)
    assert cap.dims == ("batch",)
    assert abs(float(cap.mean()) - theory.capacity_random_keys(1.0, 32)) < 3 * float(cap.std()) / 4 + 1.0


def test_bad_input():
    ds = xr.Dataset({"mse": ("n", [0.1, 0.2])}, coords={"n": [1, 2]})
    with pytest.raises(CapacityError, match="error metric"):
        capacity(ds, metric="signal", threshold=1)
    with pytest.raises(CapacityError, match="no variable 'recall'"):
        capacity(ds, metric="recall", threshold=1)
    with pytest.raises(CapacityError, match="no dimension 'load'"):
        capacity(ds, metric="mse", threshold=1, dim="load")
