"""The files user code opens for reading, seen through Python's audit hooks (``sys.addaudithook``, PEP 578).

A stored point's numbers depend on every file the memory reads while it is measured, not only on the files its
parameters name. ``lacapacity.errors.user_code`` marks the code it guards (``enter``/``leave``); inside
``recording()``, every "open" audit event raised while such code runs, for reading, of a regular file that is
neither the standard library's nor an installed distribution's nor this package's (those are recorded by version
and by ``provenance.package``), nor in the compilers' caches (Triton's, torch inductor's), is collected. The sweep hashes what the behavioural fingerprint opened into the
reuse key (``sweep.plan``) and stores, with each cell, the hashes of what its measurement opened, checked when the
cell is reused (``sweep.store``).

What it cannot see: files opened by C code that raises no audit event (a C extension's own ``fopen``, a memory map
made from a path by a library), files opened by another process the memory starts, and files a memory opened before
the recording began and keeps open (it reads them through the open handle: only the open is seen).

>>> import os, tempfile
>>> from lacapacity.errors import user_code
>>> path = os.path.join(tempfile.mkdtemp(), "table.txt")
>>> _ = open(path, "w").write("1 2 3")
>>> with recording() as seen:
...     with user_code("memory 'mine'", "in write()"):
...         _ = open(path).read()
>>> seen == {os.path.realpath(path)}
True
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

_state = threading.local()  # .depth: user_code blocks open in this thread
_sinks: list[set[str]] = []  # the sets of the recording() blocks open (any thread)
_installed = False
_lock = threading.Lock()
_SYSTEM = ("/proc/", "/sys/", "/dev/")


@cache
def _skip() -> tuple[str, ...]:
    """Folders whose files are not recorded: the libraries' and this package's (recorded by version and by hash),
    the system's, and the compilers' caches (Triton's, torch's inductor: code compiled from what the key names)."""
    import getpass
    import tempfile

    from lacapacity.base._paths import library_dirs, package_dirs

    caches = [os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton")]
    caches.append(os.environ.get("TORCHINDUCTOR_CACHE_DIR") or "")
    try:
        caches.append(os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}"))
    except Exception:  # no user name to find (a container without one): no such folder either
        pass
    caches = [os.path.join(os.path.realpath(c), "") for c in caches if c]
    package = tuple(os.path.join(str(p), "") for p in package_dirs())
    return library_dirs() + package + _SYSTEM + tuple(caches)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _sinks or not getattr(_state, "depth", 0):
        return
    path, mode, flags = (tuple(args) + (None, None, None))[:3]
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):  # a file descriptor: its open was seen (or it is not a file)
        return
    writes = isinstance(mode, str) and any(c in mode for c in "wax+") or isinstance(flags, int) and flags & os.O_ACCMODE
    if writes:
        return
    try:
        real = os.path.realpath(path)
        if real.startswith(_skip()) or not stat.S_ISREG(os.stat(real).st_mode):
            return
    except (OSError, ValueError):  # not there: nothing was read
        return
    for sink in list(_sinks):
        sink.add(real)


def _install() -> None:
    global _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True


def enter() -> None:
    """User code starts running in this thread (``lacapacity.errors.user_code``)."""
    _state.depth = getattr(_state, "depth", 0) + 1


def leave() -> None:
    _state.depth = getattr(_state, "depth", 1) - 1


def inside() -> bool:
    """Whether user code runs in this thread now."""
    return getattr(_state, "depth", 0) > 0


@contextmanager
def recording() -> Iterator[set[str]]:
    """Collect, in the set this yields, the real paths of the files user code opens for reading inside the block."""
    _install()
    seen: set[str] = set()
    _sinks.append(seen)
    try:
        yield seen
    finally:
        _sinks.remove(seen)
