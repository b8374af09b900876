"""The five stale paths of issue 17, through the public API only (works on the old and the new engine)."""
import sys, tempfile, textwrap, importlib, shutil
from pathlib import Path
import numpy as np
from capacity import sweep, variants, provenance
from capacity.sweep import Grid, Study

root = Path(tempfile.mkdtemp()); user = root / "user"; user.mkdir(); sys.path.insert(0, str(user))
SMALL = dict(keys=("gaussian",), d=(16,), load=(0.5, 2.0), seed=(0, 1))

def write(name, text):
    (user / f"{name}.py").write_text(textwrap.dedent(text))
    for m in [m for m, x in list(sys.modules.items()) if str(getattr(x, "__file__", "")).startswith(str(user))]:
        sys.modules.pop(m)
    for c in user.glob("__pycache__/*"): c.unlink()

def run(out, *mem, imports=()):
    s = Study("stale", "x", Grid(variant=mem, **SMALL))
    return sweep.run(s, out=out, device="cpu", executor="serial", progress=False, imports=imports)

def verdict(name, again, fresh):
    stale = not np.array_equal(again.dataset.mse.values, fresh.dataset.mse.values)
    print(f"{name:50s} reused={again.reused:3d} {'STALE (old numbers returned)' if stale else 'correct'}")

SCALED = """
    import torch
    from gainhelper import GAIN
    class Scaled:
        name = "scaled"
        def init_state(self, b, d, dv, *, device=None): return torch.zeros(b, d, dv, device=device)
        def write(self, s, k, v): return s + k.transpose(1, 2) @ v
        def read(self, s, q): return GAIN * (q @ s)
        def state_numel(self, d, dv): return d * dv
"""
# 1. helper module
write("gainhelper", "GAIN = 1.0\n"); write("scaledmem", SCALED)
run(root / "a", "scaledmem:Scaled"); write("gainhelper", "GAIN = 0.5\n")
verdict("1. edited helper module", run(root / "a", "scaledmem:Scaled"), run(root / "a_fresh", "scaledmem:Scaled"))
# 2. module holding a memory object
write("presets", "from capacity import variants\nSLOW = variants.get('delta', beta=0.3)\n")
run(root / "b", "presets:SLOW"); write("presets", "from capacity import variants\nSLOW = variants.get('delta', beta=0.6)\n")
verdict("2. edited module holding a memory object", run(root / "b", "presets:SLOW"), run(root / "b_fresh", "presets:SLOW"))
# 3. constructor arguments, no params
write("noparams", """
    import torch
    class NoParams:
        name = "noparams"
        def __init__(self, scale=1.0): self._scale = scale
        def init_state(self, b, d, dv, *, device=None): return torch.zeros(b, d, dv, device=device)
        def write(self, s, k, v): return s + k.transpose(1, 2) @ v
        def read(self, s, q): return self._scale * (q @ s)
        def state_numel(self, d, dv): return d * dv
""")
import noparams
run(root / "c", noparams.NoParams(1.0))
verdict("3. object built with other constructor arguments", run(root / "c", noparams.NoParams(0.5)), run(root / "c_fresh", noparams.NoParams(0.5)))
# 4. --import module
REG = """
    from capacity import variants
    from capacity.variants.linear import Linear
    class Scale(Linear):
        def read(self, state, q): return {c} * super().read(state, q)
    variants.register("scale", Scale, "gain")
"""
write("regmem", REG.format(c=1.0)); run(root / "d", "scale", imports=["regmem"])
write("regmem", REG.format(c=0.5)); variants._REGISTRY.pop("scale", None)
again = run(root / "d", "scale", imports=["regmem"]); variants._REGISTRY.pop("scale", None); sys.modules.pop("regmem")
verdict("4. edited --import module", again, run(root / "d_fresh", "scale", imports=["regmem"]))
# 5. data file of the package (pretrained text): is it part of the key?
import capacity
text = Path(capacity.__file__).parent / "data" / "pretrained_text.txt"
orig = text.read_bytes()
fp = getattr(provenance, "fingerprint", None) or provenance.package
if hasattr(fp, "cache_clear"): fp.cache_clear()
before = fp()
text.write_bytes(orig + b" edited")
if hasattr(fp, "cache_clear"): fp.cache_clear()
if hasattr(provenance, "_package_sources"): provenance._package_sources.cache_clear()
after = fp()
text.write_bytes(orig)
print(f"{'5. edited package data file':50s} {'correct (key changes)' if before != after else 'STALE (key unchanged)'}")
shutil.rmtree(root)
