"""Every study's results at two commits, compared variable by variable: does a redesign change a result?

    python scripts/same_results.py BASE [HEAD] [--full] [--study NAME ...] [--keep DIR]

Runs ``capacity run STUDY --no-figures --executor serial`` for every built-in study with the code of commit BASE
and with the code of HEAD (default: this working tree), then compares each study's ``.nc``: the same variables and
coordinates, each with the same dtype, shape and bytes (NaN where NaN), and the same attrs. By default each study
runs at small settings (``SMALL``: one seed, its smallest d, a few points on its curve) so that all of them take a
few minutes on a 2-core machine; ``--full`` runs the studies' own settings. Prints one line per study and a total;
exits 1 when anything differs. Timings (``TIMED``) are compared by dtype, shape and attrs only.

A commit's code is checked out with ``git worktree`` in a temporary folder and imported from there (its
``capacity/``, and ``kernels/``, ``plots/``, ``studies/`` as ``lacapacity.kernels`` ... as pyproject.toml maps them),
with this environment's packages. Run-dependent attrs (``RUN_ATTRS``: times, versions, commits) are not compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import xarray as xr

ROOT = Path(__file__).resolve().parents[1]

# one seed, the smallest d and a short curve: settings at which every study runs in seconds (the study's own grid
# otherwise); the variants, key families and task settings stay the study's own
SMALL: dict[str, list[str]] = {
    "bill": ["d=64", "n=16,64,256", "repeats=2"],
    "capacity-vs-d": ["d=16,32", "seed=0,1", "load=1/4,1,4"],
    "feature-maps": ["d=16", "seed=0", "load=1/4,1,4"],
    "forgetting": ["d=16", "seed=0,1"],
    "frontier": ["d=16,32", "seed=0", "load=1/4,1,4"],
    "heads": ["d=64", "seed=0", "load=1/8,1,4"],
    "interference-bound": ["d=32", "seed=0", "load=1/2,1,4"],
    "learned-keys": ["d=32", "seed=0", "load=1/2,2"],
    "log-linear": ["d=32,160", "seed=0", "n=16,24,32"],
    "model": [],
    "mqar": ["seed=0,1", "n=16,64"],
    "needle": ["d=32", "dv=64", "n=64,128", "seed=0"],
    "orthogonality": ["seed=0", "load=1/2,2"],
    "precision": ["n=16,256", "seed=0"],
    "pretrained-keys": ["seed=0", "load=1/2,2"],
    "trained": ["n=4,8", "seed=0", "lr=0.01", "steps=20", "learned_steps=10", "test=16"],
    "variants": ["d=32", "seed=0,1", "load=1/4,1,4"],
}
TIMED = ("decode_seconds",)  # wall-clock measurements: their dtype and shape are compared, not their values
RUN_ATTRS = ("created", "version", "commit", "git", "host", "seconds", "elapsed", "provenance", "torch", "python")

# imports a commit's code from its checkout: capacity/ under the import name that commit gives it (lacapacity, or
# capacity before the rename; README, "Names") and the folders pyproject.toml installs inside it
_BOOT = """
import importlib, importlib.abc, importlib.util, sys
root = sys.argv.pop(1)
with open(f"{root}/pyproject.toml", encoding="utf-8") as f:
    pkg = "lacapacity" if '"lacapacity" = "capacity"' in f.read() else "capacity"
folders = {pkg: "capacity", f"{pkg}.kernels": "kernels", f"{pkg}.plots": "plots", f"{pkg}.studies": "studies"}
class Checkout(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in folders:
            where = f"{root}/{folders[name]}"
            return importlib.util.spec_from_file_location(name, f"{where}/__init__.py", submodule_search_locations=[where])
        return None
sys.meta_path.insert(0, Checkout())
"""
_RUN = "sys.exit(importlib.import_module(f'{pkg}.cli').main(sys.argv[1:]))\n"


def studies(tree: Path) -> list[str]:
    """The built-in studies' names, as the checkout at ``tree`` lists them."""
    code = _BOOT + "print(' '.join(importlib.import_module(f'{pkg}.studies').available()))\n"
    out = subprocess.run([sys.executable, "-c", code, str(tree)], capture_output=True, text=True, check=True, cwd="/")
    return out.stdout.split()


def run(tree: Path, study: str, out: Path, full: bool) -> Path:
    """``capacity run study`` with the code at ``tree``, its Dataset written under ``out``."""
    sets = [] if full else [x for s in SMALL.get(study, []) for x in ("--set", s)]
    cmd = [sys.executable, "-c", _BOOT + _RUN, str(tree), "run", study, "--out", str(out), "--no-figures"]
    cmd += ["--executor", "serial", "--device", "cpu", "--quiet", *sets]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    out.mkdir(parents=True, exist_ok=True)  # the working folder too: a checkout's top folder would shadow packages
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out)
    if done.returncode:
        raise RuntimeError(f"{study} at {tree}: {done.stderr.strip().splitlines()[-1:]}")
    return out / f"{study}.nc"


