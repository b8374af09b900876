"""Faults in the user's own code end in one line naming it, the method and the exception (exit 2).

A plug-in memory that raises in any method (here, in a worker process, or on the way through pickling), returns
None from write, or declares another state_numel; a module that fails at import; an entry point that is broken or
is not a study; --traceback and CAPACITY_TRACEBACK. Each runs the command line's ``main`` in this process (or the
console module in a subprocess where the process matters) and checks stderr line by line.
"""

import os
import pickle
import subprocess
import sys

import pytest
from user_code_support import user_memory, user_module

from lacapacity import CapacityError
from lacapacity.base import plugins

HINT = "run with --traceback for the full traceback"


def _compare(tmp_path, variant, *extra):
    args = ["compare", variant, "--d", "8", "--load", "1,2", "--seeds", "1", "--out", tmp_path / "o", "--quiet"]
    return [*args, "--no-figures", *extra]


@pytest.mark.parametrize(
    "method,code,fragments",
    [
        ("init", "raise RuntimeError('bad constant')", ("RuntimeError in __init__(): bad constant", HINT)),
        ("init_state", "raise KeyError('no state')", ("KeyError in init_state(): 'no state'", HINT)),
        ("write", "return 1 / 0", ("ZeroDivisionError in write(): division by zero", HINT)),
        ("read", "raise IndexError('read past the end')", ("IndexError in read(): read past the end", HINT)),
        ("init", "raise SystemExit(3)", ("SystemExit in __init__(): 3", HINT)),
        (
            "write",
            "raise type('Odd', (Exception,), {'__str__': lambda self: 1 / 0})()",
            ("raised Odd in write(): Odd",),
        ),
        ("write", "return None", ("write() returned None", "must return the state")),
        ("write", "return [state]", ("write() returned a list", "must return the new state")),
        (
            "state_numel",
            "def state_numel(self):\n        return 1",
            ("state_numel() does not take (d, dv)", "state_numel(d, dv) -> int"),
        ),
    ],
)
def test_a_plugin_memory_that_fails_is_one_line_naming_it_and_the_method(
    cli, tmp_path, monkeypatch, method, code, fragments
):
    mod = user_memory(tmp_path, monkeypatch, **{method: code})
    status, _, err = cli.here(*_compare(tmp_path, f"{mod}:Mem", "--executor", "serial"))
    cli.one_line(status, err, f"memory '{mod}:Mem", *fragments)


@pytest.mark.slow
def test_an_error_in_a_worker_process_crosses_whole_and_traceback_shows_the_users_line(tmp_path, monkeypatch, cli):
    mod = user_memory(tmp_path, monkeypatch, write="return 1 / 0")
    args = _compare(tmp_path, f"{mod}:Mem", "--executor", "processes", "--workers", "1")
    status, _, err = cli.here("--traceback", *args)
    assert status == 2 and "Traceback" in err and f"{mod}.py" in err and "return 1 / 0" in err, err
    last = err.strip().splitlines()[-1]  # the one line still ends it (no hint: the traceback is there)
    assert last == f"capacity: error: memory '{mod}:Mem' raised ZeroDivisionError in write(): division by zero"


def test_capacity_traceback_in_the_environment_and_the_flag_after_the_command(tmp_path, monkeypatch, cli):
    mod = user_memory(tmp_path, monkeypatch, read="raise IndexError('read past the end')")
    status, _, err = cli.here(*_compare(tmp_path, f"{mod}:Mem", "--executor", "serial", "--traceback"))
    assert status == 2 and "Traceback" in err and "IndexError: read past the end" in err, err
    monkeypatch.setenv("CAPACITY_TRACEBACK", "1")
    status, _, err = cli.here(*_compare(tmp_path, f"{mod}:Mem", "--executor", "serial"))
    assert status == 2 and "Traceback" in err and err.strip().splitlines()[-1].startswith("capacity: error: memory")


def test_user_code_errors_survive_pickling_with_their_traceback():
    from lacapacity.errors import UserCodeError, user_code

    try:
        with user_code("memory 'm:M'", "in write()"):
            {}["missing"]
    except UserCodeError as exc:
        caught = exc
    back = pickle.loads(pickle.dumps(caught))
    assert type(back) is UserCodeError and isinstance(back, CapacityError) and isinstance(back, ValueError)
    assert str(back) == "memory 'm:M' raised KeyError in write(): 'missing'"
    assert back.details == caught.details and "KeyError: 'missing'" in back.details


