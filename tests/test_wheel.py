"""The built wheel works on its own, without the source tree.

The sdist and the wheel are built with ``python -m build`` from a copy of the tree (what a fresh clone holds),
checked with ``twine check``, and the wheel alone (not an editable install) goes into a fresh virtual environment
outside the source tree. That environment holds the wheel and the distributions it requires, and theirs, linked
from the test's own environment (so torch is ``torch==2.13.0`` and nothing the wheel does not declare is there),
and ``pip check`` must find every requirement met. The wheel is installed by its distribution name
(``linear-attention-capacity``, ``catalog.DISTRIBUTION``) from a folder that holds it alone, as ``pip install NAME``
finds it on an index, and the installed distribution of that name must be this package (import name ``lacapacity``).
From a folder outside the tree it runs ``capacity list``,
``capacity check --help`` and a small ``capacity run``. Every package folder of the tree (a folder with an
``__init__.py`` under ``capacity/``, ``kernels/``, ``plots/``, ``studies/``), every module in one, the data files,
``kernels/README.md`` and ``py.typed`` must be in the wheel. The build and the run take tens of seconds
(docs/testing.md), so the tests are marked slow.
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from importlib.metadata import Distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lacapacity.base.catalog import DISTRIBUTION

ROOT = Path(__file__).resolve().parents[1]

# source folder -> where its files go in the wheel (setup.py and [tool.setuptools.package-dir] of pyproject.toml)
INSTALLED_AS = {
    "capacity": "lacapacity",
    "kernels": "lacapacity/kernels",
    "plots": "lacapacity/plots",
    "studies": "lacapacity/studies",
}
# files that are not modules but must be in the wheel, as source paths; every file under capacity/data/ is added
DATA = ["capacity/py.typed", "kernels/README.md"]
# what a copy of the tree for the build leaves out when git cannot list the files
IGNORED = shutil.ignore_patterns(
    ".git",
    ".venv",
    ".mypy_cache",
    ".ruff_cache",
    "build",
    "dist",
    "results",
    "mutants",
    "*.egg-info",
    "__pycache__",
    "*.pyc",
    ".pytest_cache",
    ".hypothesis",
)


def expected_files(root: Path = ROOT) -> dict[str, str]:
    """Wheel path -> source path of every file the wheel must carry: the ``__init__.py`` of every package folder
    and every module in one (packages found by their ``__init__.py``, as Python finds them), the data files."""
    out = {}
    for top, target in INSTALLED_AS.items():
        for init in sorted((root / top).rglob("__init__.py")):
            folder = init.parent
            if "__pycache__" in folder.parts or any(p.startswith(".") for p in folder.relative_to(root).parts):
                continue
            # a folder is a package of the tree only if every folder from the top down to it is one
            chain = [folder, *folder.relative_to(root / top).parents]
            if not all((root / top / p / "__init__.py").is_file() for p in chain[1:]):
                continue
            for module in folder.glob("*.py"):
                rel = module.relative_to(root / top).as_posix()
                out[f"{target}/{rel}"] = module.relative_to(root).as_posix()
    data = [root / p for p in DATA] + [p for p in (root / "capacity" / "data").rglob("*") if p.is_file()]
    for path in data:
        rel = path.relative_to(root).as_posix()
        top, _, rest = rel.partition("/")
        out[f"{INSTALLED_AS[top]}/{rest}"] = rel
    return out


def missing(names: set[str], root: Path = ROOT) -> list[str]:
    """The source paths whose files are not among ``names`` (the wheel's file list), sorted."""
    return sorted(src for dest, src in expected_files(root).items() if dest not in names)


def _source_copy(dest: Path) -> Path:
    """A copy of what a fresh clone holds: the files git tracks plus new ones it does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode != 0:  # not a git checkout (an unpacked sdist): the tree without what builds and runs leave
        shutil.copytree(ROOT, dest, ignore=IGNORED)
        return dest
    for rel in filter(None, listed.stdout.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():  # a file deleted but not yet committed is listed and absent
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, check=False, **kw)
    assert out.returncode == 0, (
        f"{' '.join(map(str, cmd))} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    )
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built by ``python -m build`` (the wheel from the sdist) from a copy of the tree."""
    src = _source_copy(tmp_path_factory.mktemp("source"))
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], timeout=600)
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    (found,) = dist.glob(f"{canonicalize_name(DISTRIBUTION).replace('-', '_')}-*.whl")
    return found


