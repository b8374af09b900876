"""`capacity check` and the command line's contract: one line and exit 2 on bad input."""

import subprocess
import sys

import pytest

from capacity import CapacityError, check, cli, theory


@pytest.fixture(scope="module")
def rows():
    return check.run_checks(seed=0)


def test_every_check_holds(rows):
    assert rows and all(r.passed for r in rows), check.format_table(rows)
    assert {r.theorem for r in rows} == {f"T{i}" for i in range(1, 21)}  # T14-T20: capacity/check/precision.py
    table = check.format_table(rows)
    assert f"{len(rows)} of {len(rows)} checks hold" in table and "FAIL" not in table


def test_a_wrong_closed_form_is_caught(monkeypatch):
    monkeypatch.setattr(theory, "random_keys_error", lambda n, d: n / d)
    monkeypatch.setattr(theory, "two_pair_readout", lambda k1, k2, v1, v2: (k1 * k1).sum(-1)[..., None] * v1)
    monkeypatch.setattr(theory, "welch_bound", lambda n, d: 0.9)
    bad = [r for r in check.run_checks(seed=0, only=["T2", "T6", "T7"]) if not r.passed]
    whats = " | ".join(r.what for r in bad)
    assert "(n - 1)/d" in whats and "k1 S" in whats and "Welch" in whats
    assert "FAILED" in check.format_table(bad)


def test_only_selects_theorems_and_rejects_unknown_ones():
    assert {r.theorem for r in check.run_checks(only=["T2", "T13"])} == {"T2", "T13"}
    with pytest.raises(CapacityError, match="unknown theorem"):
        check.run_checks(only=["T99"])


def test_cli_check_and_list(capsys):
    assert cli.main(["check", "--only", "T2,T12"]) == 0
    out = capsys.readouterr().out
    assert "checks hold" in out and "T12" in out and "T7" not in out
    assert cli.main(["list", "keys"]) == 0
    out = capsys.readouterr().out
    assert "orthogonal" in out and "simplex" in out


@pytest.mark.parametrize(
    "argv,match",
    [
        (["bogus"], "invalid choice: 'bogus'"),
        (["check", "--seed", "x"], "invalid int value"),
        (["check", "--device", "tpu9"], "device must be"),
        (["check", "--only", "T0"], "unknown theorem"),
        (["list", "nothing"], "invalid choice"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, match, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("capacity: error:") and match in err[0]


def test_the_installed_command_prints_no_traceback():
    proc = subprocess.run(
        [sys.executable, "-m", "capacity.cli", "check", "--seed", "-3"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "seed must be" in proc.stderr
