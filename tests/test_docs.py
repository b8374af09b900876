"""The README and the pages under docs/: every Python example runs, every relative link resolves,
and the names docs/theory.md cites (functions, tests, figures) exist."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Pages other branches are adding; a link to one of them may not resolve until they are merged.
# Once a page exists, links to it (and to its headings) are checked like any other.
PENDING = {
    "docs/memories.md",
    "docs/theory-delta.md",
    "docs/fla.md",
    "docs/mqar.md",
    "docs/pretrained-keys.md",
    "docs/plugins.md",
}

FENCE = re.compile(r"^(`{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", re.DOTALL | re.MULTILINE)
NO_TEST = re.compile(r"<!--\s*no-test:((?:(?!-->).)*)-->\s*\Z", re.DOTALL)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _blocks(path: Path):
    """(line, code, reason, output) for every ```python block: reason is the no-test reason or None,
    output the text of a plain ``` block right after a block that prints (what it prints) or None."""
    text = path.read_text()
    fences = list(FENCE.finditer(text))
    for i, m in enumerate(fences):
        if m.group(2).strip() != "python":
            continue
        before = NO_TEST.search(text[: m.start()])
        reason = before.group(1).strip() if before else None
        nxt = fences[i + 1] if i + 1 < len(fences) else None
        printed = nxt is not None and not nxt.group(2).strip() and not text[m.end() : nxt.start()].strip()
        printed = printed and "print(" in m.group(3)
        yield text.count("\n", 0, m.start()) + 1, m.group(3), reason, nxt.group(3) if printed else None


NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _same_output(got: str, expected: str) -> bool:
    """The text the same up to white space, integers equal, and each other number equal up to the
    digits printed (one unit in the last printed place, 0.1% or 1e-6: numerical noise, not a changed result)."""
    if re.sub(r"\s+", "", NUMBER.sub("#", got)) != re.sub(r"\s+", "", NUMBER.sub("#", expected)):
        return False
    for g, e in zip(NUMBER.findall(got), NUMBER.findall(expected)):
        mantissa = re.split(r"[eE]", e)[0]
        if "." not in e and "e" not in e.lower():
            if g != e:
                return False
            continue
        places = len(mantissa.split(".")[1]) if "." in mantissa else 0
        scale = 10 ** int(re.split(r"[eE]", e)[1]) if re.search(r"[eE]", e) else 1
        tol = max(1.01 * 10.0**-places * scale, 1e-3 * abs(float(e)), 1e-6)
        if abs(float(g) - float(e)) > tol:
            return False
    return True


def _unfenced(text: str) -> str:
    """The text with every fenced block blanked out (line numbers kept)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def _prose(text: str) -> str:
    """The text outside fenced blocks and inline code spans (where brackets are not links)."""
    return re.sub(r"(`+)[^`\n]*?\1", "", _unfenced(text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]{2,}|`", "", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*$", _unfenced(path.read_text()), re.MULTILINE)}


def _links(path: Path):
    """(line, target) for every Markdown link and image outside code."""
    prose = _prose(path.read_text())
    for m in LINK.finditer(prose):
        yield prose.count("\n", 0, m.start()) + 1, m.group(1)


EXAMPLES = [(p, line, code, reason, out) for p in PAGES for line, code, reason, out in _blocks(p)]
RUN = [pytest.param(code, out, id=f"{_rel(p)}:{line}") for p, line, code, reason, out in EXAMPLES if reason is None]


def test_the_pages_have_examples_to_run():
    assert len(PAGES) >= 8 and len(RUN) >= 10, [_rel(p) for p in PAGES]


@pytest.mark.slow
@pytest.mark.parametrize("code,printed", RUN)
def test_python_example_runs(code, printed, tmp_path, monkeypatch, capsys):
    """Each example runs; where the page shows what it prints, it prints that."""
    monkeypatch.chdir(tmp_path)  # an example that writes files writes them here
    exec(compile(code, "example", "exec"), {"__name__": "__docs__"})
    if printed is not None:
        got = capsys.readouterr().out
        assert _same_output(got, printed), f"the example prints\n{got}\nthe page shows\n{printed}"


def test_output_comparison_tolerates_noise_not_changes():
    assert _same_output("[0.502 0.981 4.   ]\n", "[0.502 0.981 4.]")
    assert _same_output("tensor([6.1e-12, 9.9e-12])", "tensor([6.4308e-12, 8.2963e-12])")
    assert _same_output("2.0 0.5 0.5", "1.999 0.5 0.5")
    assert not _same_output("0.512", "0.502")
    assert not _same_output("D = 2146", "D = 2145")
    assert not _same_output("linear 0.5", "decay 0.5")


def test_every_skipped_example_says_why():
    unexplained = [f"{_rel(p)}:{line}" for p, line, _, reason, _ in EXAMPLES if reason is not None and len(reason) < 10]
    assert not unexplained, f"<!-- no-test: reason --> needs a reason: {unexplained}"


def test_relative_links_resolve():
    broken = []
    for page in PAGES:
        for line, target in _links(page):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (page.parent / file).resolve() if file else page
            where = f"{_rel(page)}:{line}: {target}"
            if not dest.exists():
                if not (dest.is_relative_to(ROOT) and _rel(dest) in PENDING):
                    broken.append(where + " (no such file)")
                continue
            if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(where + " (no such heading)")
    assert not broken, "\n".join(broken)


def test_link_checker_catches_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nSee [a](missing.md) and [b](#title) and `[c](not-a-link.md)`.\n```\n[d](x.md)\n```\n")
    assert [t for _, t in _links(page)] == ["missing.md", "#title"]
    assert "title" in _anchors(page)
    assert _slug("T13: the bill, softmax against linear") == "t13-the-bill-softmax-against-linear"
    assert _slug("`capacity check`") == "capacity-check" and _slug("check_variant") == "check_variant"


def test_only_the_block_right_after_a_no_test_comment_is_skipped(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- no-test: needs a GPU here -->\n```python\nA\n```\n\n<!-- other -->\n```python\nB\n```\n"
        "<!-- no-test: -->\n```python\nprint(C)\n```\n\n```\nprinted\n```\n"
    )
    found = [(code, reason, out) for _, code, reason, out in _blocks(page)]
    assert found == [("A\n", "needs a GPU here", None), ("B\n", None, None), ("print(C)\n", "", "printed\n")]


def _defined(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_theory_page_cites_what_exists():
    """Each theorem has a section, and every function, test and figure it cites is real."""
    from lacapacity import plots, theory

    text = (ROOT / "docs" / "theory.md").read_text()
    headings = re.findall(r"^## (T\d+):", text, re.MULTILINE)
    numbers = [int(h[1:]) for h in headings]  # increasing, with gaps between the topics' ranges
    assert numbers[:13] == list(range(1, 14)) and numbers == sorted(set(numbers)), headings
    assert set(range(14, 31)) <= set(numbers), headings
    cited = set(re.findall(r"lacapacity\.theory\.(\w+)", text))
    assert cited >= set(theory.__all__), set(theory.__all__) - cited  # every closed form is on the page
    assert all(hasattr(theory, name) for name in cited), cited - set(dir(theory))
    tests = set().union(*(_defined(p) for p in (ROOT / "tests").rglob("test_*.py")))
    named = set(re.findall(r"`(test_\w+)`", text))
    assert len(named) >= 20 and named <= tests, named - tests
    figs = set(re.findall(r"`plots\.(\w+)`", text))
    assert {"capacity_vs_d", "error_vs_load", "orthogonality", "variant_curves", "bill", "closed_form"} <= figs
    assert all(callable(getattr(plots, f, None)) for f in figs), [f for f in figs if not hasattr(plots, f)]
    # the T5 section links its function, its test file and a figure
    t5 = text.split("## T5:")[1].split("\n## ")[0]
    for link in (
        "(../capacity/theory/additive.py)",
        "(../tests/theory/test_theory.py)",
        "(figures/main-capacity-vs-d.png)",
    ):
        assert link in t5
