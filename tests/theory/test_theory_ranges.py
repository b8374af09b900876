"""Closed forms warn (CapacityWarning) outside the range their accuracy is stated for, and stay silent inside it."""

import warnings

import pytest

from lacapacity import theory
from lacapacity.errors import CapacityWarning


@pytest.mark.parametrize(
    "outside,inside,match",
    [
        (lambda: theory.elu1_feature_error(8, 8), lambda: theory.elu1_feature_error(8, 16), "d below 16"),
        (
            lambda: theory.stall_fraction(8 * 256, 16, 16, "float8_e4m3fn"),  # u^2 n = 8
            lambda: theory.stall_fraction(256, 16, 16, "float8_e4m3fn"),  # u^2 n = 1
            "past the measured range",
        ),
        (
            lambda: theory.delta_rounding_floor(16, 16, "float8_e4m3fn", alpha=0.95),
            lambda: theory.delta_rounding_floor(16, 16, "bfloat16", alpha=0.95),
            "outside the measured range",
        ),
    ],
)
def test_forms_warn_outside_their_stated_range(outside, inside, match):
    with pytest.warns(CapacityWarning, match=match):
        outside()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inside()
