"""``_validate.all_finite`` against ``torch.isfinite`` entry by entry: one NaN or infinity anywhere, in every floating
dtype, in tensors short and long enough for the vectorised reduction paths."""

import pytest
import torch

from lacapacity.base import _validate
from lacapacity.errors import CapacityError


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("shape", [(1,), (3, 7), (2, 1000, 33)])
def test_one_bad_entry_anywhere_is_found(dtype, shape):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(dtype)
    assert _validate.all_finite(x) is True
    flat = x.view(-1)
    for pos in {0, flat.numel() // 2, flat.numel() - 1}:
        for bad in (float("nan"), float("inf"), -float("inf")):
            y = x.clone()
            y.view(-1)[pos] = bad
            assert _validate.all_finite(y) is bool(torch.isfinite(y).all()) is False, (pos, bad)


def test_tensor_refuses_one_nan_in_a_view():
    x = torch.randn(4, 64, 16)
    x[3, 63, 15] = float("nan")
    with pytest.raises(CapacityError, match="keys contains NaN or inf"):
        _validate.tensor("keys", x[:, 1:], ndim=3)
    assert _validate.tensor("keys", x[:, :63], ndim=3) is not None  # the NaN is outside this view