@pytest.mark.parametrize(
    "source,fragments",
    [
        ("def broken(:\n", ("raised SyntaxError at import", "line 1")),
        ("raise RuntimeError('no licence file')\n", ("raised RuntimeError at import: no licence file", HINT)),
        ("import nosuchdependency_xyz\n", ("raised ModuleNotFoundError at import", "nosuchdependency_xyz")),
    ],
)
def test_a_module_that_fails_at_import_is_one_line(cli, tmp_path, monkeypatch, source, fragments):
    mod = user_module(tmp_path, monkeypatch, source)
    status, _, err = cli.here(*_compare(tmp_path, "linear", "--import", mod))
    cli.one_line(status, err, f"module '{mod}'", *fragments)
    status, _, err = cli.here("run", "capacity-vs-d", "--set", f"variant={mod}:Mem", "--out", tmp_path / "o")
    cli.one_line(status, err, f"module '{mod}'", *fragments)


@pytest.mark.parametrize(
    "name,fragments",
    [
        ("", ("--import : '' is not a module name",)),
        ("./mymem.py", ("a module name is needed, not a file path", "PYTHONPATH", "'mymem'")),
        ("nosuchplugin_xyz", ("cannot import 'nosuchplugin_xyz'", "PYTHONPATH")),
    ],
)
def test_import_names_that_are_no_modules_are_one_line(cli, tmp_path, name, fragments):
    status, _, err = cli.here(*_compare(tmp_path, "linear", "--import", name))
    cli.one_line(status, err, *fragments)


def test_a_key_family_and_a_feature_map_of_the_user_that_fail_are_one_line(cli, tmp_path, monkeypatch):
    mod = user_module(
        tmp_path,
        monkeypatch,
        """
        from lacapacity.inputs.features import FeatureMap
        from lacapacity.inputs.keys import Family

        def draw(batch, n, d, generator):
            raise ValueError("no keys today")

        FAM = Family("mine", draw, (), True, "keys that fail")

        class Phi(FeatureMap):
            name = "phi"
            def __init__(self):
                raise OSError("weights not found")
            def feature_dim(self, d):
                return d
            def map(self, x):
                return x
        """,
    )
    run = ["run", "capacity-vs-d", "--set", "d=8", "--set", "load=1", "--set", "seed=0", "--out", tmp_path / "o"]
    status, _, err = cli.here(*run, "--set", f"keys={mod}:FAM")
    cli.one_line(status, err, "key family 'mine' raised ValueError in draw(): no keys today")
    status, _, err = cli.here(*run, "--set", "variant=linear", "--set", f"feature={mod}:Phi")
    cli.one_line(status, err, f"feature map '{mod}:Phi' raised OSError when built: weights not found")


