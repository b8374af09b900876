"""Resumable parameter sweeps into one xarray Dataset, on one machine or a Dask cluster.

A study (``capacity.sweep.Study``) is a grid over variants, key families, feature maps, d,
load = n/d (or n), seeds, dtypes and dv, plus probe settings. ``run`` measures it group by
group (one batched probe per variant, key family and d, all loads and seeds at once),
persists each finished group, and saves the combined Dataset (docs/results-schema.md) as
``<out>/<study>.nc``. Running it again resumes. ``compare`` measures several memories (yours
included, as objects or import paths) on the same keys and values. Named studies are in
``capacity.studies``.

>>> from capacity import studies, sweep
>>> study = studies.get("capacity-vs-d").with_overrides(["d=16", "load=1/2,1,2", "seed=0,1", "variant=linear", "keys=gaussian"])
>>> import tempfile; out = tempfile.mkdtemp()
>>> res = sweep.run(study, out=out, device="cpu", progress=False)
>>> dict(res.dataset.mse.sizes)
{'variant': 1, 'key_family': 1, 'd': 1, 'load': 3, 'seed': 2}
>>> sweep.run(study, out=out, device="cpu", progress=False).reused      # everything on disk already
1
"""

from capacity.executors import EXECUTORS
from capacity.sweep.config import Grid, Probe, Spec, Study
from capacity.sweep.runner import RunResult, compare, run

__all__ = ["Grid", "Probe", "Spec", "Study", "run", "compare", "RunResult", "EXECUTORS"]
