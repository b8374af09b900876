"""A crash of the command's own process is one line, exit 2, naming the code that ran (issue 31).

A segfault (``ctypes.string_at(0)``) or ``os.abort()`` in a memory's ``write``, met in the behavioural fingerprint
(plan time) or in the measurement under ``--executor serial``: both run in the command's process, which the crash
ends; the process the user started (``lacapacity.base._supervise``) names the memory and the call from the breadcrumb
``lacapacity.errors.user_code`` leaves. And the supervisor on its own: stop signals forwarded once, the child's status
passed on, no process left when it is killed. Subprocesses only: the process itself is what is tested.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from proc_support import alive, as_from_a_terminal, still_alive
from user_code_support import user_memory

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the supervisor forks (Linux)")

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

CRASHES = {"segfault": ("ctypes.string_at(0)", "SIGSEGV"), "abort": ("os.abort()", "SIGABRT")}
WHEN = {
    "fingerprint": "True",  # the first write of all: the behavioural fingerprint, at plan time
    "serial": "k.shape[1] > 24",  # past the fingerprint's 24 pairs: the measurement, in the command's process
}


@pytest.mark.slow  # a process of its own: about 5 s each on the shared 2-core VM, most of it importing torch
@pytest.mark.parametrize("crash", sorted(CRASHES))
@pytest.mark.parametrize("where", sorted(WHEN))
def test_a_crash_in_the_users_write_is_one_line_naming_the_memory(cli, tmp_path, monkeypatch, crash, where):
    line, signame = CRASHES[crash]
    mod = user_memory(tmp_path, monkeypatch, write=f"if {WHEN[where]}: {line}")
    argv = ["compare", f"{mod}:Mem", "--d", "8", "--load", "4", "--seeds", "1", "--quiet", "--executor", "serial"]
    proc = cli(*argv, "--out", tmp_path / "o", timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith(f"capacity: error: memory '{mod}:Mem") and "in write()" in lines[0], lines[0]
    assert signame in lines[0], lines[0]
    assert proc.stdout == ""


@pytest.mark.slow  # a local Dask cluster: about 20 s on the shared 2-core VM
def test_a_crash_on_a_dask_worker_is_one_line_naming_the_pass(cli, tmp_path, monkeypatch):
    """Each time the worker crashes its nanny starts it again and the task is re-run, until Dask gives up
    (KilledWorker, the catch-all 'unexpected' line before): one line naming the pass, the crash, what is saved."""
    mod = user_memory(tmp_path, monkeypatch, write=f"if {WHEN['serial']}: {CRASHES['segfault'][0]}")
    argv = ["compare", f"{mod}:Mem", "--d", "8", "--load", "4", "--seeds", "1", "--quiet", "--executor", "dask"]
    proc = cli(*argv, "--workers", "1", "--out", tmp_path / "o", timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "unexpected" not in lines[0] and f"while measuring {mod}:Mem gaussian d=8" in lines[0], lines[0]
    assert "died" in lines[0] and "0 of 1 points are saved" in lines[0], lines[0]


def _pid(task: object) -> int:
    return os.getpid()


@pytest.mark.slow  # a local Dask cluster of one worker: about 5 s on the shared 2-core VM
def test_a_local_cluster_that_does_not_close_in_time_masks_nothing_and_leaves_no_worker(monkeypatch):
    """Issue 51, on the loaded VM: a nanny still starting its crashed worker again outlasted the cluster's close,
    whose TimeoutError ("timed out after 30 s.") then stood in for the run's own line. A close that fails is
    passed over, and the worker process it left is killed."""
    from distributed import LocalCluster

    from lacapacity.sweep import executors

    closes = []

    def late(self, timeout=None):  # the close that outlasts its timeout; the real one after the test
        closes.append(self)
        raise TimeoutError(f"timed out after {timeout} s.")

    monkeypatch.setattr(LocalCluster, "close", late)
    try:
        got = dict(executors.execute("dask", _pid, [("a", 0)], workers=1))
        assert set(got) == {"a"} and got["a"] != os.getpid(), got  # the task ran in the worker process
        assert not still_alive([got["a"]], within=60), "the worker outlived its run"
    finally:
        monkeypatch.undo()
        for cluster in closes:
            cluster.close()


# ---------------------------------------------------------------- the supervisor on its own (no torch: fast)

SUPERVISED = """
import os, signal, sys, time
from lacapacity.base import _supervise
from lacapacity.errors import user_code

