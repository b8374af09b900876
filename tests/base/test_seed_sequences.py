"""A sequence of seeds is any sequence, as ``lacapacity.base._types.Seed`` says (``Sequence[int | ...]``): a ``range``
gives the same draws as the list of its ints. Found by the strict type check: ``seeds_for_batch`` took only lists,
tuples and arrays, and read ``range(2)`` as one seed (refused)."""

import pytest
import torch

import lacapacity
from lacapacity.base import _random


@pytest.mark.parametrize("make", [lacapacity.keys.make, lacapacity.values.make])
def test_a_range_of_seeds_draws_what_the_list_of_them_draws(make):
    a = make("gaussian", 5, 8, batch=3, seed=range(4, 7))
    b = make("gaussian", 5, 8, batch=3, seed=[4, 5, 6])
    assert a.shape == (3, 5, 8) and torch.equal(a, b)
    assert not torch.equal(a[0], a[1])  # one seed per item


def test_seeds_for_batch_reads_sequences_but_not_strings():
    assert _random.seeds_for_batch(range(2), 2) == [0, 1]
    assert _random.seeds_for_batch((3,), 1) == [3]
    assert _random.seeds_for_batch(7, 4) == [7]
    assert _random.seeds_for_batch("ab", 2) == ["ab"]  # one (bad) seed, refused by generator() as before
    with pytest.raises(lacapacity.CapacityError, match="seed must be a whole number"):
        lacapacity.keys.make("gaussian", 2, 4, seed="ab")