def same(a: xr.DataArray, b: xr.DataArray) -> str | None:
    """None when ``a`` and ``b`` hold the same bytes (dtype, dims, shape, values with NaN where NaN, attrs), else
    what differs."""
    if a.dims != b.dims or a.shape != b.shape or a.dtype != b.dtype:
        return f"{a.dtype}{a.dims}{a.shape} vs {b.dtype}{b.dims}{b.shape}"
    x, y = np.asarray(a.values), np.asarray(b.values)
    if a.name in TIMED:
        pass
    elif x.dtype.kind in "fc":
        equal = bool(np.array_equal(x.view(np.uint8), y.view(np.uint8))) if x.size else True
        if not equal:
            diff = np.nanmax(np.abs(x.astype(float) - y.astype(float))) if x.size else 0.0
            return f"values differ (max |diff| {diff:.3g})"
    elif not np.array_equal(x, y):
        return "values differ"
    attrs = lambda da: {k: json.dumps(v, default=str, sort_keys=True) for k, v in da.attrs.items()}
    if attrs(a) != attrs(b):
        return f"attrs differ: {sorted(set(attrs(a).items()) ^ set(attrs(b).items()))[:2]}"
    return None


def compare(base: Path, head: Path) -> tuple[int, list[str]]:
    """How many variables and coordinates the two files hold in common, and what differs between them."""
    with xr.open_dataset(base) as a, xr.open_dataset(head) as b:
        a.load(), b.load()
        faults = [f"only at base: {k}" for k in sorted(set(a.variables) - set(b.variables))]
        faults += [f"only at head: {k}" for k in sorted(set(b.variables) - set(a.variables))]
        common = sorted(set(a.variables) & set(b.variables))
        faults += [f"{k}: {why}" for k in common if (why := same(a[k], b[k]))]
        kept = lambda ds: {k: v for k, v in ds.attrs.items() if not any(r in k for r in RUN_ATTRS)}
        if json.dumps(kept(a), default=str, sort_keys=True) != json.dumps(kept(b), default=str, sort_keys=True):
            faults.append("Dataset attrs differ")
        return len(common), faults


def checkout(commit: str, into: Path) -> Path:
    """The code of ``commit``, checked out (detached) in ``into``."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(into), commit], check=True)
    return into


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("base", help="the commit before the change")
    p.add_argument("head", nargs="?", help="the commit after it (default: this working tree)")
    p.add_argument("--full", action="store_true", help="the studies' own settings (default: SMALL)")
    p.add_argument("--study", action="append", help="only these studies (default: every built-in study)")
    p.add_argument("--keep", type=Path, help="keep both runs' .nc files under this folder")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="same-results-"))
    trees = {"base": checkout(args.base, work / "base")}
    trees["head"] = checkout(args.head, work / "head") if args.head else ROOT
    try:
        names = args.study or studies(trees["head"])
        out = (args.keep or work / "out").resolve()
        files = variables = 0
        differ: dict[str, list[str]] = {}
        for name in names:
            try:
                got = {side: run(tree, name, out / side, args.full) for side, tree in trees.items()}
            except RuntimeError as e:
                differ[name] = [f"not run: {e}"]
                print(f"{name}: not run: {e}", flush=True)
                continue
            n, faults = compare(got["base"], got["head"])
            files, variables = files + 1, variables + n
            if faults:
                differ[name] = faults
            print(
                f"{name}: {n} variables and coordinates, {'identical' if not faults else '; '.join(faults)}", flush=True
            )
        print(f"{files} studies compared ({variables} variables and coordinates): {len(differ)} differ or not run")
        return 1 if differ else 0
    finally:
        for tree in trees.values():
            if tree != ROOT:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
