"""The ``capacity`` command line. Bad input prints one line to stderr and exits with code 2."""

from __future__ import annotations

import argparse
import sys

from capacity import __version__
from capacity.errors import CapacityError


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line and exit code 2, never a traceback."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        raise CapacityError(f"{message} (see '{self.prog} --help')")


def _cmd_check(args) -> int:
    from capacity.check import format_table, run_checks

    only = [t.strip() for t in args.only.split(",") if t.strip()] if args.only else None
    rows = run_checks(device=args.device, seed=args.seed, only=only)
    print(format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def _cmd_run(args) -> int:
    from capacity import plots, sweep

    study = sweep.get(args.study).with_overrides(args.set)
    result = sweep.run(study, out=args.out, device=args.device, executor=args.executor, scheduler=args.scheduler, workers=args.workers, quiet=args.quiet)
    print(result.path)
    for path in plots.render(result.dataset, result.path.parent / "figures"):  # as `capacity plot` would place them
        print(path)
    return 0


def _cmd_list(args) -> int:
    from capacity import features, keys, studies, values, variants

    sections = {
        "studies": studies.available(),
        "variants": variants.available(),
        "features": features.available(),
        "keys": {name: f.description for name, f in keys.families().items()},
        "values": dict(values.FAMILIES),
    }
    chosen = sections if args.what == "all" else {args.what: sections[args.what]}
    for title, entries in chosen.items():
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="capacity", description="Measure how much a linear-attention state can remember.")
    parser.add_argument("--version", action="version", version=f"capacity {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = sub.add_parser("check", help="check every closed form and bound (docs/theory.md) against measurements")
    p.add_argument("--device", default=None, help="torch device for the measurements (default: cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed for every draw (default: 0)")
    p.add_argument("--only", default=None, metavar="T2,T5,...", help="run only the checks of these theorems (default: all, T1-T13)")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("list", help="list studies, variants, feature maps, key families and value families")
    p.add_argument("what", nargs="?", default="all", choices=["all", "studies", "variants", "features", "keys", "values"])
    p.set_defaults(func=_cmd_list)

    from capacity.sweep import EXECUTORS, Study

    p = sub.add_parser(
        "run",
        help="run (or resume) a study and save its Dataset as OUT/STUDY.nc",
        description="Run a named study (see 'capacity list studies'), resuming from the groups already saved under "
        "OUT/.sweep/STUDY/; save the Dataset as OUT/STUDY.nc and draw the study's figures.",
    )
    p.add_argument("study", metavar="STUDY", help="a study name, e.g. capacity-vs-d")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a grid or probe field; lists are comma-separated, e.g. --set d=16,32 --set 'variant=linear,delta(beta=0.5)' --set load=1/8,1,16. Keys: " + ", ".join(Study.settable()))
    p.add_argument("--out", default="results", metavar="DIR", help="output folder (default: results)")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="torch device for the probes (default: auto = cuda when available)")
    p.add_argument("--executor", default="auto", choices=list(EXECUTORS), help="auto (default: processes on a multi-core CPU, else serial), serial, processes (local worker processes) or dask")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS", help="Dask scheduler address, e.g. tcp://host:8786 (dask executor; default: a local cluster)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="worker processes for processes or a local Dask cluster (default: CPU count)")
    p.add_argument("--quiet", action="store_true", help="plain log lines instead of a progress bar")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("plot", help="draw a study's default figures (PNG and PDF) from its results")
    p.add_argument("results", metavar="RESULTS", help="a results file (.nc) or a directory of them")
    p.add_argument("--out", metavar="DIR", default=None, help="where the figures go (default: figures/ beside the results)")
    p.set_defaults(func=_cmd_plot)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        return args.func(args)
    except CapacityError as exc:
        print(f"capacity: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("capacity: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