# ---------------------------------------------------------------- the checker itself


def test_the_checker_sees_a_missing_package_folder_module_or_data_file():
    names = set(expected_files())
    assert not missing(names)
    for gone in (
        "lacapacity/sweep/",
        "lacapacity/kernels/",
        "lacapacity/studies/capacity_vs_d.py",
        "lacapacity/data/mad_scores.csv",
        "lacapacity/py.typed",
    ):
        left = {n for n in names if not n.startswith(gone)}
        assert left != names and missing(left), gone
    # every package folder of the tree is among the expected files, the mapped ones included
    packages = {os.path.dirname(dest) for dest in expected_files() if dest.endswith("/__init__.py")}
    assert {
        "lacapacity",
        "lacapacity/sweep",
        "lacapacity/theory",
        "lacapacity/kernels",
        "lacapacity/plots",
        "lacapacity/studies",
    } <= packages


def test_the_checker_finds_a_new_sub_package(tmp_path):
    for top in INSTALLED_AS:
        (tmp_path / top).mkdir()
        (tmp_path / top / "__init__.py").write_text("")
    (tmp_path / "capacity" / "data").mkdir()
    (tmp_path / "capacity" / "py.typed").write_text("")
    (tmp_path / "kernels" / "README.md").write_text("")
    for folder in ("capacity/tasks/recall", "plots/extra"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
        (tmp_path / folder / "mod.py").write_text("")
    (tmp_path / "capacity" / "tasks" / "__init__.py").write_text("")
    (tmp_path / "capacity" / "notes").mkdir()  # no __init__.py: not a package, its modules are not expected
    (tmp_path / "capacity" / "notes" / "draft.py").write_text("")
    assert sorted(expected_files(tmp_path)) == [
        "lacapacity/__init__.py",
        "lacapacity/kernels/README.md",
        "lacapacity/kernels/__init__.py",
        "lacapacity/plots/__init__.py",
        "lacapacity/plots/extra/__init__.py",
        "lacapacity/plots/extra/mod.py",
        "lacapacity/py.typed",
        "lacapacity/studies/__init__.py",
        "lacapacity/tasks/__init__.py",
        "lacapacity/tasks/recall/__init__.py",
        "lacapacity/tasks/recall/mod.py",
    ]


# ---------------------------------------------------------------- the built distributions


@pytest.mark.slow
def test_the_wheel_carries_every_package_module_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    lost = missing(names)
    assert not lost, f"not in {wheel.name} (left out by setup.py or package-data in pyproject.toml): {lost}"
    assert not {n for n in names if n.split("/")[0] in ("kernels", "plots", "studies", "tests")}, "top-level names"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


@pytest.mark.slow
def test_twine_accepts_the_sdist_and_the_wheel(dist):
    files = sorted(str(p) for p in dist.iterdir())
    assert len(files) == 2, files
    out = _run([sys.executable, "-m", "twine", "check", "--strict", *files], timeout=120)
    assert out.stdout.count("PASSED") == 2, out.stdout


def _required(wheel: Path) -> list[Distribution]:
    """The distributions the wheel requires, and theirs, as this environment has them (markers evaluated here, no
    extras of ``capacity`` itself); fails where this environment lacks one or holds a version the requirement
    refuses."""
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = (n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        wanted = email.parser.BytesParser().parsebytes(zf.read(meta)).get_all("Requires-Dist") or []
    todo = [(Requirement(r), {""}) for r in wanted]
    found: dict[str, tuple[Distribution, set[str]]] = {}
    while todo:
        req, extras_of_parent = todo.pop()
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in extras_of_parent):
            continue
        name, extras = canonicalize_name(req.name), {"", *req.extras}
        dist, seen = found.get(name) or (metadata.distribution(req.name), set())
        assert req.specifier.contains(dist.version, prereleases=True), f"{req} but this environment has {dist.version}"
        if extras <= seen:
            continue
        found[name] = (dist, seen | extras)
        todo += [(Requirement(r), extras) for r in dist.requires or []]
    return [dist for dist, _ in found.values()]


def _link_into(site: Path, dists: list[Distribution]) -> int:
    """Link every file the distributions installed under their site-packages folder (their RECORD, byte-compiled
    files included) into ``site``: a hard link where the file system allows one, else a symbolic link. Returns the
    number of files."""
    count = 0
    for dist in dists:
        for rel in dist.files or []:
            src = Path(dist.locate_file(rel))
            if rel.parts[0] == ".." or not src.is_file():  # scripts in bin/; a RECORD entry never written
                continue
            dest = site / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, dest)
            except OSError:
                os.symlink(src, dest)
            count += 1
    return count


