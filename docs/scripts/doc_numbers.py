"""The numbers README.md and docs/*.md quote, computed from the code, and the generated `capacity check` table.

A number in a page is written as ``<!-- num:NAME -->TEXT<!-- /num -->``. ``NUMBERS`` below says how NAME is
computed and how closely TEXT must agree with it (``rel``, ``abs``: what the printed digits and the measurement's
noise allow; 0 for a count). The producers run from the repository root; those marked ``check`` take the rows of
one ``capacity check`` run (seed 0), the others are cheap. A number read off a dated table of the docs (a
one-time measurement, such as theory-delta.md's) is computed from that table, so that the prose cannot drift from it.

The `capacity check` table of docs/theory.md is a generated block::

    <!-- generated:check-table -->
    ```
    ...the output of `capacity check`...
    ```
    <!-- /generated -->

Timings are not recomputed (they depend on the machine and its load): each one in README.md or docs/ must carry
the date and the machine it was measured on, in its own paragraph (or the lead-in of its list or table).

    python docs/scripts/doc_numbers.py            # each number: the page's text, the computed value, agree?
    python docs/scripts/doc_numbers.py --write    # rewrite the spans and the generated table from the code

tests/test_docs_numbers.py holds the spans and the timings to this; tests/check/test_check_cli.py the numbers marked
``check`` and the table (it reuses its own `capacity check` run). Adding a number: write the span in the page,
add a producer here with ``@number("name", ...)``, run ``--write``. docs/testing.md has the rules.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SPAN = re.compile(r"<!-- num:([\w.-]+) -->(.*?)<!-- /num -->", re.DOTALL)
BLOCK = re.compile(r"(<!-- generated:check-table -->\n```\n)(.*?)(```\n<!-- /generated -->)", re.DOTALL)


@dataclass
class Number:
    name: str
    compute: Callable  # () -> value, or (rows) -> value when ``check``
    fmt: str
    rel: float
    abs: float
    check: bool
    doc: str

    def text(self, value) -> str:
        return self.fmt.format(value)

    def agrees(self, text: str, value) -> bool:
        """Whether the page's ``text`` is ``value`` (up to rel/abs; text equal for non-numbers)."""
        if isinstance(value, str):
            return text == value
        try:
            got = float(text.replace(",", "").rstrip("%x"))
        except ValueError:
            return False
        want = float(self.text(value).replace(",", "").rstrip("%x"))  # compare on the printed scale
        return abs(got - want) <= max(self.abs, self.rel * abs(want))


NUMBERS: dict[str, Number] = {}


def number(name: str, fmt: str = "{:g}", *, rel: float = 0.0, abs: float = 0.0, check: bool = False):
    """Register a producer for the spans named ``name``."""

    def register(fn):
        NUMBERS[name] = Number(name, fn, fmt, rel, abs, check, (fn.__doc__ or "").strip())
        return fn

    return register


# ---------------------------------------------------------------- tables of the docs (one-time, dated measurements)


def table(page: str, header: str) -> list[dict[str, str]]:
    """The rows of the Markdown table in docs/``page`` whose header line starts with ``header``."""
    lines = (ROOT / "docs" / page).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    cols = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(cols, (c.strip() for c in line.strip("|").split("|")))))
    return rows


def _argmax_table() -> list[dict[str, str]]:
    return table("theory-delta.md", "| d | dv | batch | measured | refined | Gaussian |")


@number("t10-refined-low", "{:.3f}", abs=0.0005)
def _refined_low():
    """Smallest measured / refined 90%-recall capacity in theory-delta.md's table."""
    return min(float(r["measured / refined"]) for r in _argmax_table())


@number("t10-refined-high", "{:.3f}", abs=0.0005)
def _refined_high():
    """Largest measured / refined 90%-recall capacity in theory-delta.md's table."""
    return max(float(r["measured / refined"]) for r in _argmax_table())


