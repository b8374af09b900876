"""The docstring examples are part of the documentation: they must run."""

import doctest
import importlib

import pytest

MODULES = ["capacity", "capacity.keys", "capacity.values", "capacity.theory", "capacity.probe", "capacity.decode", "capacity.metrics", "capacity.variants", "capacity.kernels"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
