"""The five ways a rerun used to return old numbers (issue 17), tried through the public API only.

Run it with any installed version of capacity: each line says whether the rerun returned the numbers a fresh run
gives ("correct") or the old ones ("STALE"). tests/sweep/test_reuse.py holds the current code to "correct" on all five.

    python docs/scripts/stale_paths.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

import lacapacity
from lacapacity import sweep, variants
from lacapacity.sweep import Grid, Study, provenance

SMALL = dict(keys=("gaussian",), d=(16,), load=(0.5, 2.0), seed=(0, 1))
SCALED = """
    import torch
    from gainhelper import GAIN


    class Scaled:
        name = "scaled"

        def init_state(self, b, d, dv, *, device=None):
            return torch.zeros(b, d, dv, device=device)

        def write(self, s, k, v):
            return s + k.transpose(1, 2) @ v

        def read(self, s, q):
            return GAIN * (q @ s)

        def state_numel(self, d, dv):
            return d * dv
"""
NO_PARAMS = """
    import torch


    class NoParams:
        name = "noparams"

        def __init__(self, scale=1.0):
            self._scale = scale

        def init_state(self, b, d, dv, *, device=None):
            return torch.zeros(b, d, dv, device=device)

        def write(self, s, k, v):
            return s + k.transpose(1, 2) @ v

        def read(self, s, q):
            return self._scale * (q @ s)

        def state_numel(self, d, dv):
            return d * dv
"""
REGISTERS = """
    from lacapacity import variants
    from lacapacity.variants.linear import Linear


    class Scale(Linear):
        def read(self, state, q):
            return {c} * super().read(state, q)


    variants.register("scale", Scale, "a linear memory read with a gain")
"""


def write(folder: Path, name: str, text: str) -> None:
    """Write the user's module ``name`` and forget every module of the folder, as a new session would."""
    (folder / f"{name}.py").write_text(textwrap.dedent(text))
    for cached in folder.glob("__pycache__/*"):
        cached.unlink()
    for mod in [m for m, x in list(sys.modules.items()) if str(getattr(x, "__file__", "")).startswith(str(folder))]:
        sys.modules.pop(mod)


def run(out: Path, *memories, imports=()):
    study = Study("stale", "five stale paths", Grid(variant=memories, **SMALL))
    return sweep.run(study, out=out, device="cpu", executor="serial", progress=False, imports=imports)


def verdict(what: str, again, fresh) -> None:
    stale = not np.array_equal(again.dataset.mse.values, fresh.dataset.mse.values)
    print(f"{what:50s} reused={again.reused:3d} {'STALE (old numbers returned)' if stale else 'correct'}")


def package_hash():
    """The package's part of the key in this version (``fingerprint`` before the reuse-key rewrite)."""
    for name in ("package", "_package_sources"):
        fn = getattr(provenance, name, None)
        if fn is not None:
            fn.cache_clear()
            return fn()
    raise SystemExit("this version of capacity has no package fingerprint")


def main() -> None:
    root = Path(tempfile.mkdtemp())
    user = root / "user"
    user.mkdir()
    sys.path.insert(0, str(user))
    try:
        write(user, "gainhelper", "GAIN = 1.0\n")
        write(user, "scaledmem", SCALED)
        run(root / "a", "scaledmem:Scaled")
        write(user, "gainhelper", "GAIN = 0.5\n")
        verdict("1. edited helper module", run(root / "a", "scaledmem:Scaled"), run(root / "a2", "scaledmem:Scaled"))

        write(user, "presets", "from lacapacity import variants\nSLOW = variants.get('delta', beta=0.3)\n")
        run(root / "b", "presets:SLOW")
        write(user, "presets", "from lacapacity import variants\nSLOW = variants.get('delta', beta=0.6)\n")
        verdict(
            "2. edited module holding a memory object",
            run(root / "b", "presets:SLOW"),
            run(root / "b2", "presets:SLOW"),
        )

        write(user, "noparams", NO_PARAMS)
        cls = __import__("noparams").NoParams
        run(root / "c", cls(1.0))
        verdict(
            "3. object built with other constructor arguments", run(root / "c", cls(0.5)), run(root / "c2", cls(0.5))
        )

        write(user, "regmem", REGISTERS.format(c=1.0))
        run(root / "d", "scale", imports=["regmem"])
        write(user, "regmem", REGISTERS.format(c=0.5))
        variants._REGISTRY.pop("scale", None)
        again = run(root / "d", "scale", imports=["regmem"])
        variants._REGISTRY.pop("scale", None)
        sys.modules.pop("regmem")
        verdict("4. edited --import module", again, run(root / "d2", "scale", imports=["regmem"]))

        text = Path(lacapacity.__file__).parent / "data" / "pretrained_text.txt"
        original = text.read_bytes()
        before = package_hash()
        try:
            text.write_bytes(original + b" edited")
            after = package_hash()
        finally:
            text.write_bytes(original)
        print(
            f"{'5. edited package data file':50s} {'correct (key changes)' if before != after else 'STALE (key unchanged)'}"
        )
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
