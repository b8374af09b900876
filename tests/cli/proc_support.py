"""Processes as ``/proc`` sees them, for the fault tests: whether a process still runs, and waiting for some to end."""

from __future__ import annotations

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
