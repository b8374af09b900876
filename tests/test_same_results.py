"""scripts/same_results.py: the comparison that says whether a change of the code changed a study's results. Its
verdict on two files against a direct reading: equal bytes pass (NaN where NaN), one ulp, a dtype, a missing or
extra variable or an attribute fail; timings are compared by dtype and shape only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr
from script_support import load_script

same_results = load_script(Path(__file__).resolve().parents[1] / "scripts" / "same_results.py", "same_results")


def _pair(tmp_path, edit):
    ds = xr.Dataset(
        {
            "mse": (("d", "n"), np.array([[0.25, np.nan], [1 / 3, 2.0]]), {"units": "value units^2"}),
            "decode_seconds": ("n", np.array([1e-4, 2e-4])),
        },
        coords={"d": [8, 16], "n": [4, 8]},
        attrs={"study": "s", "created": "2026-12-07T01:00"},
    )
    ds.to_netcdf(tmp_path / "a.nc")
    edit(ds.copy(deep=True).assign_attrs(created="2026-12-07T02:00")).to_netcdf(tmp_path / "b.nc")
    return same_results.compare(tmp_path / "a.nc", tmp_path / "b.nc")


def test_the_same_bytes_are_the_same_result(tmp_path):
    slower = lambda ds: ds.assign(decode_seconds=ds.decode_seconds * 3)  # a timing, and the run's own attrs
    assert _pair(tmp_path, slower) == (4, [])  # mse, decode_seconds, d and n


def test_any_difference_is_named(tmp_path):
    ulp = lambda ds: ds.assign(mse=ds.mse.copy(data=np.nextafter(ds.mse.values, 1.0)))  # one ulp, toward 1
    assert _pair(tmp_path, ulp)[1] == [f"mse: values differ (max |diff| {2.0 - np.nextafter(2.0, 1.0):.3g})"]
    single = lambda ds: ds.assign(mse=ds.mse.astype(np.float32))
    assert _pair(tmp_path, single)[1][0].startswith("mse: float64")
    extra = lambda ds: ds.assign(recall=ds.mse * 0)
    assert _pair(tmp_path, extra)[1] == ["only at head: recall"]
    renamed = lambda ds: ds.assign(mse=ds.mse.assign_attrs(units="1"))
    assert _pair(tmp_path, renamed)[1][0].startswith("mse: attrs differ")
    study = lambda ds: ds.assign_attrs(study="t")
    assert _pair(tmp_path, study)[1] == ["Dataset attrs differ"]
