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


def _cmd_list(args) -> int:
    from capacity import features, keys, values, variants

    sections = {
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

    p = sub.add_parser("check", help="check every closed form and bound (DESIGN section 3) against measurements")
    p.add_argument("--device", default=None, help="torch device for the measurements (default: cpu)")
    p.add_argument("--seed", type=int, default=0, help="seed for every draw (default: 0)")
    p.add_argument("--only", default=None, metavar="T2,T5,...", help="run only the checks of these theorems (default: all, T1-T13)")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser("list", help="list variants, feature maps, key families and value families")
    p.add_argument("what", nargs="?", default="all", choices=["all", "variants", "features", "keys", "values"])
    p.set_defaults(func=_cmd_list)

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
