"""The inputs layer: what is written into a memory and how it is encoded.

``keys`` (key families with controlled orthogonality), ``values`` (value families), ``features`` (feature maps
phi), ``pretrained`` (keys of a pretrained model's attention) and ``capture`` (a real model's inputs). The key
family ``learned`` (keys optimised through a memory's read) is of the tasks layer, ``lacapacity.tasks.learned``.
Imports only ``lacapacity.base``, ``lacapacity.theory`` and ``lacapacity.kernels``.
"""

from types import ModuleType


def __getattr__(name: str) -> ModuleType:
    """Submodules load on first use (``lacapacity.inputs.keys`` after ``import lacapacity``)."""
    import importlib

    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
