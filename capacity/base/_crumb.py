"""What the command's process is doing in code it does not own: a breadcrumb that outlives a crash.

A segfault or ``abort()`` in a user's memory ends the process at once: no Python runs afterwards to say whose code it
was. ``lacapacity.errors.user_code`` therefore writes, on entering the code it guards, who runs and where (``"memory
'mymem:Mem'"``, ``"in write()"``) into a small memory map shared with the process that supervises the command
(``lacapacity.base._supervise``), and puts back what was there on leaving. When the command dies of a signal, the
supervisor reads the breadcrumb and names the culprit in one line.

Only the process that ``install`` was called in writes, and only from its main thread (where the fingerprint and
the serial executor run user code): a forked figure worker, or a thread, leaves the breadcrumb alone. Without
``install`` (the Python API, tests calling ``lacapacity.cli.main``) ``mark`` and ``restore`` do nothing.

>>> import mmap
>>> shared = mmap.mmap(-1, SIZE)
>>> install(shared)
>>> before = mark("memory 'mine'", "in write()")
>>> read(shared)
("memory 'mine'", 'in write()')
>>> restore(before)
>>> read(shared) is None
True
>>> install(None)
"""

from __future__ import annotations

import mmap
import os
import threading

SIZE = 4096  # bytes of the map: a 2-byte length, then "who\0where" in UTF-8 (cut to fit)
_map: mmap.mmap | None = None
_owner = -1  # the pid that writes (the supervised command's process)


def install(shared: mmap.mmap | None) -> None:
    """Write the breadcrumbs of this process (its main thread) into ``shared``; None: write none."""
    global _map, _owner
    _map = shared
    _owner = os.getpid() if shared is not None else -1


def _mine() -> mmap.mmap | None:
    if _map is None or os.getpid() != _owner or threading.current_thread() is not threading.main_thread():
        return None
    return _map


def mark(who: str, where: str) -> bytes | None:
    """Record that ``who`` runs ``where``; returns what was recorded before (for ``restore``), None if not written."""
    shared = _mine()
    if shared is None:
        return None
    data = f"{who}\0{where}".encode("utf-8", "backslashreplace")[: SIZE - 2]
    size = int.from_bytes(shared[:2], "little")
    before = shared[: 2 + size]
    shared[2 : 2 + len(data)] = data
    shared[:2] = len(data).to_bytes(2, "little")
    return before


def restore(before: bytes | None) -> None:
    """Put back what ``mark`` returned (leaving the guarded code)."""
    shared = _mine()
    if shared is None or before is None:
        return
    shared[2 : len(before)] = before[2:]
    shared[:2] = before[:2]


def read(shared: mmap.mmap) -> tuple[str, str] | None:
    """``(who, where)`` last recorded in ``shared`` and not yet left; None when no guarded code runs."""
    size = int.from_bytes(shared[:2], "little")
    if not 0 < size <= SIZE - 2:
        return None
    who, _, where = bytes(shared[2 : 2 + size]).decode("utf-8", "replace").partition("\0")
    return who, where
