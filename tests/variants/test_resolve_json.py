"""``variants.resolve`` of a memory as a results file's JSON names it, ``{"name": ..., "params": {...}}``."""

import pytest

from lacapacity import CapacityError, variants


def test_a_json_spec_builds_the_memory_it_names():
    mem = variants.resolve({"name": "delta", "params": {"beta": 0.5}})
    assert variants.label(mem) == "delta(beta=0.5)"
    assert variants.label(variants.resolve({"name": "linear"})) == "linear"


def test_params_that_are_not_a_dict_are_one_line():
    with pytest.raises(CapacityError, match=r"a variant's params are a dict of name -> value, got \[0.5\]"):
        variants.resolve({"name": "delta", "params": [0.5]})
