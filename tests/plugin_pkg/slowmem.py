"""A linear memory that sleeps on every write: runs that last long enough to be killed part-way (tests/cli/test_faults.py)."""

import time

import torch

from capacity.variants import Declares


class SlowMemory:
    name = "slow"
    declares = Declares(additive=True, linear_read=True)

    def __init__(self, sleep: float = 0.3):
        self.sleep = float(sleep)

    @property
    def params(self):
        return {"sleep": self.sleep}

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv, device=device)

    def write(self, state, k, v):
        time.sleep(self.sleep)
        return state + k.float().transpose(1, 2) @ v.float()

    def read(self, state, q):
        return q.float() @ state

    def state_numel(self, d, dv):
        return d * dv
