"""`capacity run trained` from the command line: a tiny study runs, saves its Dataset and draws its figure; a bad
training setting is one line and exit 2."""

import pytest
import xarray as xr

SETS = ["variant=linear", "d=8", "n=2,4", "seed=0", "vocabulary=16", "steps=3", "batch=2", "test=4"]
SETS += ["learned_steps=2", "lr=0.01,0.1"]


@pytest.mark.slow
def test_capacity_run_trained_with_set(cli, tmp_path):
    args = [a for s in SETS for a in ("--set", s)]
    ran = cli.here("run", "trained", *args, "--out", str(tmp_path), "--quiet", "--executor", "serial")
    assert ran.returncode == 0, ran.stderr
    with xr.open_dataset(tmp_path / "trained.nc") as ds:
        assert ds.accuracy.sizes["lr"] == 2 and list(ds.n.values) == [2, 4]
        assert ds.attrs["steps"] == 3 and ds.attrs["vocabulary"] == 16
    assert (tmp_path / "figures" / "trained_trained.png").is_file()


def test_a_bad_training_setting_is_one_line(cli, tmp_path):
    cli.fails(cli.here("run", "trained", "--set", "vocabulary=15", "--out", tmp_path), "vocabulary must be even")
    cli.fails(cli.here("run", "trained", "--set", "lr=0.1,-1", "--out", tmp_path), "lr must lie in (0, 10]")
