"""The command runs in a forked child; the process the user started only waits, so that a crash is still one line.

A segfault or ``abort()`` in a memory's C code (or ``ctypes``, or ``os.abort()``) ends the process that runs it, and
no Python in that process can report it. ``supervise()``, called by the console script before the command imports
anything heavy, forks: the child returns and runs the command; the parent waits for it and

- forwards SIGINT and SIGTERM sent to it alone (``kill``; a terminal's Ctrl-C reaches both processes already: the
  kernel marks those ``SI_KERNEL``) so the child stops exactly as an unsupervised command would (130, 143), and so
  SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and SIGALRM, which end it too: one line naming the signal as sent, 128 + its
  number, whatever code ran then;
- ends with the child's exit status, so exit codes, stdout, stderr and a closed pipe behave as before;
- when the child died of another signal, prints one line naming the code that ran then (the breadcrumb
  ``lacapacity.errors.user_code`` leaves in a shared map, ``lacapacity.base._crumb``) and ends with 2.

The child asks the kernel to kill it when the parent dies (``PR_SET_PDEATHSIG``), as worker processes do, so kill -9
of the command leaves no process. Linux only (elsewhere the command runs unsupervised, as before).
"""

from __future__ import annotations

import mmap
import os
import signal
import sys

from lacapacity.base import _crumb

SI_KERNEL = 0x80  # siginfo.si_code of a signal the kernel sent (a terminal's Ctrl-C), not kill()
_STOPS = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGPIPE: 141}  # child's death by these: the shell's status
_STOP_LINE = {signal.SIGINT: "capacity: interrupted", signal.SIGTERM: "capacity: terminated (SIGTERM)"}
# signals another process or the terminal sends, whose default ends the process: the sender's doing, never a crash
_SENT = tuple(getattr(signal, n) for n in ("SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM") if hasattr(signal, n))


def _available() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(signal, "sigtimedwait")


def supervise() -> None:
    """Fork; return in the child (which runs the command), and in the parent wait for it and end the process with
    its status (never returns there). Does nothing where the platform lacks what it needs."""
    if not _available():
        return
    import ctypes

    shared = mmap.mmap(-1, _crumb.SIZE)  # MAP_SHARED | MAP_ANONYMOUS: the same bytes in both processes
    forward = {signal.SIGTERM}
    for signum in (signal.SIGINT, *_SENT):  # ignored (nohup, a background job): the child too, nothing to forward
        if signal.getsignal(signum) is not signal.SIG_IGN:
            forward.add(signum)
    waited = forward | {signal.SIGCHLD}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)  # no stop is lost between the fork and the wait
    old_chld = signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would reap the child unseen
    parent = os.getpid()
    try:
        pid = os.fork()
    except OSError:  # no process to spare: run unsupervised
        signal.signal(signal.SIGCHLD, old_chld)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return
    if pid == 0:  # the child: the command
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
        _crumb.install(shared)
        signal.signal(signal.SIGCHLD, old_chld)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return
    early = set(signal.sigpending()) & forward  # arrived before the fork: the child never saw them, send them on
    os._exit(_wait(pid, shared, forward, waited, early))


def _wait(
    pid: int, shared: mmap.mmap, forward: set[signal.Signals], waited: set[signal.Signals], early: set[signal.Signals]
) -> int:
    """Wait for the child ``pid``, forwarding the stop signals sent to this process (and ``early``, those pending since
    before the fork, whoever sent them); its exit status as a shell's."""
    while True:
        info = signal.sigtimedwait(waited, 1.0)  # a timeout too: a SIGCHLD merged with another is still seen
        if info is not None and info.si_signo in forward and (info.si_code != SI_KERNEL or info.si_signo in early):
            early.discard(signal.Signals(info.si_signo))
            try:
                os.kill(pid, info.si_signo)
            except ProcessLookupError:
                pass
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped by someone else: its status is lost
            _say("capacity: error: the command's process ended and its status is lost (unexpected)")
            return 2
        if done:
            break
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    signum = -code
    if signum in _STOPS:
        if signum in _STOP_LINE:
            _say(_STOP_LINE[signal.Signals(signum)])
        return _STOPS[signal.Signals(signum)]
    if signum in _SENT:
        _say("capacity: " + sent_line(signum))
        return 128 + signum
    _say("capacity: error: " + crash_line(signum, _crumb.read(shared)))
    return 2


def sent_line(signum: int) -> str:
    """The one line for a command ended by ``signum``, a signal another process or the terminal sent."""
    name = signal.Signals(signum).name
    return (
        f"stopped by {name} ({signal.strsignal(signum)}), a signal sent to the command (kill, or a terminal that "
        "closed), not a fault of any code; finished groups are saved, run the same command again to resume"
    )


def crash_line(signum: int, crumb: tuple[str, str] | None) -> str:
    """The one line for a command that died of ``signum`` while ``crumb`` (who, where) ran, or outside user code."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        name = f"signal {signum}"
    what = f"{name} ({signal.strsignal(signum) or 'unknown signal'})"
    if crumb is not None:
        who, where = crumb
        return (
            f"{who} ended the process with {what} {where}; a crash in its own code (C code, ctypes, os.abort) cannot "
            "be caught: finished groups are saved, run the same command again once it is fixed"
        )
    if signum == signal.SIGKILL:
        return (
            f"the command's process was killed ({what}), by a user or by the system for lack of memory; finished "
            "groups are saved, run the same command again"
        )
    return f"the command's process crashed ({what}) outside your code (unexpected); finished groups are saved, run the same command again"


def _say(line: str) -> None:
    try:
        os.write(2, (line + "\n").encode("utf-8", "backslashreplace"))
    except OSError:  # stderr closed: the status says it
        pass