@pytest.fixture
def broken_plugins(tmp_path, monkeypatch):
    """An installed package declaring a working study, a study that is a list, and plug-ins whose modules fail."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "goodplug.py").write_text(
        "from lacapacity.sweep.config import Grid, Study\nSTUDY = Study('goodstudy', 'a fine plug-in study', Grid(load=(1,)))\nNOT = [1, 2]\n"
    )
    (site / "raisingplug.py").write_text("raise RuntimeError('plugin import failed')\n")
    (site / "syntaxplug.py").write_text("def f(:\n")
    dist = site / "brokenplugs-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplugs\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[lacapacity.studies]\ngoodstudy = goodplug:STUDY\nnotastudy = goodplug:NOT\nraisingstudy = raisingplug:STUDY\n\n"
        "[lacapacity.keys]\nsyntaxkeys = syntaxplug:FAM\n\n[lacapacity.variants]\nraisingmem = raisingplug:Mem\n"
    )
    monkeypatch.syspath_prepend(str(site))
    plugins.entry_points.cache_clear()
    plugins._installed.cache_clear()
    yield site
    plugins.entry_points.cache_clear()
    plugins._installed.cache_clear()


def test_capacity_list_warns_about_broken_entry_points_and_lists_the_rest(broken_plugins, cli):
    status, out, err = cli.here("list")
    assert status == 0, err
    assert "goodstudy" in out and "capacity-vs-d" in out and "gaussian" in out and "linear" in out
    assert "notastudy" not in out and "raisingstudy" not in out and "syntaxkeys" not in out
    warned = err.strip().splitlines()
    assert len(warned) == 3 and all(w.startswith("capacity: warning: plug-in '") for w in warned), err
    assert "is a list, not a lacapacity.sweep.Study" in err and "RuntimeError at import" in err
    assert "SyntaxError at import" in err


@pytest.mark.parametrize(
    "argv,fragments",
    [
        (["run", "notastudy"], ("plug-in 'notastudy'", "goodplug:NOT", "is a list, not a lacapacity.sweep.Study")),
        (["run", "raisingstudy"], ("plug-in 'raisingstudy'", "raised RuntimeError at import: plugin import failed")),
        (["compare", "raisingmem", "--d", "8"], ("plug-in 'raisingmem'", "raised RuntimeError at import")),
        (["run", "capacity-vs-d", "--set", "keys=syntaxkeys"], ("plug-in 'syntaxkeys'", "raised SyntaxError")),
    ],
)
def test_using_a_broken_entry_point_is_one_line(cli, broken_plugins, tmp_path, argv, fragments):
    status, _, err = cli.here(*argv, "--out", tmp_path / "o")
    cli.one_line(status, err, *fragments)


def test_an_unexpected_exception_is_still_one_line_with_its_type(cli, tmp_path, monkeypatch):
    from lacapacity.sweep import runner

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug in assembly")

    monkeypatch.setattr(runner, "assemble", broken)
    status, _, err = cli.here(*_compare(tmp_path, "linear", "--executor", "serial"))
    cli.one_line(status, err, "ZeroDivisionError: a bug in assembly", "unexpected", HINT)


@pytest.mark.slow
def test_the_console_script_ends_a_user_error_in_one_line(cli, tmp_path):
    """The same through a subprocess: exit status 2, no traceback, from the interpreter's point of view."""
    (tmp_path / "failmem.py").write_text("class Mem:\n    def __init__(self):\n        raise RuntimeError('nope')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-m", "lacapacity.cli", *map(str, _compare(tmp_path, "failmem:Mem"))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    cli.one_line(proc.returncode, proc.stderr, "memory 'failmem:Mem' raised RuntimeError in __init__(): nope", HINT)


# ---------------------------------------------------------------- every task runs the user's memory under the guard

MEASURED_ONLY = """
import os, sys
import torch


def _measuring():
    # true beneath the sweep's measure (capacity/sweep/jobs.py), false at plan time (the fingerprint, the checks)
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "measure" and f.f_code.co_filename.endswith(os.path.join("sweep", "jobs.py")):
            return True
        f = f.f_back
    return False


class Mem:
    name = "mem"

    @property
    def params(self):
        return {{}}

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state, k, v):
        if _measuring():
            {fault}
        return state + k.transpose(1, 2) @ v

    def read(self, state, q):
        return q @ state

    def state_numel(self, d, dv):
        return d * dv
"""


def _smallest(kind: str, variant: str):
    """The first named study of task ``kind``, cut to one memory (``variant``), its smallest d and n or load, one seed."""
    from lacapacity import studies

    named = [s for s in map(studies.get, studies.available()) if s.task.kind == kind]
    assert named, f"task {kind!r} has no named study to check its guard with: add one (lacapacity.studies)"
    g = named[0].grid
    curve = "n" if g.curve == "n" else "load"
    return named[0].with_overrides(
        {"variant": variant, "d": min(g.d), curve: min(g.curve_values), "seed": 0, "dv": [], "heads": 1}
    )


def _kinds():
    from lacapacity import tasks

    return sorted(tasks.TASKS)  # whatever the registry lists: a new task is checked without a new line here


@pytest.mark.parametrize("kind", _kinds())
@pytest.mark.parametrize(
    "fault,fragment",
    [("raise RuntimeError('boom')", "raised RuntimeError in write(): boom"), ("raise SystemExit(7)", "SystemExit")],
)
def test_every_task_runs_the_users_memory_under_the_guard(tmp_path, monkeypatch, kind, fault, fragment):
    from lacapacity import sweep
    from lacapacity.errors import UserCodeError

    mod = user_module(tmp_path, monkeypatch, MEASURED_ONLY.format(fault=fault))
    study = _smallest(kind, f"{mod}:Mem")
    with pytest.raises(UserCodeError) as got:
        sweep.run(study, out=tmp_path / "o", device="cpu", executor="serial", progress=False)
    assert str(got.value).startswith(f"memory '{mod}:Mem") and fragment in str(got.value), str(got.value)


@pytest.mark.slow  # a command of its own: about 8 s on the loaded 2-core VM
def test_the_trained_task_names_a_memory_that_calls_os_exit(cli, tmp_path, monkeypatch):
    mod = user_module(tmp_path, monkeypatch, MEASURED_ONLY.format(fault="os._exit(3)"))
    argv = ["run", "trained", "--set", f"variant={mod}:Mem", "--set", "d=32", "--set", "n=4", "--set", "seed=0"]
    proc = cli(*argv, "--executor", "serial", "--quiet", "--no-figures", "--out", tmp_path / "o", timeout=180)
    cli.fails(proc, f"memory '{mod}:Mem' called os._exit(3) in write()")
