"""The base layer: what every other layer may use and nothing of the package's own above it (no torch at import).

``_validate`` (argument checks), ``_random`` (seeded generators), ``_files`` (durable writes), ``_progress``
(progress bars), ``labels`` (one label per spec: ``delta(beta=0.5)``), ``plugins`` (import paths and entry
points: the one registry mechanism) and ``catalog`` (what ``capacity list`` prints, without importing torch).
"""

import types


def __getattr__(name: str) -> types.ModuleType:
    """Submodules load on first use (``lacapacity.inputs.keys`` after ``import lacapacity``)."""
    from lacapacity.base._lazy import submodule

    return submodule(__name__, name)