@number("t10-refined-pct", "{:.0f}", abs=0.5)
def _refined_pct():
    """Largest |measured / refined - 1| of that table, in percent."""
    return 100 * max(abs(float(r["measured / refined"]) - 1) for r in _argmax_table())


@number("t10-gaussian-low", "{:.0f}", abs=0.5)
def _gaussian_low():
    """How far the measured capacity lies above the Gaussian bound, least (percent), in that table."""
    return 100 * (min(float(r["measured / Gaussian"]) for r in _argmax_table()) - 1)


@number("t10-gaussian-high", "{:.0f}", abs=0.5)
def _gaussian_high():
    """... and most (percent)."""
    return 100 * (max(float(r["measured / Gaussian"]) for r in _argmax_table()) - 1)


# ---------------------------------------------------------------- closed forms (cheap, exact)


@number("delta-capacity-64", "{:.0f}")
def _delta_capacity():
    """delta_rule_capacity(0.5, 64), beta = 1."""
    from lacapacity import theory

    return theory.delta_rule_capacity(0.5, 64)


@number("refined-64-16", "{:.1f}", abs=0.05)
def _refined_64_16():
    """argmax_capacity_refined(64, 16)."""
    from lacapacity import theory

    return theory.argmax_capacity_refined(64, 16)


@number("refined-16-64", "{:.1f}", abs=0.05)
def _refined_16_64():
    """argmax_capacity_refined(16, 64)."""
    from lacapacity import theory

    return theory.argmax_capacity_refined(16, 64)


# ---------------------------------------------------------------- measurements (cheap, seeded)


def _readme_probe():
    import lacapacity

    K = lacapacity.keys.make("gaussian", n=256, d=64, batch=8, seed=0)
    V = lacapacity.values.make("gaussian", n=256, dv=64, batch=8, seed=1)
    ds = lacapacity.probe.recall(lacapacity.variants.get("linear"), K, V)
    return ds.mse.mean("batch").sel(n=256).item()


@number("readme-mse", "{:.2f}", abs=0.005)
def _readme_mse():
    """README: mean error of 256 random keys in d = 64 over 8 seeds, through the probe."""
    return _readme_probe()


@number("readme-t7", "{:.2f}", abs=0.005)
def _readme_t7():
    """README: T7's (n - 1)/d at n = 256, d = 64."""
    from lacapacity import theory

    return theory.random_keys_error(256, 64)


# ---------------------------------------------------------------- `capacity check` (seed 0)


@number("check-rows", "{:d}", check=True)
def _check_rows(rows):
    """The number of rows of `capacity check`."""
    return len(rows)


def _row(rows, start: str):
    (row,) = [r for r in rows if r.what.startswith(start)]
    return row


@number("check-t10-margin", "{:.2f}", abs=0.005, check=True)
def _check_t10_margin(rows):
    """The check's measured 90%-recall capacity at d = dv = 64 over the Gaussian bound."""
    r = _row(rows, "d = dv = 64: 90%-recall capacity >= Gaussian bound")
    return r.measured / r.expected


@number("check-t10-refined", "{:.3f}", abs=0.0005, check=True)
def _check_t10_refined(rows):
    """The check's measured 90%-recall capacity at d = dv = 64 over the refined prediction."""
    r = _row(rows, "d = dv = 64: 90%-recall capacity = refined prediction")
    return r.measured / r.expected


def check_table(rows) -> str:
    from lacapacity import check

    return check.format_table(rows) + "\n"