@pytest.mark.slow
def test_the_wheel_alone_runs_outside_the_source_tree(wheel, tmp_path_factory):
    base = tmp_path_factory.mktemp("installed")
    venv, work = base / "venv", base / "work"
    assert ROOT not in venv.parents and ROOT not in work.parents, "the environment must lie outside the source tree"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    try:
        _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], timeout=300)
        py, exe = venv / "bin" / "python", venv / "bin" / "capacity"
        site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
        # the dependencies are linked from this environment rather than unpacked again by pip (torch alone took 34 s
        # of CPU time to install, 2026-12-03, the 2-core VM); only what the wheel requires, so an import the wheel
        # does not declare fails here as it would for a user
        assert _link_into(site, _required(wheel)) > 1000
        pip = [sys.executable, "-m", "pip", "--python", str(py)]
        index = base / "index"  # a local package index holding the wheel alone: installed by name, as from PyPI
        index.mkdir()
        shutil.copy2(wheel, index)
        by_name = ["install", "-q", "--isolated", "--no-index", "--find-links", str(index), "--no-deps", DISTRIBUTION]
        _run([*pip, *by_name], timeout=300, env=env, cwd=work)
        _run([*pip, "check"], env=env, cwd=work)  # every installed distribution's requirements are met
        listed = _run([str(exe), "list"], env=env, cwd=work).stdout
        assert "capacity-vs-d" in listed and "linear" in listed and "gaussian" in listed
        assert "--only" in _run([str(exe), "check", "--help"], env=env, cwd=work).stdout
        out = work / "results"
        cmd = [str(exe), "run", "capacity-vs-d", "--set", "d=16", "--set", "seed=0", "--out", str(out)]
        _run(cmd, env=env, cwd=work, timeout=600)
        path = out / "capacity-vs-d.nc"
        assert path.is_file() and any((out / "figures").glob("*.png"))
        read = (
            "import importlib.metadata, json, xarray as xr, lacapacity, lacapacity.kernels, lacapacity.plots, lacapacity.studies as s\n"
            f"ds = xr.open_dataset({str(path)!r})\n"
            "print(json.dumps({'version': ds.attrs['capacity_version'], 'package': lacapacity.__version__,"
            " 'd': ds.d.values.tolist(), 'seed': ds.seed.values.tolist(), 'mse': bool(ds.mse.notnull().all()),"
            f" 'studies': s.__file__, 'dist': importlib.metadata.version({DISTRIBUTION!r}),"
            f" 'tops': sorted({{f.parts[0] for f in importlib.metadata.files({DISTRIBUTION!r})}} - {{'..'}})}}))"
        )
        opened = json.loads(_run([str(py), "-c", read], env=env, cwd=work).stdout)
        where = opened.pop("studies")
        assert Path(where).is_relative_to(venv), where  # the installed copy, not the tree
        # the distribution installed by that name is this package, and the module lacapacity is the only one it installs
        # (beside its metadata; '..' is the command in bin/)
        import lacapacity

        assert opened.pop("dist") == lacapacity.__version__
        tops = [t for t in opened.pop("tops") if not t.endswith(".dist-info")]
        assert tops == ["lacapacity"], tops

        assert opened == {
            "version": lacapacity.__version__,
            "package": lacapacity.__version__,
            "d": [16],
            "seed": [0],
            "mse": True,
        }
    finally:
        shutil.rmtree(base, ignore_errors=True)
