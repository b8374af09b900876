"""The docstring examples are part of the documentation: every module of the package is searched and each runs."""

import doctest
import importlib
import pkgutil

import pytest

import capacity

SKIP = {
    "capacity.cli": "the command line, tested by the CLI tests",
    "capacity.kernels.triton_update": "Triton kernels: tested against the oracle in test_kernels.py",
    "capacity.kernels._launch": "Triton launch glue: tested in test_kernels.py",
}


def _modules() -> list[str]:
    names = ["capacity"]
    for info in pkgutil.walk_packages(capacity.__path__, "capacity."):
        names.append(info.name)
    for pkg in ("capacity.kernels", "capacity.plots", "capacity.studies"):
        mod = importlib.import_module(pkg)
        names += [pkg] + [i.name for i in pkgutil.walk_packages(mod.__path__, pkg + ".")]
    return sorted(set(names) - set(SKIP))


MODULES = _modules()


def test_every_module_is_searched():
    assert {
        "capacity.sweep.runner",
        "capacity.base.labels",
        "capacity.kernels.chunked",
        "capacity.plots.render",
        "capacity.studies",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
