"""The docstring examples are part of the documentation: every module of the package is searched and each runs."""

import doctest
import importlib
import pkgutil

import pytest

import lacapacity

SKIP = {
    "lacapacity.cli": "the command line, tested by the CLI tests",
    "lacapacity.kernels.triton_update": "Triton kernels: tested against the oracle in test_kernels.py",
    "lacapacity.kernels._launch": "Triton launch glue: tested in test_kernels.py",
}


def _modules() -> list[str]:
    names = ["lacapacity"]
    for info in pkgutil.walk_packages(lacapacity.__path__, "lacapacity."):
        names.append(info.name)
    for pkg in ("lacapacity.kernels", "lacapacity.plots", "lacapacity.studies"):
        mod = importlib.import_module(pkg)
        names += [pkg] + [i.name for i in pkgutil.walk_packages(mod.__path__, pkg + ".")]
    return sorted(set(names) - set(SKIP))


MODULES = _modules()


def test_every_module_is_searched():
    assert {
        "lacapacity.sweep.runner",
        "lacapacity.base.labels",
        "lacapacity.kernels.chunked",
        "lacapacity.plots.render",
        "lacapacity.studies",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
