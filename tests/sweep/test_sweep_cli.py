"""`capacity run` and `capacity list`: output, progress, figures step, and one-line errors with exit code 2."""

from __future__ import annotations

import pytest
import xarray as xr
from test_sweep_support import one_torch_thread  # noqa: F401 - autouse fixture

from lacapacity import cli as command_line
from lacapacity import studies, sweep, variants

SETS = [
    "--set",
    "variant=linear",
    "--set",
    "keys=gaussian,orthogonal",
    "--set",
    "d=16",
    "--set",
    "load=1/2,2",
    "--set",
    "seed=0,1,2",
]


def test_list_shows_the_studies_first(cli):
    done = cli.here("list")
    assert done.returncode == 0
    out = done.stdout
    assert out.startswith("studies:\n  capacity-vs-d ")
    for name, desc in studies.available().items():
        assert f"  {name}" in out and desc in out
    assert "variants:" not in cli.here("list", "studies").stdout


@pytest.mark.slow
def test_run_writes_the_dataset_then_renders_the_figures(tmp_path, cli):
    out = tmp_path / "res"
    captured = cli.here("run", "capacity-vs-d", *SETS, "--out", out, "--executor", "serial", "--device", "cpu")
    assert captured.returncode == 0, captured.stderr
    lines = captured.stdout.splitlines()
    assert lines[0] == str(out / "capacity-vs-d.nc")
    figures = [p for p in lines[1:]]
    assert figures and all(p.startswith(str(out / "figures")) for p in figures)
    assert {p.rsplit(".", 1)[1] for p in figures} == {"png", "pdf"} and all(
        (out / "figures" / p.rsplit("/", 1)[1]).is_file() for p in figures
    )
    assert "12/12" in captured.stderr and "pt" in captured.stderr  # the progress bar: points done / total
    with xr.open_dataset(out / "capacity-vs-d.nc") as saved:
        assert dict(saved.mse.sizes) == {"variant": 1, "key_family": 2, "d": 1, "load": 2, "seed": 3}

    # rerun, verbosely: everything is reused, plain log lines instead of a bar
    rerun = cli.here("run", "capacity-vs-d", *SETS, "--out", out, "--verbose", "--device", "cpu")
    err = rerun.stderr
    assert rerun.returncode == 0, err
    assert "12 points; 12 already stored, 0 passes to measure" in err and "12 reused" in err and "\r" not in err

    # and quietly: nothing but the result paths
    captured = cli.here("run", "capacity-vs-d", *SETS, "--out", out, "--quiet", "--device", "cpu")
    assert captured.returncode == 0
    assert captured.stderr == "" and captured.stdout.splitlines()[0] == str(out / "capacity-vs-d.nc")


def test_help(capsys):
    with pytest.raises(SystemExit) as exc:
        command_line.main(["run", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--set",
        "--out",
        "--device",
        "--executor",
        "--scheduler",
        "--workers",
        "--quiet",
        "--verbose",
        "--import",
    ):
        assert flag in text


def test_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    out = ["--out", tmp_path]

    def _one_line_error(argv, *fragments):
        assert cli.fails(cli.here(*argv), *fragments).startswith("capacity: error: ")

    _one_line_error(["run", "nosuch", *out], "unknown study 'nosuch'; known: bill, capacity-vs-d, feature-maps")
    _one_line_error(
        ["run", "capacity-vs-d", "--set", "width=3", *out],
        "unknown --set field(s) width; allowed: variant, keys, feature, d, load",
    )
    _one_line_error(["run", "capacity-vs-d", "--set", "d=0", *out], "d must be a whole number >= 1, got 0")
    _one_line_error(["run", "capacity-vs-d", "--set", "keys=nosuch", *out], "unknown key family 'nosuch'")
    _one_line_error(["run", "capacity-vs-d", "--executor", "threads", *out], "invalid choice: 'threads'")
    _one_line_error(["run", "capacity-vs-d", "--device", "tpu", *out], "invalid choice: 'tpu'")
    if "softmax" not in variants.available():
        _one_line_error(["run", "bill", *out], "unknown variant 'softmax'; known: ")
    assert not (tmp_path / ".sweep").exists(), "nothing ran"


def test_the_light_command_line_names_what_the_sweep_takes():
    """cli keeps the executor names as text (no torch import for --help): they must not drift."""
    assert command_line.EXECUTORS == tuple(sweep.EXECUTORS)


def test_no_figures_saves_the_results_alone(cli, tmp_path):
    done = cli.here("compare", "linear", "--d", "8", "--load", "1", "--seeds", "1", "--out", tmp_path, "--no-figures")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [str(tmp_path / "compare.nc")]  # the results' path, no figure's
    assert sorted(p.name for p in tmp_path.iterdir()) == [".sweep", "compare.nc"]
