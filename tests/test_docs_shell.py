"""Every shell snippet of the README and docs/*.md runs as written after the README's main command.

A shell snippet is a fenced block tagged ``sh``. Each runs with ``bash -euo pipefail`` in its own copy of a folder
where the main job (``capacity run capacity-vs-d``) has run, with this environment's ``bin/`` first on the PATH, as
after ``source .venv/bin/activate`` (README, "Two commands"), and with the files the pages ask the reader to save
(a block after ``<!-- file: NAME -->``, e.g. docs/plugins.md's ``mymem.py``) written there. Lines that start with
``$ `` are commands of a transcript (the lines after them are what they print): the command runs, and must exit
with 2 where the page shows an error and with 0 otherwise. A block after ``<!-- no-test: reason -->`` is not run;
the reason is on the page. An untagged block that starts with a command fails the check below, so that no
snippet escapes the run by its tag; the README's two commands (after their markers) are run by CI itself.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs import FENCE, NO_TEST, PAGES, _rel

FILE = re.compile(r"<!--\s*file:\s*(\S+)\s*-->\s*\Z")
MARKED = re.compile(r"<!--\s*(main|test)-command\s*-->\s*\Z")
# the first line of a block that is a command rather than output: a command word, not "capacity: ..." (output)
COMMAND = re.compile(r"^(\$ |capacity(?![:.])\b|python3?\b|pip3?\b|export\b|ls\b|cd\b|source\b|\.venv/|[A-Z_]+=\S+ )")


def _snippets(path: Path):
    """(line, tag, code, reason, marked) for every fenced block other than ```python, with the no-test reason and
    whether a main-command/test-command marker stands before it."""
    text = path.read_text()
    for m in FENCE.finditer(text):
        tag = m.group(2).strip()
        if tag == "python":
            continue
        before = text[: m.start()]
        reason = NO_TEST.search(before)
        yield (
            text.count("\n", 0, m.start()) + 1,
            tag,
            m.group(3),
            reason.group(1).strip() if reason else None,
            bool(MARKED.search(before)),
        )


def saved_files(pages: list[Path] = PAGES) -> dict[str, str]:
    """name -> text of every block the pages ask the reader to save (``<!-- file: NAME -->`` before it)."""
    out = {}
    for path in pages:
        text = path.read_text()
        for m in FENCE.finditer(text):
            named = FILE.search(text[: m.start()])
            if named:
                out[named.group(1)] = m.group(3)
    return out


SNIPPETS = [(p, *s) for p in PAGES for s in _snippets(p)]
RUN = [
    pytest.param(code, id=f"{_rel(p)}:{line}")
    for p, line, tag, code, reason, _ in SNIPPETS
    if tag == "sh" and reason is None
]


def transcript(code: str) -> list[tuple[str, bool]]:
    """(command, fails) for each ``$ `` line of a transcript block: fails when what it prints shows an error."""
    lines = code.splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.startswith("$ "):
            printed = []
            for after in lines[i + 1 :]:
                if after.startswith("$ "):
                    break
                printed.append(after)
            out.append((line[2:], any(": error: " in p for p in printed)))
    return out


def test_every_command_block_is_a_shell_snippet():
    untagged = [
        f"{_rel(p)}:{line}"
        for p, line, tag, code, _, marked in SNIPPETS
        if tag not in ("sh", "text") and not marked and code.strip() and COMMAND.match(code.lstrip().splitlines()[0])
    ]
    assert not untagged, f"blocks of commands not tagged ```sh (so not run by this file): {untagged}"
    assert len(RUN) >= 6, RUN


def test_the_checks_of_this_file_see_commands_transcripts_and_files(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- file: m.py -->\n```python\nX = 1\n```\n\n```\ncapacity run x\n```\n\n```\ncapacity: error: no\n```\n\n"
        "<!-- no-test: needs a GPU -->\n```sh\ncapacity run y --device cuda\n```\n"
    )
    blocks = list(_snippets(page))
    assert [(b[1], b[3]) for b in blocks] == [("", None), ("", None), ("sh", "needs a GPU")]
    assert [bool(COMMAND.match(b[2])) for b in blocks] == [True, False, True]
    assert saved_files([page]) == {"m.py": "X = 1\n"}
    shown = "$ capacity run a\nsaved\n$ capacity run b --set d=0\ncapacity: error: d must be >= 1\n"
    assert transcript(shown) == [("capacity run a", False), ("capacity run b --set d=0", True)]


@pytest.fixture(scope="module")
def after_main(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A folder where the README's main command has run, and the environment of an activated ``.venv``."""
    work = tmp_path_factory.mktemp("main-job")
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(Path(bindir).parent))
    done = subprocess.run(
        ["capacity", "run", "capacity-vs-d", "--quiet"], cwd=work, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    for name, text in saved_files().items():
        (work / name).write_text(text)
    return work, env


@pytest.mark.slow
@pytest.mark.parametrize("code", RUN)
def test_shell_snippet_runs(code, after_main, tmp_path):
    main, env = after_main
    work = tmp_path / "work"
    shutil.copytree(main, work)
    steps = transcript(code)
    if not steps:  # a plain snippet: the whole block, as a script
        steps = [(code, False)]
    for cmd, fails in steps:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", cmd], cwd=work, env=env, capture_output=True, text=True, timeout=600
        )
        expected = 2 if fails else 0
        assert done.returncode == expected, f"{cmd}\nexited {done.returncode}, not {expected}:\n{done.stderr[-3000:]}"
