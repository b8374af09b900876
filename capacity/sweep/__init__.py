"""Resumable parameter sweeps into one xarray Dataset, on one machine or a Dask cluster.

A study (``lacapacity.sweep.Study``) is a grid over variants, key families, feature maps, d,
load = n/d (or n), seeds, dtypes and dv, plus probe settings. ``run`` measures the points not
yet stored (one batched write pass per cell: variant, key family, d, ..., for its seeds and
loads), persists each pass, and saves the combined Dataset (docs/results-schema.md) as
``<out>/<study>.nc``. Running it again resumes; adding a memory, a seed, a d or a load
measures only what is new (``lacapacity.sweep.plan.Plan.identity`` says what decides reuse).
``compare`` measures several memories (yours included, as objects or import paths) on the same
keys and values. Named studies are in ``lacapacity.studies``.

>>> from lacapacity import studies, sweep
>>> study = studies.get("capacity-vs-d").with_overrides(["d=16", "load=1/2,1,2", "seed=0,1", "variant=linear", "keys=gaussian"])
>>> import tempfile; out = tempfile.mkdtemp()
>>> res = sweep.run(study, out=out, device="cpu", progress=False)
>>> dict(res.dataset.mse.sizes)
{'variant': 1, 'key_family': 1, 'd': 1, 'load': 3, 'seed': 2}
>>> sweep.run(study, out=out, device="cpu", progress=False).reused      # every point is on disk already
6
"""

from lacapacity.base.labels import Spec
from lacapacity.sweep.config import Grid, Study
from lacapacity.sweep.executors import EXECUTORS
from lacapacity.sweep.runner import RunResult, compare, run
from lacapacity.tasks import Bill, Mqar, Needle, Recall

__all__ = ["Grid", "Spec", "Study", "Recall", "Mqar", "Needle", "Bill", "run", "compare", "RunResult", "EXECUTORS"]