def table_disagreements(rows, text: str | None = None) -> list[str]:
    """Where docs/theory.md's generated table and these rows differ beyond noise.

    Each line must show the row's mark, theorem, text and function; its measured value may differ from the run's
    by the row's own tolerance (or 0.1%, the digits printed), its expected value and tolerance by 0.1% and 5%.
    """
    text = (ROOT / "docs" / "theory.md").read_text() if text is None else text
    m = BLOCK.search(text)
    if m is None:
        return ["docs/theory.md has no <!-- generated:check-table --> block"]
    lines = m.group(2).splitlines()
    want = check_table(rows).splitlines()
    if len(lines) != len(want):
        return [f"the table has {len(lines)} lines, the run {len(want)}: run docs/scripts/doc_numbers.py --write"]
    bad = []
    if lines[-1] != want[-1]:
        bad.append(f"summary: {lines[-1]!r} != {want[-1]!r}")
    for line, new, r in zip(lines[2:-1], want[2:-1], rows):
        head, cells = new[: -(12 + 1 + 3 + 1 + 12 + 1 + 9)], line.split()[-4:]
        if not line.startswith(head.rstrip()) or cells[1] != r.relation:
            bad.append(f"row {r.theorem} {r.what!r}: the page shows {line!r}")
            continue
        got_m, got_e, got_t = float(cells[0]), float(cells[2]), float(cells[3])
        close = lambda a, b, rel, floor=0.0: abs(a - b) <= max(rel * abs(b), floor)
        if not (
            close(got_m, r.measured, 1e-3, max(r.tolerance, 1e-6))
            and close(got_e, r.expected, 1e-3, 1e-12)
            and close(got_t, r.tolerance, 0.05, 1e-12)
        ):
            bad.append(
                f"row {r.theorem} {r.what!r}: the page shows {cells}, the run {r.measured:.6g} {r.expected:.6g} {r.tolerance:.2g}"
            )
    return bad


# ---------------------------------------------------------------- reading and writing the pages


def spans():
    """(page, name, text) for every span of every page."""
    for page in PAGES:
        text = re.sub(r"`[^`\n]*`", "", page.read_text())  # a span shown as code is an example, not a number
        for m in SPAN.finditer(text):
            yield page, m.group(1), m.group(2)


def values(rows=None, names=None) -> dict:
    """Computed value of each number (those marked ``check`` only when ``rows`` are given)."""
    out = {}
    for name, num in NUMBERS.items():
        if names is not None and name not in names:
            continue
        if num.check:
            if rows is not None:
                out[name] = num.compute(rows)
        else:
            out[name] = num.compute()
    return out


def disagreements(vals: dict) -> list[str]:
    """'page: name: text != computed' for each span whose text disagrees with its computed value."""
    bad = []
    for page, name, text in spans():
        if name not in NUMBERS:
            bad.append(f"{page.relative_to(ROOT)}: {name}: no producer in docs/scripts/doc_numbers.py")
        elif name in vals and not NUMBERS[name].agrees(text, vals[name]):
            bad.append(
                f"{page.relative_to(ROOT)}: {name}: the page says {text!r}, the code gives {NUMBERS[name].text(vals[name])!r}"
            )
    return bad


def write(vals: dict, table: str | None = None) -> list[Path]:
    """Rewrite the spans (and the generated check table, if given) in place; returns the pages changed."""
    changed = []
    for page in PAGES:
        text = page.read_text()
        new = SPAN.sub(
            lambda m: (
                f"<!-- num:{m.group(1)} -->{NUMBERS[m.group(1)].text(vals[m.group(1)])}<!-- /num -->"
                if m.group(1) in vals
                else m.group(0)
            ),
            text,
        )
        if table is not None:
            new = BLOCK.sub(lambda m: m.group(1) + table + m.group(3), new)
        if new != text:
            page.write_text(new)
            changed.append(page)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the spans and the table from the code")
    args = parser.parse_args(argv)
    from lacapacity import check

    rows = check.run_checks(seed=0)
    vals = values(rows)
    if args.write:
        for page in write(vals, check_table(rows)):
            print("wrote", page.relative_to(ROOT))
    for page, name, text in spans():
        num = NUMBERS.get(name)
        verdict = "no producer" if num is None else ("ok" if num.agrees(text, vals[name]) else "DIFFERS")
        shown = "" if num is None else num.text(vals[name])
        print(f"{page.relative_to(ROOT)}: {name}: page {text!r}, code {shown!r}: {verdict}")
    return 1 if disagreements(vals) else 0


if __name__ == "__main__":
    sys.exit(main())
