"""A pass's numbers are checked against the task's schema before they are stored: a task whose ``measure`` gives
the wrong variables, shapes or dtypes is refused in one line naming the task and the variable; a right one is cut
into points that are views of its arrays, each point the slice of its seed and n."""

import numpy as np
import pytest

from lacapacity.errors import CapacityError
from lacapacity.sweep.assemble import split
from lacapacity.tasks import Measured, Schema, Variable

SCHEMA = Schema(
    {"overwrite": [0.0, 0.5], "seed": [0, 1, 2]},
    {
        "accuracy": Variable(("overwrite", "seed"), {}),
        "count": Variable(("seed",), {}, dtype="int64"),
        "edges": Variable(("age",), {}),
    },
    extra={"age": [0, 4, 8]},
)


def _good(seeds=(2, 0), ns=(8, 4)):
    n = len(ns)
    acc = np.arange(n * 2 * len(seeds), dtype=float).reshape(n, 2, len(seeds))
    count = np.arange(n * len(seeds), dtype=np.int64).reshape(n, len(seeds))
    return Measured({"accuracy": acc, "count": count, "edges": np.ones((n, 3))}, {"feature_dim": 5})


def test_points_are_the_slices_of_their_seed_and_n():
    got = _good()
    points = split(got, SCHEMA, "toy", [2, 0], [8, 4])
    assert sorted(points) == [(0, 4), (0, 8), (2, 4), (2, 8)]
    # n in increasing order along the first axis, the seeds in the order given
    np.testing.assert_array_equal(points[0, 8]["accuracy"], got.values["accuracy"][1, :, 1])
    np.testing.assert_array_equal(points[2, 4]["accuracy"], got.values["accuracy"][0, :, 0])
    assert points[0, 4]["count"] == got.values["count"][0, 1] and points[0, 4]["count"].dtype == np.int64
    np.testing.assert_array_equal(points[2, 8]["edges"], np.ones(3))
    assert np.shares_memory(points[0, 8]["accuracy"], got.values["accuracy"])  # a view, not a copy


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda v: v.pop("edges"), "measure() gave accuracy, count; its schema declares accuracy, count, edges"),
        (lambda v: v.update(extra=np.ones(2)), "measure() gave accuracy, count, edges, extra; its schema declares"),
        (lambda v: v.update(count=v["count"].astype(float)), "gave count as float64 (2, 2); its schema declares int64"),
        (lambda v: v.update(accuracy=v["accuracy"][:, :1]), "gave accuracy as float64 (2, 1, 2); its schema declares"),
        (lambda v: v.update(edges=[1.0, 2.0]), "gave edges as list; its schema declares float64 (2, 3) over (n, age)"),
    ],
)
def test_a_pass_that_differs_from_its_schema_is_refused_in_one_line(change, message):
    got = _good()
    change(got.values)
    with pytest.raises(CapacityError, match="^task 'toy': ") as err:
        split(got, SCHEMA, "toy", [2, 0], [8, 4])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_dataset_is_not_a_pass():
    with pytest.raises(CapacityError, match="must return a lacapacity.tasks.Measured, got dict"):
        split({"accuracy": 1}, SCHEMA, "toy", [0], [4])
