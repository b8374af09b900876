"""The ``capacity`` command line. Every fault is one line on stderr (docs/errors.md): exit code 2 for bad input, an
error in the user's own code (a plug-in memory, a module it imports), a filesystem problem, an unreachable scheduler
or a dead worker; 130 for an interrupt (Ctrl-C), 143 for SIGTERM and 141 (128 + SIGPIPE, what a shell tool killed by
the closed pipe reports) when the reader of the output goes away (``capacity list | head -1``), without a message.
Nothing finished is lost. ``--traceback`` (or ``CAPACITY_TRACEBACK=1``) prints the full traceback before the line.

The package loads only what a command uses (``capacity --help`` and ``capacity list`` import neither torch nor the
plotting libraries: the built-ins are read from their source, see ``lacapacity.base.catalog`` and ``LISTED``),
and everything is imported inside ``main``'s error handling, so even an interrupt during start-up ends in one line.

Why one module of over 500 lines: every subcommand's parser, help text and exit status sit beside the one place
that turns a fault into one line, so what a user types and what they are told are read together.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import warnings  # loaded by the interpreter itself; shutil, tempfile and traceback load where used (start-up stays short)
from typing import TYPE_CHECKING, Any

from lacapacity.base._version import __version__
from lacapacity.errors import CapacityError, Terminated, UserCodeError

if TYPE_CHECKING:  # pragma: no cover  # for the annotations only (the command's start-up stays short)
    import threading
    import types
    from collections.abc import Callable, Iterator
    from pathlib import Path
    from typing import NoReturn

    from lacapacity.sweep import RunResult

    _Handler = Callable[[int, types.FrameType | None], Any] | int | None  # what signal.signal returns

EXECUTORS = ("auto", "serial", "processes", "dask")  # lacapacity.sweep.EXECUTORS, without importing torch for --help
LISTED = (
    "studies",
    "tasks",
    "variants",
    "features",
    "keys",
    "values",
    "formats",
)  # the sections of capacity list, in order


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit code 2, never a traceback; every command takes
    --traceback too (before or after the command's name)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # argparse.ArgumentParser's
        super().__init__(*args, **kwargs)
        if kwargs.get("prog", "capacity") != "capacity":  # a command: the flag again, not overriding the global one
            self.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)

    def error(self, message: str) -> NoReturn:
        raise CapacityError(f"{message} (see '{self.prog} --help')")


_Terminated = Terminated  # a BaseException (lacapacity.errors): no guard or ``except Exception`` swallows it
GRACE = 5.0  # seconds an interrupted or terminated command has to unwind before it ends anyway
_STOPPED = {
    signal.SIGINT: (130, "capacity: interrupted; finished groups are saved, run the same command again to resume"),
    signal.SIGTERM: (
        143,
        "capacity: terminated (SIGTERM); finished groups are saved, run the same command again to resume",
    ),
}


def _end_anyway(signum: signal.Signals) -> bool:
    """After a stop signal: if the command has not ended within ``GRACE`` seconds (code that swallowed the exception,
    or C code that never returns to Python), end it with the signal's status and line. Every finished point is on
    disk already; worker processes die with this one (each watches it; a local Dask cluster's workers watch their
    nannies, which run in it). False when the same signal is already being handled (sent to the process group and
    forwarded by the supervisor too: the stop is raised once, not again while the command unwinds)."""
    import threading

    if signum in _STOPPING:
        return False
    _STOPPING.add(signum)
    code, line = _STOPPED[signum]
    unwound = threading.Event()
    _ARMED.append(unwound)

    def later() -> None:
        if unwound.wait(GRACE):  # main() returned in time
            return
        try:
            os.write(2, (line + "\n").encode())
        finally:
            _EXIT(code)

    threading.Thread(target=later, daemon=True, name="capacity-stop").start()
    return True


_EXIT = os._exit  # taken at import: inside user code, lacapacity.errors.user_code replaces os._exit for a while
_ARMED: list[threading.Event] = []  # the events of the stop watchdogs started by this command (set when main returns)
_STOPPING: set[int] = set()  # the stop signals this command is handling (cleared when main returns)


_HELD: list[int] = []  # while torch is imported (``_uninterrupted``): the stop signals that arrived meanwhile
_HOLDING = False


def _stop(signum: int) -> None:
    """Raise the stop of ``signum``: ``KeyboardInterrupt`` for SIGINT, ``Terminated`` for SIGTERM."""
    raise KeyboardInterrupt() if signum == signal.SIGINT else Terminated()


def _on_stop(signum: int, frame: types.FrameType | None) -> None:
    if _end_anyway(signal.Signals(signum)):
        if _HOLDING:
            _HELD.append(signum)
        else:
            _stop(signum)


@contextlib.contextmanager
def _uninterrupted() -> Iterator[None]:
    """Hold the stop signals while torch is imported, and raise them after: torch runs part of its import in C++
    (``torch._C._c10d_init``), and an exception a signal handler raises in there ends the process with ``abort()``
    (an interrupt 1.5 s into ``capacity check`` on a loaded machine did, 2026-12-03). ``GRACE`` still bounds the
    wait."""
    global _HOLDING
    _HOLDING = True
    try:
        yield
    finally:
        _HOLDING = False
    if _HELD:
        _stop(_HELD.pop(0))


def _log(msg: str) -> None:
    print(f"capacity: {msg}", file=sys.stderr, flush=True)


def _cmd_check(args: argparse.Namespace) -> int:
    from lacapacity.check import format_table, run_checks

    only = [t.strip() for t in args.only.split(",") if t.strip()] if args.only is not None else None
    rows = run_checks(device=args.device, seed=args.seed, only=only)
    print(format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _render(result: RunResult, args: argparse.Namespace) -> None:
    """Draw the figures of a finished run; a figure that cannot be drawn is a warning, never a failed command."""
    if args.no_figures:  # the results only: `capacity plot` draws them later
        return
    from lacapacity import plots

    try:  # the result's path now: forking the figure workers flushes it, and a reader gone is not a figure failed
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        paths = plots.render(result.dataset, out=result.path.parent / "figures")
    except Exception as exc:  # the results are saved: a figure that fails is a warning line
        if _traceback_asked(None):
            import traceback

            traceback.print_exception(exc)
        why = _line(exc) if isinstance(exc, CapacityError) else f"{type(exc).__name__}: {_line(exc)}"
        _log(f"warning: figures not drawn ({why}); the results are saved in {result.path}")
        return
    try:
        for path in paths:
            print(path)
        sys.stdout.flush()
    except (
        BrokenPipeError
    ):  # the reader has what it wanted (| head -1): the figures are drawn, the command did its work
        _silence_stdout()


def _run_options(args: argparse.Namespace) -> dict[str, Any]:  # sweep.run's keywords
    return dict(
        out=args.out,
        device=args.device,
        executor=args.executor,
        scheduler=args.scheduler,
        workers=args.workers,
        quiet=args.quiet,
        verbose=args.verbose,
        imports=args.imports,
    )


def _cmd_run(args: argparse.Namespace) -> int:
    from lacapacity import studies, sweep
    from lacapacity.base import plugins

    plugins.import_modules(args.imports)
    study = studies.get(args.study).with_overrides(args.set)
    result = sweep.run(study, **_run_options(args))
    print(result.path)
    _render(result, args)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from lacapacity import sweep
    from lacapacity.base import labels, plugins

    plugins.import_modules(args.imports)
    # the lists are read as --set reads them (one parser), and checked by the grid as --set's are
    kwargs: dict[str, Any] = {
        k: tuple(labels.split(getattr(args, k))) for k in ("d", "load", "keys") if getattr(args, k) is not None
    }
    result = sweep.compare(args.variants, seeds=args.seeds, name=args.name, **kwargs, **_run_options(args))
    print(result.path)
    _render(result, args)
    return 0


def _listed(section: str) -> dict[str, str]:
    """name -> description of ``section``'s built-ins and plug-ins, as its registry's ``available()`` gives them,
    read from the source where the built-ins are written (``lacapacity.base.catalog``: no torch, no copy). A section
    whose entry point group declares a plug-in of another package is asked of its registry (it imports torch)."""
    import importlib

    from lacapacity.base import catalog, plugins

    by_name = "name", 0
    # section -> (its registry's module, the files of that package it reads, the shape, its plug-ins' group)
    table: dict[str, tuple[str, str | None, catalog.Shape, str | None]] = {
        "studies": (
            "lacapacity.studies",
            "[!_]*.py",
            catalog.Calls("Study", by_name, ("description", 1)),
            "lacapacity.studies",
        ),
        "tasks": ("lacapacity.tasks", "*/task.py", catalog.Classes(fields=True), "lacapacity.tasks"),
        "variants": (
            "lacapacity.variants",
            None,
            catalog.Calls("register", by_name, ("description", 2)),
            "lacapacity.variants",
        ),
        "features": ("lacapacity.inputs.features", None, catalog.Dict(("description", 2)), "lacapacity.features"),
        "keys": (
            "lacapacity.inputs.keys",
            None,
            catalog.Calls("Family", by_name, ("description", 4)),
            "lacapacity.keys",
        ),
        "values": ("lacapacity.inputs.values", None, catalog.Dict(), None),
        "formats": ("lacapacity.variants._rounding", None, catalog.Dict(), None),
    }
    module, pattern, shape, group = table[section]
    where = catalog.files(module, pattern) if pattern else [catalog.source(module)]
    found = catalog.read(where, shape)
    for name, value in plugins.entry_points(group).items() if group else ():
        declared_in = value.partition(":")[0]
        own = catalog.read([catalog.source(declared_in)], shape) if declared_in.startswith("lacapacity.") else {}
        if name not in found and name not in own:  # another package's plug-in: only its registry can describe it
            listed: dict[str, str] = importlib.import_module(module).available()
            return listed
        found.setdefault(name, own.get(name, ""))
    if section == "studies":  # the registry's order: the default study first, then by name
        return dict(sorted(found.items(), key=lambda item: (item[0] != "capacity-vs-d", item[0])))
    return dict(sorted(found.items())) if section == "variants" else found


def _cmd_list(args: argparse.Namespace) -> int:
    for title in LISTED if args.what == "all" else [args.what]:
        entries = _listed(title)
        print(f"{title}:")
        width = max(len(k) for k in entries)
        for name, desc in entries.items():
            print(f"  {name:{width}}  {desc}")
    return 0


def _cmd_store(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lacapacity.base import _files

    if (args.dry_run or args.all) and not args.prune:
        raise CapacityError("--dry-run and --all apply to --prune only")
    root = Path(args.results) / ".sweep"
    if not root.is_dir():
        raise CapacityError(f"{args.results} holds no stored points (no folder {root}); give the --out of a run")
    age: Callable[[float | None], str] = lambda s: (
        "-"
        if s is None
        else f"{s / 86400:.1f} d"
        if s >= 86400
        else f"{s / 3600:.1f} h"
        if s >= 3600
        else f"{s / 60:.0f} min"
    )
    print(f"{'study':24} {'cells':>6} {'used':>6} {'points':>8} {'size':>10} {'newest':>8} {'oldest':>8}")
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        if args.prune:  # under the lock a run holds while it writes (never while one measures)
            with _files.lock(folder, wait=False) as held:
                if not held:
                    raise CapacityError(
                        f"a run is writing {folder}; nothing was removed: prune once it has ended (it holds {folder}.lock)"
                    )
                _store_row(folder, age, args)
        else:
            _store_row(folder, age, args)
    return 0


def _store_row(folder: Path, age: Callable[[float | None], str], args: argparse.Namespace) -> None:
    """One study's line of ``capacity store``, and what --prune removes (or would) below it."""
    import shutil

    from lacapacity.sweep.store import Store

    c = Store(folder).contents(strict=args.prune)  # a listing shows what it can; prune acts on nothing unread
    size = f"{c['bytes'] / 2**20:.1f} MiB" if c["bytes"] >= 2**20 else f"{c['bytes'] / 2**10:.1f} KiB"
    used = "?" if c["used"] is None else c["used"]
    print(
        f"{folder.name:24} {c['cells']:6} {used:>6} {c['points']:8} {size:>10} {age(c['newest']):>8} {age(c['oldest']):>8}"
    )
    if c["used"] is None:
        _log(f"warning: the manifest of {folder} cannot be read: which cells are in use is unknown (--prune refuses)")
    if not args.prune:
        return
    kept = [] if args.all else c["pending"]
    for path in c["unused"]:
        if path in kept:
            continue
        print(f"  {'would remove' if args.dry_run else 'removed'} {path}")
        if not args.dry_run:
            if path.is_dir():  # a cell's checkpoints (``lacapacity.tasks._resume``)
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    if kept:
        print(
            f"  kept {len(kept)} cells of a run that did not finish (the same command resumes from them; --all removes them too)"
        )


