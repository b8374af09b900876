"""Resumable parameter sweeps into one xarray Dataset, on one machine or a Dask cluster.

A study (``capacity.sweep.Study``) is a grid over variants, key families, feature maps, d,
load = n/d (or n), seeds, dtypes and dv, plus probe settings. ``run`` measures it group by
group (one batched probe per variant, key family and d, all loads and seeds at once),
persists each finished group, and saves the combined Dataset (docs/results-schema.md) as
``<out>/<study>.nc``. Running it again resumes.

>>> from capacity import sweep
>>> study = sweep.get("capacity-vs-d").with_overrides(["d=16", "load=1/2,1,2", "seed=0,1", "variant=linear", "keys=gaussian"])
>>> import tempfile; out = tempfile.mkdtemp()
>>> res = sweep.run(study, out=out, device="cpu", progress=False)
>>> dict(res.dataset.mse.sizes)
{'variant': 1, 'key_family': 1, 'd': 1, 'load': 3, 'seed': 2}
>>> sweep.run(study, out=out, device="cpu", progress=False).reused      # everything on disk already
1
"""

from capacity.sweep.config import Grid, Probe, Spec, Study
from capacity.sweep.executors import EXECUTORS
from capacity.sweep.runner import RunResult, run

__all__ = ["Grid", "Probe", "Spec", "Study", "run", "RunResult", "EXECUTORS", "get", "studies"]


def studies() -> dict[str, str]:
    """The named studies (``capacity.studies``): name -> one-line description."""
    from capacity import studies as _studies

    return _studies.available()


def get(name: str) -> Study:
    """The named study's default configuration; an unknown name lists the known ones."""
    from capacity import studies as _studies

    return _studies.get(name)
