"""plots.tables: the headline numbers of a results Dataset, against numbers computed here by hand."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from lacapacity.errors import CapacityError
from lacapacity.plots import tables


def _results() -> xr.Dataset:
    """Two seeds of mse and recall over n = 8, 16 for linear at d = dv = 8, stored as float32, bfloat16, int8 + ef."""
    mse = [[0.1, 0.3], [0.9, 1.3]]  # [n, seed]: seed 0 crosses 0.5 halfway (in log n), seed 1 a fifth of the way
    recall = [[1.0, 0.95], [0.5, 0.7]]
    formats = ["float32", "bfloat16", "int8/row+ef"]
    return xr.Dataset(
        {
            "mse": (("state_dtype", "n", "seed"), np.array([mse] * 3)),
            "recall": (("state_dtype", "n", "seed"), np.array([recall] * 3)),
        },
        coords={"state_dtype": formats, "n": [8, 16], "seed": [0, 1], "variant": "linear", "d": 8, "dv": 8},
    )


def test_headline_is_the_mean_and_standard_error_over_seeds():
    df = tables.headline(_results()).set_index("state_dtype")
    # capacity: the first crossing, linear in log n: n = 8 * 2^f, f the fraction of the way from 8 to 16
    mse_caps = [8 * 2 ** ((0.5 - 0.1) / (0.9 - 0.1)), 8 * 2 ** ((0.5 - 0.3) / (1.3 - 0.3))]
    recall_caps = [8 * 2 ** ((1.0 - 0.9) / (1.0 - 0.5)), 8 * 2 ** ((0.95 - 0.9) / (0.95 - 0.7))]
    for caps, col in ((mse_caps, "capacity (mse <= 0.5)"), (recall_caps, "capacity (recall >= 0.9)")):
        assert df.loc["float32", col] == pytest.approx(np.mean(caps))
        assert df.loc["float32", f"{col}_se"] == pytest.approx(abs(caps[0] - caps[1]) / 2)  # std(ddof=1)/sqrt(2)
    assert df.loc["float32", "mse at n_max"] == pytest.approx(1.1)
    assert df.loc["float32", "mse at n_max_se"] == pytest.approx(0.2)
    assert df.loc["float32", "recall at n_max"] == pytest.approx(0.6)
    assert list(df["n_max"]) == [16] * 3 and list(df["seeds"]) == [2] * 3


def test_the_bytes_of_each_stored_format_stand_beside_its_errors():
    df = tables.headline(_results()).set_index("state_dtype")
    assert df.loc["float32", "bytes"] == 4 * 8 * 8 and df.loc["bfloat16", "bytes"] == 2 * 8 * 8
    # int8 with error feedback keeps a float32 residual beside its int8 state: more than float32 alone. By hand at
    # d = dv = 8: 64 int8 numbers, 8 float32 row scales, 64 float32 residuals
    assert df.loc["int8/row+ef", "bytes"] == 64 * 1 + 8 * 4 + 64 * 4 > df.loc["float32", "bytes"]


def test_the_recall_over_the_last_pairs_written_stands_beside_the_recall_over_all():
    ds = _results()
    ds["recall_recent"] = ds["recall"].copy(data=[[[1.0, 1.0], [0.75, 0.5]]] * 3)  # [state_dtype, n, seed]
    df = tables.headline(ds).set_index("state_dtype")
    assert df.loc["float32", "recall_recent at n_max"] == pytest.approx(0.625)
    assert df.loc["float32", "recall_recent at n_max_se"] == pytest.approx(0.125)  # std(ddof=1)/sqrt(2)
    assert df.loc["float32", "recall at n_max"] == pytest.approx(0.6)
    assert "recall_recent at n_max" not in tables.headline(_results()).columns


def test_one_seed_has_no_standard_error_and_markdown_shows_none():
    ds = _results().isel(seed=[0])
    df = tables.headline(ds)
    assert df["mse at n_max_se"].isna().all()
    md = tables.markdown(df).splitlines()
    assert "±" not in "\n".join(md) and "| 0.9 |" in md[2]


def test_csv_and_markdown_round_trip(tmp_path):
    df = tables.headline(_results())
    back = pd.read_csv(tables.write(df, tmp_path / "t.csv"))
    pd.testing.assert_frame_equal(back, df, check_dtype=False)
    md = tables.write(df, tmp_path / "t.md").read_text().splitlines()
    assert len(md) == 2 + len(df)
    header = [c.strip() for c in md[0].strip("|").split("|")]
    assert "mse at n_max" in header and "mse at n_max_se" not in header
    row = dict(zip(header, (c.strip() for c in md[2].strip("|").split("|"))))
    assert row["mse at n_max"] == "1.1 ± 0.2" and row["bytes"] == "256"
    with pytest.raises(CapacityError, match=r"written as \.csv or \.md"):
        tables.write(df, tmp_path / "t.txt")
    with pytest.raises(CapacityError, match="needs the variable 'mse' or 'recall'"):
        tables.headline(_results().drop_vars(["mse", "recall"]))


@pytest.mark.slow  # two command-line runs, each importing torch
def test_capacity_table_prints_the_markdown_and_refuses_a_missing_file(tmp_path):
    path = tmp_path / "r.nc"
    _results().to_netcdf(path)
    out = subprocess.run([sys.executable, "-m", "lacapacity.cli", "table", str(path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].startswith("| state_dtype |") and "1.1 ± 0.2" in out.stdout
    gone = subprocess.run(
        [sys.executable, "-m", "lacapacity.cli", "table", str(tmp_path / "no.nc")], capture_output=True, text=True
    )
    assert gone.returncode == 2 and gone.stderr.strip().count("\n") == 0 and "no results file" in gone.stderr
    assert math.isfinite(float(out.stdout.splitlines()[2].split("|")[4]))  # bytes, a number
