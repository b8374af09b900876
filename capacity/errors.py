"""The package's exception types, and the one place that turns a failure of code it does not own into one line.

``CapacityError`` is bad input (a ValueError). ``UserCodeError`` (a CapacityError) is raised by ``user_code``
around every call into code the package does not own: a memory's constructor and methods, a key family's draw, a
feature map, a module imported by ``--import``, an import path ``module:attr`` or an installed package's entry
point. Its message names that code, where it failed and the exception; the original exception is chained
(``__cause__``) and its formatted traceback travels in ``details``, which survives pickling, so a failure in a
worker process or on a Dask worker reaches the command line whole (``capacity --traceback`` prints it).

>>> try:
...     with user_code("memory 'mymem:Longhorn'", "in write()"):
...         1 / 0
... except UserCodeError as exc:
...     print(exc)
memory 'mymem:Longhorn' raised ZeroDivisionError in write(): division by zero
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager  # already loaded by importlib.util; traceback loads only when needed
from typing import Any


class CapacityError(ValueError):
    """Bad input to a capacity function: the message says what was wrong and what is allowed.

    It subclasses ValueError, so ``except ValueError`` keeps working in user code.
    """


class UserCodeError(CapacityError):
    """Code the package calls but does not own raised; ``details`` is the full traceback as text ('' if none)."""

    def __init__(self, message: str, details: str = ""):
        super().__init__(message)
        self.details = details

    def __reduce__(
        self,
    ) -> tuple[
        type[UserCodeError], tuple[str, str]
    ]:  # the same message and traceback text on the other side of a pickle (workers, Dask)
        return (type(self), (str(self), self.details))


class Terminated(BaseException):
    """SIGTERM arrived: unwind like an interrupt (workers stop, finished points stay saved). A BaseException, as
    KeyboardInterrupt is: no ``except Exception`` (the user's or the package's) swallows it, and ``user_code``
    never reports it as a fault of the code it guards."""


class CapacityWarning(UserWarning):
    """Something was skipped (a plug-in that cannot be loaded, a figure not drawn) and the rest went on."""


def one_line(exc: BaseException) -> str:
    """``exc``'s message on one line: its first non-empty line (the type's name when it has no message)."""
    try:
        text = str(exc)
    except Exception:  # an exception whose message cannot be made: its type says what there is
        text = ""
    lines = [s.strip() for s in text.splitlines() if s.strip()]
    return lines[0] if lines else type(exc).__name__


_STOPS = (KeyboardInterrupt, Terminated, GeneratorExit)  # the run is being stopped: never the user's fault


class _Exited(BaseException):
    """User code called ``os._exit(status)`` inside ``user_code``: raised instead, so the guard can say so."""

    def __init__(self, status: object) -> None:
        super().__init__(status)
        self.status = status

    def __str__(self) -> str:
        return f"called os._exit({self.status!r})"


_depth = 0  # user_code blocks open, in any thread (nested ones share the patch of os._exit below)
_real_exit: Callable[[int], Any] | None = None  # os._exit while a block is open
_first_exit: list[Callable[[int], Any]] = []  # the process's own os._exit, kept once for threads outside any block
_patch: Any = None  # a threading.Lock, made on first use
_OWN_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")  # those the command may handle
_patched_in = -1  # the pid of the process whose os._exit is patched (a forked child is another process)


def _exit_instead(status: int = 0) -> Any:
    """os._exit while user code runs: raised in the thread that runs it, the real one in any other thread and in a
    child that user code forked (it is not the command: it ends as it would outside the toolkit)."""
    import os

    from lacapacity.base import _opened

    if _opened.inside() and os.getpid() == _patched_in:
        raise _Exited(status)
    (_real_exit or _first_exit[0])(status)


def _forked() -> None:
    """In a child forked while user code ran (``os.fork``, a fork pool, a ``DataLoader`` worker; registered with
    ``os.register_at_fork``): the guard is the parent's, not the child's. Its ``os._exit`` exits, the toolkit's
    signal handlers give way to Python's defaults (its signals are its own), and the guard's counters start afresh.
    A fork the toolkit itself makes (no user code running in the forking thread) keeps everything."""
    global _depth, _real_exit, _patch
    import os
    import signal
    import threading

    from lacapacity.base import _opened

    if not _opened.inside():
        return
    _patch = threading.Lock()  # another thread may have held the old one at the fork
    if _real_exit is not None:
        setattr(os, "_exit", _real_exit)  # noqa: B010 (the typed module attribute takes the saved function back)
    _depth, _real_exit = 0, None
    ours = os.path.join(os.path.dirname(os.path.abspath(__file__)), "")  # this package's folder
    for signum in [getattr(signal, name) for name in _OWN_SIGNALS if hasattr(signal, name)]:
        code = getattr(signal.getsignal(signum), "__code__", None)
        if code is not None and code.co_filename.startswith(ours):  # the command's handler: not the child's
            signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


def _child_leaves(exc: BaseException | None) -> None:
    """A child that user code forked left the guarded block (returned, or raised): it must not go on into the
    command (a second copy of it). It ends here as a Python program would: 0, SystemExit's status, or the
    traceback and 1."""
    import os
    import sys

    status = 0
    if isinstance(exc, SystemExit):
        code = exc.code
        status = code if isinstance(code, int) else (0 if code is None else 1)
        if not isinstance(code, (int, type(None))):
            print(code, file=sys.stderr)
    elif exc is not None:
        import traceback

        traceback.print_exception(exc)
        status = 1
    try:
        sys.stderr.flush()
    except Exception:  # a closed stream: the status says it
        pass
    (_real_exit or os._exit)(status)


@contextmanager
def user_code(who: str, where: str, *, passthrough: Callable[[BaseException], object] | None = None) -> Iterator[None]:
    """Run the block as a call into code the package does not own.

    Any exception the block raises (SystemExit too, and ``os._exit``, which inside the block raises instead of ending
    the process: a callback that ends the process is a fault too), other than a CapacityError (already one line),
    an interrupt or termination (KeyboardInterrupt, ``Terminated``: they stop the run, whoever they interrupt) and
    those ``passthrough(exc)`` accepts (e.g. allocation failures, which the caller reports with the sizes), becomes a ``UserCodeError``
    "``who`` raised ``Type`` ``where``: message", chained to the original. ``who``: e.g. ``"memory 'mymem:Mine'"``,
    ``"module 'mymem'"``; ``where``: e.g. ``"in write()"``, ``"at import"``. Files the block opens are seen by
    ``lacapacity.base._opened`` (what a stored point's numbers depend on).

    The guard holds in the process that entered the block and only there: a child the block forks (``os.fork``, a
    fork pool, a ``DataLoader``'s workers) exits with ``os._exit`` as it would outside the toolkit, gets Python's own
    handlers for the signals the command handles, and ends when it leaves the block (returns: 0; raises: the
    traceback and 1; ``SystemExit``: its status): no copy of the command goes on in it.
    """
    global _depth, _real_exit, _patch, _patched_in
    import os
    import threading

    from lacapacity.base import _crumb, _opened

    if _patch is None:
        _patch = threading.Lock()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forked)
    pid = os.getpid()
    with _patch:
        if _depth == 0:
            _real_exit, _patched_in = os._exit, pid
            setattr(os, "_exit", _exit_instead)  # noqa: B010 (a function of another signature stands in)
            if not _first_exit:
                _first_exit.append(_real_exit)
        _depth += 1
    _opened.enter()
    crumb = _crumb.mark(who, where)  # what a crash of the process would name (lacapacity.base._supervise)
    try:
        yield
    except BaseException as exc:
        if os.getpid() != pid:  # a child the block forked, unwinding: it ends here
            _child_leaves(exc)
        if isinstance(exc, (CapacityError, *_STOPS)):
            raise
        try:
            leave = passthrough is not None and passthrough(exc)
        except Exception:  # the predicate could not read the exception (its __str__ raises): it is ours to report
            leave = False
        if leave:
            raise
        import traceback  # here, not at the top: the package's start-up stays short (an interrupt there is one line)

        try:
            details = "".join(traceback.format_exception(exc))
        except Exception:  # a message that cannot be made (its __str__ raises): no text, the line says what there is
            details = ""
        if isinstance(exc, _Exited):
            raise UserCodeError(f"{who} {exc} {where}", details) from None
        raise UserCodeError(f"{who} raised {type(exc).__name__} {where}: {one_line(exc)}", details) from exc
    else:
        if os.getpid() != pid:  # a child the block forked, returning into the command: it ends here
            _child_leaves(None)
    finally:
        _crumb.restore(crumb)
        _opened.leave()
        with _patch:
            _depth -= 1
            if _depth == 0 and _real_exit is not None:
                setattr(os, "_exit", _real_exit)  # noqa: B010 (the typed module attribute takes the saved function back)
                _real_exit = None
