"""The base layer: what every other layer may use and nothing of the package's own above it (no torch at import).

``_validate`` (argument checks), ``_random`` (seeded generators), ``_files`` (durable writes), ``_progress``
(progress bars), ``labels`` (one label per spec: ``delta(beta=0.5)``), ``plugins`` (import paths and entry
points: the one registry mechanism), ``catalog`` (what ``capacity list`` prints, without importing torch) and
``_lazy`` (a package's submodules imported on first use, here and in ``lacapacity.inputs``).
"""

from lacapacity.base._lazy import submodules

__getattr__ = submodules(__name__)
