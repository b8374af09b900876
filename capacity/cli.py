"""The ``capacity`` command line. Every fault is one line on stderr: exit code 2 for bad input, a filesystem problem or
a dead worker, 130 for an interrupt (Ctrl-C) and 143 for SIGTERM; nothing finished is lost.

The package loads only what a command uses (``capacity --help`` and ``capacity list`` import neither torch nor the
plotting libraries), and everything is imported inside ``main``'s error handling, so even an interrupt during start-up
ends in one line.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from capacity import __version__
from capacity.errors import CapacityError

EXECUTORS = ("auto", "serial", "processes", "dask")  # capacity.sweep.EXECUTORS, without importing torch for --help
SETTABLE = "variant, keys, feature, d, load, n, seed, dtype, dv, state_dtype, rounding, heads, value_heads, kind, values, key_stats, decode, repeats, vocab, overwrite, distractors, queries"  # Study.settable()


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit code 2, never a traceback."""

    def error(self, message: str):
        raise CapacityError(f"{message} (see '{self.prog} --help')")


class _Terminated(Exception):
    """SIGTERM arrived: unwind like an interrupt (workers stop, finished groups stay saved)."""


def _on_sigterm(signum, frame):
    raise _Terminated()


def _log(msg: str) -> None:
    print(f"capacity: {msg}", file=sys.stderr, flush=True)


def _cmd_check(args) -> int:
    from capacity.check import format_table, run_checks

    only = [t.strip() for t in args.only.split(",") if t.strip()] if args.only is not None else None
    rows = run_checks(device=args.device, seed=args.seed, only=only)
    print(format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _render(result, args) -> None:
    """Draw the figures of a finished run; a figure that cannot be drawn is a warning, never a failed command."""
    from capacity import plots

    try:
        for path in plots.render(result.dataset, out=result.path.parent / "figures"):
            print(path)
    except CapacityError as exc:
        _log(f"warning: figures not drawn ({exc}); the results are saved in {result.path}")


def _run_options(args) -> dict:
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


def _cmd_run(args) -> int:
    from capacity import plugins, studies, sweep

    plugins.import_modules(args.imports)
    study = studies.get(args.study).with_overrides(args.set)
    result = sweep.run(study, **_run_options(args))
    print(result.path)
    _render(result, args)
    return 0


def _cmd_compare(args) -> int:
    from capacity import labels, plugins, sweep

    plugins.import_modules(args.imports)
    numbers = lambda text, conv: tuple(conv(labels.scalar(x)) for x in labels.split(text))
    kwargs = {}
    if args.d:
        kwargs["d"] = numbers(args.d, int)
    if args.load:
        kwargs["load"] = numbers(args.load, float)
    if args.keys:
        kwargs["keys"] = tuple(labels.split(args.keys))
    result = sweep.compare(args.variants, seeds=args.seeds, name=args.name, **kwargs, **_run_options(args))
    print(result.path)
    _render(result, args)
    return 0


def _cmd_list(args) -> int:
    from capacity import features, keys, studies, values, variants

    sections = {
        "studies": studies.available,
        "variants": variants.available,
        "features": features.available,
        "keys": keys.available,
        "values": values.available,
    }
    chosen = sections if args.what == "all" else {args.what: sections[args.what]}
    for title, entries in chosen.items():
        entries = entries()
        print(f"{title}:")
        width = max(len(k) for k in entries)
        for name, desc in entries.items():
            print(f"  {name:{width}}  {desc}")
    return 0


def _cmd_plot(args) -> int:
    from capacity.plots import render_path

    for path in render_path(args.results, out=args.out):
        print(path)
    return 0


def _sweep_options(p) -> None:
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
    loud = p.add_mutually_exclusive_group()
    loud.add_argument("--quiet", action="store_true", help="print nothing but errors and the result paths")
    loud.add_argument(
        "--verbose", action="store_true", help="one log line per finished group instead of a progress bar"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="capacity", description="Measure how much a linear-attention state can remember.")
    parser.add_argument("--version", action="version", version=f"capacity {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("check", help="check every closed form and bound (docs/theory.md) against measurements")
    p.add_argument("--device", default=None, help="torch device for the measurements (default: cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed for every draw (default: 0)")
    p.add_argument(
        "--only", default=None, metavar="T2,T5,...", help="run only the checks of these theorems (default: all, T1-T13)"
    )
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("list", help="list studies, variants, feature maps, key families and value families")
    p.add_argument(
        "what", nargs="?", default="all", choices=["all", "studies", "variants", "features", "keys", "values"]
    )
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
        help="override a grid or probe field; lists are comma-separated, e.g. --set d=16,32 --set 'variant=linear,delta(beta=0.5),mypkg.mem:Mine(c=2)' --set load=1/8,1,16. Keys: "
        + SETTABLE,
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

    p = sub.add_parser("plot", help="draw the figures (PNG and PDF) of a results file or folder")
    p.add_argument("results", metavar="RESULTS", help="a results file (.nc) or a directory of them")
    p.add_argument(
        "--out", metavar="DIR", default=None, help="where the figures go (default: figures/ beside the results)"
    )
    p.set_defaults(func=_cmd_plot)
    return parser


def main(argv: list[str] | None = None) -> int:
    previous = signal.signal(signal.SIGTERM, _on_sigterm) if _main_thread() else None
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        return args.func(args)
    except CapacityError as exc:
        print(f"capacity: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a filesystem problem not caught closer to its cause
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"capacity: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("capacity: interrupted; finished groups are saved, run the same command again to resume", file=sys.stderr)
        return 130
    except _Terminated:
        print(
            "capacity: terminated (SIGTERM); finished groups are saved, run the same command again to resume",
            file=sys.stderr,
        )
        return 143
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def entry() -> None:
    """The console script: ``main`` with an interrupt during the package's own start-up caught too."""
    try:
        code = main()
    except KeyboardInterrupt:
        print("capacity: interrupted", file=sys.stderr)
        code = 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is over: an interrupt now would only break the exit
    # Every file is written and closed, every worker joined: flush and leave without the interpreter's teardown of
    # torch, xarray and matplotlib (about 0.5 s of a short command's wall time, measured on the 2-core VM).
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: nothing more can be said
        pass
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    entry()
