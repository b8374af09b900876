"""The inputs layer: what is written into a memory and how it is encoded.

``keys`` (key families with controlled orthogonality), ``values`` (value families), ``features`` (feature maps
phi), ``learned`` (keys optimised for low coherence) and ``pretrained`` (keys of a pretrained model's attention).
Imports only ``capacity.base``, ``capacity.theory`` and ``capacity.kernels``.
"""

from types import ModuleType


def __getattr__(name: str) -> ModuleType:
    """Submodules load on first use (``capacity.inputs.keys`` after ``import capacity``)."""
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