def _cmd_plot(args: argparse.Namespace) -> int:
    from lacapacity.plots import render_path

    only = [name.strip() for name in args.only.split(",") if name.strip()] if args.only else None
    select: dict[str, list[str]] = {}
    for word in args.select:
        dim, eq, values = word.partition("=")
        if not eq or not dim.strip():
            raise CapacityError(f"--select takes DIM=VALUE[,VALUE], got {word!r}")
        select.setdefault(dim.strip(), []).extend(v.strip() for v in values.split(",") if v.strip())
    paths = render_path(
        args.results,
        out=args.out,
        only=only,
        select=select,
        published=args.published,
        title=args.title,
        xlabel=args.xlabel,
        ylabel=args.ylabel,
        legend=args.legend,
    )
    for path in paths:
        print(path)
    return 0


def _cmd_table(args: argparse.Namespace) -> int:
    import xarray as xr

    from lacapacity.plots import tables

    if not os.path.isfile(args.results):
        raise CapacityError(f"no results file {args.results!r}")
    with xr.open_dataset(args.results) as ds:
        df = tables.headline(ds.load())
    if args.out is None:
        print(tables.markdown(df))
    else:
        print(tables.write(df, args.out))
    return 0


def _sweep_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="results", metavar="DIR", help="output folder (default: results)")
    p.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="torch device for the probes (default: auto = cuda when available)",
    )
    p.add_argument(
        "--executor",
        default="auto",
        choices=list(EXECUTORS),
        help="auto (default: in this process for small work, worker processes on a multi-core CPU when it pays), serial, processes or dask",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="Dask scheduler address, e.g. tcp://host:8786 (dask executor; default: a local cluster)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for processes or a local Dask cluster (default: CPU count)",
    )
    p.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (here and in every worker): for plug-ins that register variants when imported",
    )
    p.add_argument(
        "--no-figures",
        action="store_true",
        help="save the results without drawing their figures (draw them later with capacity plot RESULTS)",
    )
    loud = p.add_mutually_exclusive_group()
    loud.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing on stderr but errors (and one line before work estimated at more than a minute of one CPU core or a GiB of memory); the result paths still go to stdout",
    )
    loud.add_argument(
        "--verbose", action="store_true", help="one log line per finished group instead of a progress bar"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="capacity", description="Measure how much a linear-attention state can remember.")
    parser.add_argument("--version", action="version", version=f"capacity {__version__}")
    parser.add_argument(
        "--traceback",
        action="store_true",
        help="on an error, print the full traceback before the one-line message (also: CAPACITY_TRACEBACK=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("check", help="check every closed form and bound (docs/theory.md) against measurements")
    p.add_argument("--device", default=None, help="torch device for the measurements (default: cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed for every draw (default: 0)")
    p.add_argument(
        "--only", default=None, metavar="T2,T5,...", help="run only the checks of these theorems (default: all, T1-T13)"
    )
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser(
        "list", help="list studies, tasks, variants, feature maps, key families, value families and state formats"
    )
    p.add_argument("what", nargs="?", default="all", choices=["all", *LISTED])
    p.set_defaults(func=_cmd_list)

    p = sub.add_parser(
        "run",
        help="run (or resume) a study and save its Dataset as OUT/STUDY.nc",
        description="Run a named study (see 'capacity list studies'), resuming from the groups already saved under "
        "OUT/.sweep/STUDY/; save the Dataset as OUT/STUDY.nc and draw its figures.",
    )
    p.add_argument("study", metavar="STUDY", help="a study name, e.g. capacity-vs-d")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a grid or task field; lists are comma-separated, e.g. --set d=16,32 --set 'variant=linear,delta(beta=0.5),mypkg.mem:Mine(c=2)' --set load=1/8,1,16. Keys: a grid axis (variant, keys, d, load, n, seed, ...: docs/studies.md), kind (the task) "
        "or a field of the study's task ('capacity list tasks' shows each task's)",
    )
    _sweep_options(p)
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser(
        "compare",
        help="measure memories side by side (yours too) and draw overlay figures",
        description="Measure each VARIANT (a name like delta(beta=0.5), or an import path module:Class(k=v)) on the same "
        "keys and values, save OUT/NAME.nc (resumable) and draw capacity against d and error and recall against n/d.",
    )
    p.add_argument(
        "variants", nargs="+", metavar="VARIANT", help="e.g. linear delta 'mypkg.memories:Longhorn(beta=0.5)'"
    )
    p.add_argument("--d", default=None, metavar="D,...", help="key dimensions (default: 16,32,64,128)")
    p.add_argument("--load", default=None, metavar="X,...", help="loads n/d (default: 1/8..16)")
    p.add_argument("--keys", default=None, metavar="FAMILY,...", help="key families (default: gaussian)")
    p.add_argument("--seeds", type=int, default=4, metavar="N", help="seeds 0..N-1 (default: 4)")
    p.add_argument("--name", default="compare", help="the study name: the file OUT/NAME.nc (default: compare)")
    _sweep_options(p)
    p.set_defaults(func=_cmd_compare)

    p = sub.add_parser(
        "store",
        help="list the points a results folder holds, and prune those no study's latest run used",
        description="List, per study, the stored cells (one file per memory, key family, d, ...), how many the "
        "study's latest run used, their points, size and age. --prune removes the cells the latest finished run did not use "
        "(they would be measured again if asked for), but keeps those of runs that did not finish, which the same "
        "command resumes from (--all removes them too); it waits for no run: while one writes, it refuses; "
        "--dry-run only lists them.",
    )
    p.add_argument(
        "results", metavar="OUT", nargs="?", default="results", help="a run's --out folder (default: results)"
    )
    p.add_argument("--prune", action="store_true", help="remove the cells no study's latest run used")
    p.add_argument("--dry-run", action="store_true", help="with --prune: list what would be removed, remove nothing")
    p.add_argument(
        "--all",
        action="store_true",
        help="with --prune: also remove the cells of runs that did not finish (by default kept: the same command resumes from them)",
    )
    p.set_defaults(func=_cmd_store)

    p = sub.add_parser("plot", help="draw the figures (PNG and PDF) of a results file or folder")
    p.add_argument("results", metavar="RESULTS", help="a results file (.nc) or a directory of them")
    p.add_argument(
        "--out", metavar="DIR", default=None, help="where the figures go (default: figures/ beside the results)"
    )
    p.add_argument(
        "--only",
        metavar="NAMES",
        default=None,
        help="draw only these figures, comma-separated: the names after the study in the file names (capacity, variants, ...)",
    )
    p.add_argument(
        "--select",
        metavar="DIM=VALUES",
        action="append",
        default=[],
        help="the panels and curves: keep only these values of a dimension, comma-separated (d=16,32; variant=delta);"
        " repeat for several dimensions",
    )
    p.add_argument(
        "--published",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw (or, --no-published, leave out) the published-results panel of the frontier figure"
        " (default: as the study asks; the frontier study draws it, compare does not)",
    )
    p.add_argument("--title", default=None, help="a title over each figure's panels")
    p.add_argument(
        "--xlabel",
        action="append",
        default=None,
        metavar="TEXT",
        help="the x axis label; once for every x label, or repeated: one per distinct label, in the order they appear",
    )
    p.add_argument("--ylabel", action="append", default=None, metavar="TEXT", help="the y axis label, as --xlabel")
    p.add_argument(
        "--legend",
        choices=["right", "below", "none"],
        default="right",
        help="where the legend goes: right of the panels (default), below them, or none",
    )
    p.set_defaults(func=_cmd_plot)

    p = sub.add_parser(
        "table", help="the headline numbers of a results file: capacity, errors, bytes (Markdown or CSV)"
    )
    p.add_argument("results", metavar="RESULTS", help="a results file (.nc)")
    p.add_argument(
        "--out", metavar="FILE", default=None, help="write FILE.csv or FILE.md (default: print the Markdown)"
    )
    p.set_defaults(func=_cmd_table)
    return parser


