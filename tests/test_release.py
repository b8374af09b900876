"""What a release carries besides the code: the licence, the citation, the changelog and the PEP 561 marker, and one
version read from one place (``lacapacity.__version__``) by setuptools, the installed metadata, the command line,
CITATION.cff and every result file. The built wheel itself is tested in tests/test_wheel.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
import xarray as xr
import yaml
from packaging.utils import canonicalize_name

import lacapacity
from lacapacity import studies, sweep
from lacapacity.base.catalog import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml takes Python 3.11's tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_distribution_name_is_written_once_and_differs_from_the_import_name():
    """The name on the package index is not ``capacity`` (an unrelated project owns it, and its distribution installs
    a module ``capacity``): pyproject.toml declares ``catalog.DISTRIBUTION``, the installed metadata carries it, and
    the one top-level module it installs is ``lacapacity``, not ``capacity``."""
    assert _pyproject()["project"]["name"] == DISTRIBUTION
    assert canonicalize_name(DISTRIBUTION) != "capacity"
    assert metadata.distribution(DISTRIBUTION).read_text("top_level.txt") in (None, "lacapacity\n")


# a pip install command up to where it ends: the end of the line, a backtick, a shell operator or a bracket
_PIP_INSTALL = re.compile(r"pip3? install ([^\n`;&|()]*)")


def install_targets(text: str) -> list[str]:
    """The distribution names that the ``pip install`` commands in ``text`` ask for (options and paths left out;
    ``'name[extra]'`` gives name)."""
    out = []
    for args in _PIP_INSTALL.findall(text):
        for word in args.split():
            word = word.strip("'\"")
            if not word or word.startswith(("-", ".", "/", "~", "$")) or "/" in word:
                continue
            out.append(canonicalize_name(re.split(r"[\[<>=!~; ]", word, maxsplit=1)[0]))
    return out


def test_install_targets_reads_names_extras_and_pins():
    text = (
        "run `pip install 'capacity[models]'`; pip install -U capacity && x\n"
        "pip install --no-deps --target /tmp/x fla-core==0.6.0 einops\n pip install -e '.[test]' (pip install torch)"
    )
    assert install_targets(text) == ["capacity", "capacity", "fla-core", "einops", "torch"]


def test_no_file_says_pip_install_capacity():
    """Every ``pip install`` in the tracked files (docs, messages, comments) names this distribution by its own name:
    ``pip install capacity`` would install the unrelated project's package (a module ``capacity`` of its own)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    wrong = []
    for rel in filter(None, listed.stdout.decode().split("\0")):
        path = ROOT / rel
        suffixes = (".md", ".py", ".cff", ".toml", ".txt", ".sh", ".ipynb", ".cfg", "")
        if path.suffix not in suffixes or not path.is_file() or rel == "tests/test_release.py":  # its own examples
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "capacity" in install_targets(text):
            wrong.append(rel)
    assert not wrong, f"pip install capacity (someone else's package; this one is {DISTRIBUTION}) in: {wrong}"
    readme = (ROOT / "README.md").read_text()
    assert f"pip install {DISTRIBUTION}" in readme  # the README says the name


def test_the_licence_is_the_mit_text_pyproject_declares():
    project = _pyproject()["project"]
    assert project["license"] == "MIT"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the capacity authors\n")
    assert "Permission is hereby granted, free of charge, to any person obtaining a copy" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text


def test_the_citation_is_cff_1_2_with_the_package_version():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    # the fields CFF 1.2.0 requires, with the types its schema gives them
    assert cff["cff-version"] == "1.2.0"
    assert isinstance(cff["message"], str) and cff["message"].strip()
    assert isinstance(cff["title"], str) and cff["title"].startswith("capacity")
    assert cff["authors"] and all(isinstance(a, dict) and ("name" in a or "family-names" in a) for a in cff["authors"])
    assert cff["type"] == "software" and cff["license"] == "MIT"
    assert cff["version"] == lacapacity.__version__  # a string: YAML would read an unquoted 0.1 as a float
    assert f"pip install {DISTRIBUTION}" in cff["message"]  # the name to install it by, in what GitHub shows
    assert "repository-code" not in cff or str(cff["repository-code"]).startswith("https://")


def test_the_changelog_has_an_unreleased_section_then_the_current_version():
    headings = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert headings[1].split()[0] == lacapacity.__version__


