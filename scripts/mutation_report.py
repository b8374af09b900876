"""Scores and surviving mutants of scripts/mutation.sh runs, as Markdown.

    .venv/bin/python scripts/mutation_report.py DIR [DIR ...]

Each DIR is a target's run directory ($WORK/<target>). Several directories of the same target (a full run, then
runs of its survivors with more tests: ``MUTANTS=... scripts/mutation.sh``) are merged: a mutant counts as killed
if any run killed it, and as tested if any run tested it. Prints the score per file and, for every mutant not
killed, its status and diff.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import defaultdict


@contextlib.contextmanager
def _cwd(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def load(directory: str) -> dict[str, tuple[str, str, str]]:
    """mutant name -> (status, source file, diff) for one run directory."""
    from mutmut import configuration

    configuration.reset_config()
    with _cwd(directory):
        from mutmut.__main__ import SourceFileMutationData, status_by_exit_code, walk_mutatable_files
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        out = {}
        for path in walk_mutatable_files():
            m = SourceFileMutationData(path=path)
            m.load()
            for key, code in m.exit_code_by_key.items():
                status = status_by_exit_code[code]
                diff = get_diff_for_mutant(key, path=m.path) if status not in ("killed", "not checked") else ""
                out[key] = (status, str(path), diff)
    return out


def merge(runs: list[dict]) -> dict[str, tuple[str, str, str]]:
    rank = {"killed": 0, "timeout": 1, "survived": 2, "no tests": 3, "not checked": 4}
    merged: dict[str, tuple[str, str, str]] = {}
    for run in runs:
        for key, value in run.items():
            if key not in merged or rank.get(value[0], 5) < rank.get(merged[key][0], 5):
                merged[key] = value
    return merged


def main(argv: list[str]) -> int:
    merged = merge([load(d) for d in argv])
    per_file: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for status, path, _ in merged.values():
        per_file[path][status] += 1
    print("| file | mutants | killed | survived | other | killed % |")
    print("|---|---|---|---|---|---|")
    total = defaultdict(int)
    for path in sorted(per_file):
        c = per_file[path]
        n, k = sum(c.values()), c["killed"]
        other = n - k - c["survived"]
        for s, v in c.items():
            total[s] += v
        print(f"| {path} | {n} | {k} | {c['survived']} | {other} | {100 * k / n:.1f} |")
    n, k = sum(total.values()), total["killed"]
    print(f"| all | {n} | {k} | {total['survived']} | {n - k - total['survived']} | {100 * k / n:.1f} |")
    print()
    for key in sorted(merged):
        status, path, diff = merged[key]
        if status != "killed":
            lines = [x for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]
            print(f"- `{key}` ({status}): " + " / ".join(f"`{x.strip()}`" for x in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
