"""Shared by the sweep tests (no tests here): run the probes with one torch thread.

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
