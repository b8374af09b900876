"""Shared by the sweep tests (no tests here): run the probes with one torch thread; a small grid.

These probes are tiny: a second intra-op thread only adds start-up cost and, on a shared
machine, stalls while the other thread waits for a core. Import the fixture to use it.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# a small grid of the default study: 8 cells (16 write passes), 48 points
SMALL = [
    "variant=linear,delta",
    "keys=gaussian,orthogonal",
    "d=16,32",
    "load=1/4,1,4",
    "seed=0,1",
]