def test_the_version_is_written_once_and_read_by_setuptools_without_importing_the_package():
    pyproject = _pyproject()
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "lacapacity.base._version.__version__"}
    # setuptools' own reader, with the package made unimportable: it must read the literal from the source, found
    # through package-dir (capacity/ is lacapacity)
    attr = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    package_dir = pyproject["tool"]["setuptools"]["package-dir"]  # as setuptools reads it at build time
    code = (
        "import sys; sys.modules['lacapacity'] = None; sys.modules['torch'] = None\n"
        "from setuptools.config.expand import read_attr\n"
        f"print(read_attr({attr!r}, {package_dir!r}, root_dir={str(ROOT)!r}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == lacapacity.__version__
    written = [p for p in (ROOT / "capacity").rglob("*.py") if re.search(r"^__version__ = ", p.read_text(), re.M)]
    assert written == [ROOT / "capacity" / "base" / "_version.py"]
    # the installed metadata (written from the attr at install time) and the command line agree
    assert metadata.version(DISTRIBUTION) == lacapacity.__version__
    cli = subprocess.run([sys.executable, "-m", "lacapacity.cli", "--version"], capture_output=True, text=True)
    assert cli.stdout.strip() == f"capacity {lacapacity.__version__}", cli.stderr


def test_the_package_is_marked_typed():
    assert (Path(lacapacity.__file__).parent / "py.typed").is_file()
    data = _pyproject()["tool"]["setuptools"]["package-data"]
    assert "py.typed" in data["lacapacity"]


def test_results_record_the_version(tmp_path):
    study = studies.get("capacity-vs-d").with_overrides(["d=16", "seed=0", "load=1/2,1", "variant=linear"])
    result = sweep.run(study, out=tmp_path, device="cpu", executor="serial", progress=False)
    ds = result.dataset
    assert ds.attrs["capacity_version"] == lacapacity.__version__
    assert json.loads(ds.attrs["versions"])["capacity"] == lacapacity.__version__
    with xr.open_dataset(result.path) as saved:  # the file on disk carries it too
        assert saved.attrs["capacity_version"] == lacapacity.__version__


def test_the_readme_test_command_runs_the_type_check_and_the_wheel_check():
    lines = (ROOT / "README.md").read_text().splitlines()
    cmd = lines[lines.index("<!-- test-command -->") + 2]
    steps = [s.strip() for s in cmd.split("&&")]
    assert ".venv/bin/mypy" in steps and steps.index(".venv/bin/mypy") < len(steps) - 1  # before the tests
    # pytest's own command, not python -m pytest: that puts the checkout's root on sys.path, where its kernels/
    # hides the installed package kernels that transformers imports
    assert steps[-1].startswith(".venv/bin/pytest ") and " -m " not in steps[-1].split("pytest", 1)[1]
    mypy = _pyproject()["tool"]["mypy"]
    assert mypy["strict"] is True and {"typecheck/lacapacity", "tests/typed_use.py"} <= set(
        mypy["files"]
    )  # the package
    assert (ROOT / "tests" / "test_wheel.py").is_file()  # collected by that pytest run (slow tests included)


def test_the_type_check_reads_the_mapped_folders_under_their_installed_names():
    """capacity/ is installed as lacapacity and plots/, kernels/, studies/ as lacapacity.plots, .kernels, .studies
    (package-dir), which an editable install maps in through an import hook mypy does not follow: mypy reads them
    through the links in typecheck/lacapacity/ (typecheck/README.md), one per entry of capacity/ and one per mapped
    folder, as package bases with mypy_path, strictly like the rest of the package."""
    pyproject = _pyproject()
    mypy, mapped = pyproject["tool"]["mypy"], pyproject["tool"]["setuptools"]["package-dir"]
    assert mypy["mypy_path"] == "typecheck" and mypy["explicit_package_bases"] is True and mypy["strict"] is True
    assert "typecheck/lacapacity" in mypy["files"]
    assert sorted(mapped) == ["lacapacity", "lacapacity.kernels", "lacapacity.plots", "lacapacity.studies"], mapped
    links = ROOT / "typecheck" / "lacapacity"
    for name, folder in mapped.items():
        if name == "lacapacity":  # the package itself: a link per entry of its folder (new modules need one)
            for entry in (ROOT / folder).iterdir():
                if entry.name in ("__pycache__", "data"):
                    continue
                link = links / entry.name
                assert link.is_symlink() and link.resolve() == entry.resolve(), f"{link}: run typecheck/README.md's ln"
            continue
        link = links / name.split(".", 1)[1]
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link
    relaxed = [o["module"] for o in mypy.get("overrides", []) if set(o) - {"module", "ignore_missing_imports"}]
    assert not relaxed, f"overrides that relax the strict flags: {relaxed}"
    assert not any(
        name.startswith("lacapacity")
        for o in mypy.get("overrides", [])
        if o.get("ignore_missing_imports")
        for name in ([o["module"]] if isinstance(o["module"], str) else o["module"])
    )
