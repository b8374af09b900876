"""A linear memory that sleeps on every write: runs that last long enough to be killed part-way (tests/cli/test_faults.py).

The environment variable SLOWMEM_HOLD, a file path: while it does not exist, a write of the measurement at d = 48
waits (a run that cannot end before the test has done what it does mid-run, however fast the machine: the tests wait
for an event, not a time). The run's estimate times writes of at most 15 pairs before it starts
(``lacapacity.tasks.probe.write_seconds``): those pass, the probe's writes at d = 48 are longer. Not a parameter: the file would then be part of the reuse key (files named in parameters are).
"""

import os
import time

import torch

from lacapacity.variants import Declares


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
        hold = os.environ.get("SLOWMEM_HOLD")
        while hold and k.shape[-1] == 48 and k.shape[1] > 15 and not os.path.exists(hold):
            time.sleep(0.05)
        return state + k.float().transpose(1, 2) @ v.float()

    def read(self, state, q):
        return q.float() @ state

    def state_numel(self, d, dv):
        return d * dv
