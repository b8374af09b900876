"""Processes as ``/proc`` sees them, for the fault tests: whether a process still runs, and waiting for some to end."""

from __future__ import annotations

import signal
import time
from pathlib import Path


def alive(pid: int) -> bool:
    """The process runs (a zombie, killed and not yet reaped, does not; nor one that is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def still_alive(pids, within: float) -> set[int]:
    """Those of ``pids`` still running after at most ``within`` seconds (a bound, not a wait: it returns as soon as
    every one has ended)."""
    end = time.monotonic() + within
    left = {p for p in pids if alive(p)}
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = {p for p in left if alive(p)}
    return left


def as_from_a_terminal() -> None:
    """``preexec_fn``: the signal actions a command started at a terminal has. A test run started in the background
    (``cmd &`` in a script: SIGINT and SIGQUIT ignored) or under ``nohup`` (SIGHUP ignored) passes its ignored signals
    on to every process it starts, and the command keeps them ignored, as it should; a test that sends one of them
    must start its process as a terminal would."""
    for name in ("SIGINT", "SIGQUIT", "SIGHUP", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
