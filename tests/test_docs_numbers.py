"""Numbers in README.md and docs/ come from the code (docs/scripts/doc_numbers.py), and timings carry a date and a machine.

The spans ``<!-- num:NAME -->...<!-- /num -->`` are recomputed here (the cheap ones; those that need a
`capacity check` run are held in tests/check/test_check_cli.py, which has one) and must agree with the page within
the digits printed and the noise the producer declares. Timings are not recomputed: each must say when and
on what machine it was measured. docs/testing.md describes the rules.
"""

import re
from pathlib import Path

import pytest
from script_support import load_script

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _numbers():
    return load_script(ROOT / "docs" / "scripts" / "doc_numbers.py", "numbers_script")


NUM = _numbers()


def test_every_span_has_a_producer_and_agrees_with_it():
    spans = list(NUM.spans())
    assert len(spans) >= 15, spans
    named = {name for _, name, _ in spans}
    assert named <= set(NUM.NUMBERS), named - set(NUM.NUMBERS)
    assert set(NUM.NUMBERS) <= named, f"producers no page uses: {set(NUM.NUMBERS) - named}"
    bad = NUM.disagreements(NUM.values())
    assert not bad, "\n".join(bad) + "\nrun: python docs/scripts/doc_numbers.py --write"


def test_a_changed_number_is_caught(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("mse <!-- num:readme-t7 -->3.98<!-- /num --> and <!-- num:readme-t7 -->4.10<!-- /num -->\n")
    monkeypatch.setattr(NUM, "PAGES", [page])
    monkeypatch.setattr(NUM, "ROOT", tmp_path)
    bad = NUM.disagreements(NUM.values(names={"readme-t7"}))
    assert len(bad) == 1 and "'4.10'" in bad[0] and "'3.98'" in bad[0]
    NUM.write(NUM.values(names={"readme-t7"}))
    assert page.read_text().count("3.98") == 2
    num = NUM.NUMBERS["readme-t7"]
    assert num.agrees("3.98", 3.984375) and not num.agrees("3.99", 3.984375) and not num.agrees("x", 3.98)


def test_the_docs_tables_the_numbers_come_from_parse():
    rows = NUM.table("theory-delta.md", "| d | dv | batch | measured | refined | Gaussian |")
    assert len(rows) == 10 and rows[0]["d"] == "16" and float(rows[2]["measured / refined"]) == 0.993


# ---------------------------------------------------------------- timings

TIME = re.compile(r"(?<![\w.])\d+(?:\.\d+)?\s?(?:s|ms|min|minutes?|seconds?|hours?)\b(?!\.e\.)")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
MACHINE = re.compile(r"\b(?:\d+-core|cores?|CPU|GPU|VM|EPYC|H100|H200)\b")
SETTING = re.compile(r"(?:default is|more than|at most|timeout of|limit of|after)\s+$")  # a setting, not a measurement


def _blocks(text: str):
    """(line, block, context) for each paragraph, list item or table row outside fenced code; the context of a list
    item or table row includes the paragraph that leads into its list or table."""
    text = re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.DOTALL | re.MULTILINE)
    line, lead = 1, ""
    for para in re.split(r"(\n\s*\n)", text):
        if not para.strip() or para.startswith("\n"):
            line += para.count("\n")
            continue
        items = re.split(r"\n(?=\s*(?:[-*] |\d+\. |\|))", para)
        head = items[0]
        if not re.match(r"\s*(?:[-*] |\d+\. |\|)", head):
            lead = head
        for item in items:
            ctx = item if item is head and item is lead else lead + "\n" + item
            yield line, item, ctx
            line += item.count("\n") + 1
        line -= 1


def _undated_timings(path: Path, root: Path = ROOT):
    for line, block, ctx in _blocks(path.read_text()):
        block = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), block)  # inline code: a value to type
        for m in TIME.finditer(block):
            if SETTING.search(block[max(0, m.start() - 20) : m.start()]):
                continue
            if not (DATE.search(ctx) and MACHINE.search(ctx)):
                yield f"{path.relative_to(root)}:{line}: {m.group(0)!r} in {block.strip()[:90]!r}"


def test_every_timing_has_a_date_and_a_machine():
    bad = [x for page in PAGES for x in _undated_timings(page)]
    assert not bad, "timings without the date (YYYY-MM-DD) and machine they were measured on:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    "text,ok",
    [
        ("It took 4.2 s.", False),
        ("It took 4.2 s on the 2-core VM (2026-12-01).", True),
        ("Measured on the 2-core CPU, 2026-12-01:\n\n- the run: 31 s\n- the rest: 2 min", True),
        ("Measured:\n\n| what | time |\n|---|---|\n| run | 3 s |", False),
        ("tolerance 3 s.e. of the mean", True),
        ("```\ntook 9 s\n```", True),
        ("set `DASK_TIMEOUT=20s`; Dask's default is 30 s", True),
        ("work of more than 3 minutes is announced", True),
        ("the run took more or less 3 minutes", False),
    ],
)
def test_the_timing_rule(tmp_path, text, ok):
    page = tmp_path / "p.md"
    page.write_text(text + "\n")
    assert (not list(_undated_timings(page, tmp_path))) == ok