_supervise.supervise()
print(os.getpid(), flush=True)
{body}
"""


def _supervised(body: str, **kw) -> subprocess.Popen:
    """The body run under the supervisor, started as from a terminal unless ``preexec_fn`` says otherwise (a test
    run in the background or under nohup ignores signals, and so would the process: issue 51's loaded CI run)."""
    return subprocess.Popen(
        [sys.executable, "-c", SUPERVISED.format(body=textwrap.dedent(body))],
        env=ENV,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **{"preexec_fn": as_from_a_terminal, **kw},
    )


@pytest.mark.parametrize(
    "body,status,line",
    [
        ("sys.exit(7)", 7, None),  # the child's status, passed on
        ("os.kill(os.getpid(), signal.SIGTERM)", 143, "capacity: terminated (SIGTERM)"),  # no handler: the status
        (  # the closed pipe's status, quietly
            "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\nos.kill(os.getpid(), signal.SIGPIPE)",
            141,
            None,
        ),
        (
            "with user_code(\"key family 'mine'\", 'in draw()'):\n    os.abort()",
            2,
            "capacity: error: key family 'mine' ended the process with SIGABRT (Aborted) in draw(); ",
        ),
        (  # the guarded block was left: the crash is not blamed on it
            "with user_code(\"memory 'm'\", 'in write()'):\n    pass\nos.kill(os.getpid(), signal.SIGSEGV)",
            2,
            "capacity: error: the command's process crashed (SIGSEGV (Segmentation fault)) outside your code",
        ),
        (  # nested blocks: the inner one is named, and once left, the outer one again
            "with user_code(\"memory 'outer'\", 'in read()'):\n"
            "    with user_code(\"feature map 'inner'\", 'when built'):\n        pass\n"
            "    os.kill(os.getpid(), signal.SIGKILL)",
            2,
            "capacity: error: memory 'outer' ended the process with SIGKILL (Killed) in read(); ",
        ),
    ],
)
def test_the_supervisor_passes_the_status_on_and_names_a_crash(body, status, line):
    proc = _supervised(body)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    child = int(out.split()[0])
    assert child != proc.pid  # the body ran in the child
    if line is None:
        assert err == ""
    else:
        assert len(err.splitlines()) == 1 and err.startswith(line), err


IN_A_BUILT_IN = """
with user_code("key family 'gaussian'", "in draw()"):  # a built-in's code runs when the signal comes
    print("in", flush=True)
    while True:
        time.sleep(0.05)
"""


@pytest.mark.parametrize("signum", [signal.SIGQUIT, signal.SIGHUP, signal.SIGUSR1])
@pytest.mark.parametrize("to", ["the process", "the command's child"])
def test_a_stray_signal_is_one_line_naming_it_and_never_blames_the_code_that_ran(signum, to):
    """Issue 51: SIGQUIT was blamed on the built-in key family, SIGHUP and SIGUSR1 on 'outside your code
    (unexpected)'. Sent to the process the user started (forwarded) or to the command's own process."""
    proc = _supervised(IN_A_BUILT_IN)
    try:
        child = int(proc.stdout.readline())
        assert proc.stdout.readline() == "in\n"  # the guarded block is open: the event, not a delay
        os.kill(proc.pid if to == "the process" else child, signum)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, err
    assert len(err.splitlines()) == 1 and err.startswith(f"capacity: stopped by {name} ("), err
    assert "gaussian" not in err and "unexpected" not in err, err
    assert not alive(child)


IGNORED = """
print(signal.getsignal(signal.SIGHUP) is signal.SIG_IGN, flush=True)
sys.stdin.readline()  # the test has sent SIGHUP: an ignored signal is discarded when sent, nothing is left to come
print("went on", flush=True)
"""


def _nohup() -> None:
    as_from_a_terminal()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@pytest.mark.parametrize("to", ["the process", "the command's child"])
def test_a_signal_ignored_when_the_command_started_stays_ignored(to):
    """``nohup capacity ...``: SIGHUP ignored by the process the user started is ignored by the command too (not
    forwarded, not a stop), as it would be without the supervisor."""
    proc = _supervised(IGNORED, preexec_fn=_nohup)
    try:
        child = int(proc.stdout.readline())
        assert proc.stdout.readline() == "True\n"  # the command inherited the ignore
        os.kill(proc.pid if to == "the process" else child, signal.SIGHUP)
        out, err = proc.communicate("go\n", timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "went on\n" and err == "", (out, err)


HANG = """
from lacapacity import cli

cli._handle_stops()  # the command's own handlers (what lacapacity.cli.main installs)
try:
    print("ready", flush=True)  # the event the tests wait for (issue 51: not a delay)
    while True:
        time.sleep(0.05)
except BaseException as exc:  # the stop, raised once; a second one would interrupt the sleep below
    print(type(exc).__name__, flush=True)
    time.sleep(0.5)
    print("unwound", flush=True)
"""


@pytest.mark.parametrize("signum,raised", [(signal.SIGINT, "KeyboardInterrupt"), (signal.SIGTERM, "Terminated")])
@pytest.mark.parametrize("to", ["the process", "the group"])
def test_a_stop_signal_reaches_the_command_once(signum, raised, to):
    """kill of the process the user started is forwarded; kill of the group (both get it) stops the command once."""
    proc = _supervised(HANG)
    try:
        child = int(proc.stdout.readline())
        assert proc.stdout.readline() == "ready\n"  # the handlers are in place
        (os.kill if to == "the process" else os.killpg)(proc.pid, signum)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out.split() == [raised, "unwound"], (out, err)
    assert not alive(child)


def test_kill_9_of_the_supervisor_leaves_no_process():
    proc = _supervised("while True:\n    time.sleep(0.05)")
    try:
        child = int(proc.stdout.readline())
        assert alive(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert not still_alive([child], within=60)
    finally:
        proc.kill()
        try:
            os.kill(child, signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError):
            pass


def test_ctrl_c_at_a_terminal_stops_the_command_once():
    """Ctrl-C at a terminal: the kernel signals the whole foreground group (SI_KERNEL), child included; the
    supervisor does not send it again, and the command stops once, as an unsupervised one would."""
    import fcntl
    import select
    import termios

    master, slave = os.openpty()

    def terminal() -> None:  # the pty as controlling terminal of a new session: its foreground group is ours
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(
        [sys.executable, "-c", SUPERVISED.format(body=HANG)],
        env=ENV,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=terminal,
    )
    os.close(slave)
    seen = b""

    def read_until(word: bytes, timeout: float) -> None:
        nonlocal seen
        end = time.monotonic() + timeout
        while word not in seen and time.monotonic() < end:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:  # the terminal's last writer is gone
                    return

    try:
        read_until(b"ready\r\n", 120)  # the child's pid, then its handlers in place (the line whole: ^C flushes)
        os.write(master, b"\x03")  # what the terminal sends for Ctrl-C
        read_until(b"unwound", 60)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        os.close(master)
    lines = seen.decode().replace("^C", "").split()  # the terminal echoes Ctrl-C as ^C
    assert proc.returncode == 0 and lines[1:] == ["ready", "KeyboardInterrupt", "unwound"], seen