TRACEBACK_HINT = "run with --traceback for the full traceback"
PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a tool that the closed pipe ended


def _traceback_asked(argv: list[str] | None) -> bool:
    """--traceback anywhere on the command line, or CAPACITY_TRACEBACK set to anything but '' or 0."""
    args = sys.argv[1:] if argv is None else argv
    return "--traceback" in args or os.environ.get("CAPACITY_TRACEBACK", "").strip() not in ("", "0")


def _line(exc: BaseException | str) -> str:
    """The exception's message on one line (its lines joined)."""
    return " ".join(s.strip() for s in str(exc).splitlines() if s.strip()) or type(exc).__name__


def _fail(exc: BaseException, message: str, show_traceback: bool) -> int:
    """Print the full traceback if asked (from the process where it happened, when it crossed one), then one line."""
    if show_traceback:
        details = getattr(exc, "details", "")
        if details:
            print(details.rstrip(), file=sys.stderr)
        else:
            import traceback

            traceback.print_exception(exc)
    print(f"capacity: error: {message}", file=sys.stderr, flush=True)
    return 2


def _output_closed() -> bool:
    """True when the reader of stdout or stderr has gone (a closed pipe: POLLERR on our end)."""
    try:
        import select

        poll = select.poll()
        for stream in (sys.stdout, sys.stderr):
            poll.register(stream.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poll.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _stdout_open() -> bool:
    """Whether stdout is there to print to (started with it closed, Python makes it None, or it names a closed
    descriptor)."""
    if sys.stdout is None:
        return False
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # a stream of Python's own (captured): it takes what is printed
        return True
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing what is left cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _matplotlib_home() -> str | None:
    """A fresh folder for matplotlib's configuration and cache when its default ones cannot be written.

    Matplotlib would make one in the temporary folder itself, warn about it (even under --quiet) and remove it only at
    the interpreter's exit, which this command skips (``entry``); this folder is removed by ``main``. None when
    MPLCONFIGDIR names a folder matplotlib can write, or, unset, the defaults (XDG_CONFIG_HOME, XDG_CACHE_HOME, else
    ~/.config, ~/.cache) work; an MPLCONFIGDIR that cannot be written is replaced for the command.
    """
    home = os.path.expanduser("~")

    def usable(path: str) -> bool:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:
            return False
        return os.path.isdir(path) and os.access(path, os.W_OK)

    writable: Callable[[str], bool] = lambda base: usable(os.path.join(base, "matplotlib"))
    if os.environ.get("MPLCONFIGDIR"):  # the user's choice, when matplotlib can use it
        if usable(os.environ["MPLCONFIGDIR"]):
            return None
    elif writable(os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")) and writable(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    ):
        return None
    import tempfile

    path = tempfile.mkdtemp(prefix="capacity-matplotlib-")
    os.environ["MPLCONFIGDIR"] = path
    return path


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:  # warnings.showwarning's signature
    print(f"capacity: warning: {_line(message)}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit status (docs/errors.md).

    Every command treats a reader that goes away alike (``lacapacity.base._stdout``): it does all it was asked, and a
    status of 0 becomes 141 when some of its output could not be written."""
    from lacapacity.base import _stdout

    with _stdout.watched() as out:
        code = _main(argv)
    return PIPE_CLOSED if out.cut and code == 0 else code


def _main(argv: list[str] | None) -> int:
    show_traceback = _traceback_asked(argv)
    previous = _handle_stops() if _main_thread() else None
    mpl_home, saved_env = None, {}
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning  # one line each (restored on leaving)
            parser = build_parser()
            args = parser.parse_args(argv)
            if args.command is None:
                parser.print_help()
                return 2
            if getattr(args, "quiet", False):  # errors only: no warnings, matplotlib's and worker processes' included
                import logging

                warnings.simplefilter("ignore")
                logging.getLogger("matplotlib").setLevel(logging.ERROR)
                saved_env["PYTHONWARNINGS"] = os.environ.get("PYTHONWARNINGS")
                os.environ["PYTHONWARNINGS"] = "ignore"
            if args.command in ("list", "store", "check") and not _stdout_open():
                raise CapacityError(f"standard output is closed: 'capacity {args.command}' has nowhere to print")
            if args.command in ("run", "compare", "plot"):
                saved_env.setdefault("MPLCONFIGDIR", os.environ.get("MPLCONFIGDIR"))
                mpl_home = _matplotlib_home()
            if args.command in ("run", "compare", "plot", "check", "table"):  # the commands that import torch
                with _uninterrupted():
                    import torch  # noqa: F401
            command: Callable[[argparse.Namespace], int] = args.func  # the command's _cmd_* function
            return command(args)
    except BrokenPipeError as exc:  # the reader went away (| head): end quietly, like a shell tool
        if _output_closed():
            _silence_stdout()
            return PIPE_CLOSED
        return _fail(exc, f"{exc.strerror or exc}", show_traceback)
    except UserCodeError as exc:  # one line; the traceback on request
        hint = "" if show_traceback else f" ({TRACEBACK_HINT})"
        return _fail(exc, _line(exc) + hint, show_traceback)
    except CapacityError as exc:
        return _fail(exc, _line(exc), show_traceback)
    except OSError as exc:  # a filesystem problem not caught closer to its cause
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        return _fail(exc, f"{exc.strerror or _line(exc)}{where}", show_traceback)
    except KeyboardInterrupt:
        print("capacity: interrupted; finished groups are saved, run the same command again to resume", file=sys.stderr)
        return 130
    except _Terminated:
        print(
            "capacity: terminated (SIGTERM); finished groups are saved, run the same command again to resume",
            file=sys.stderr,
        )
        return 143
    except Exception as exc:  # the last resort: still one line, with the exception's type
        by = getattr(exc, "capacity_user_code", None)  # an allocation failure inside user code (errors.user_code)
        if by:
            return _fail(exc, f"{by} could not allocate memory ({type(exc).__name__}: {_line(exc)})", show_traceback)
        hint = "" if show_traceback else f"; {TRACEBACK_HINT}"
        return _fail(exc, f"{type(exc).__name__}: {_line(exc)} (unexpected{hint})", show_traceback)
    finally:
        while _ARMED:
            _ARMED.pop().set()
        _STOPPING.clear()
        _HELD.clear()
        if previous is not None:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if mpl_home is not None:
            import shutil

            shutil.rmtree(mpl_home, ignore_errors=True)
        for name, value in saved_env.items():  # the environment as it was (main may run again in this process)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _handle_stops() -> dict[signal.Signals, _Handler]:
    """SIGTERM raises ``Terminated``; SIGINT (where Python's own handler is in place) ``KeyboardInterrupt``; either ends
    the command within ``GRACE`` seconds whatever the code it interrupts does. Returns the handlers it replaced."""
    previous: dict[signal.Signals, _Handler] = {signal.SIGTERM: signal.signal(signal.SIGTERM, _on_stop)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when SIGINT is ignored (nohup, &)
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _on_stop)
    return previous


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def entry() -> None:
    """The console script: ``main`` with an interrupt during the package's own start-up caught too, run in a forked
    child that the process the user started supervises, so that a crash (a segfault, ``abort()`` in user code) is one
    line too (``lacapacity.base._supervise``)."""
    # before torch loads: OpenMP threads with nothing to do sleep instead of spinning on a core another thread or
    # another job needs (lacapacity.sweep.executors.thread_environment; the user's own setting stands)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:  # an interrupt at any moment of the start-up too (the supervisor's fork, the child's first steps)
        from lacapacity.base import _supervise

        _supervise.supervise()  # returns in the child; the parent ends with the child's status
        for stream in (sys.stdout, sys.stderr):  # a path or label the output encoding lacks prints escaped
            try:
                stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]  # AttributeError: caught below
            except (AttributeError, ValueError, OSError):  # None, or a closed descriptor (main says so for stdout)
                pass
        code = main()
    except KeyboardInterrupt:
        print("capacity: interrupted", file=sys.stderr)
        code = 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is over: an interrupt now would only break the exit
    # Every file is written and closed, every worker joined: flush and leave without the interpreter's teardown of
    # torch, xarray and matplotlib (about 0.5 s of a short command's wall time, measured on the 2-core VM).
    try:
        if sys.stdout is not None:  # None: started with stdout closed
            sys.stdout.flush()
    except OSError:  # a closed pipe: the output was cut short by its reader
        code = PIPE_CLOSED if code == 0 else code
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except OSError:
        pass
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    entry()
