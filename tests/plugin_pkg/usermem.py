"""A researcher's own memory, registered nowhere: the plug-in tests load it by import path only.

A Hebbian memory read with a scalar gain c: S = S + k^T v, r = c q S (c = 1 is the linear memory).
"""

import torch

from lacapacity.variants import Declares


class GainMemory:
    name = "gain-memory"
    declares = Declares(additive=False, linear_read=True)

    def __init__(self, c: float = 1.0):
        self.c = float(c)

    @property
    def params(self):
        return {"c": self.c}

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv, device=device)  # float32 [B, d, dv]

    def write(self, state, k, v):
        return state + k.float().transpose(1, 2) @ v.float()  # S += K^T V

    def read(self, state, q):
        return self.c * (q.float() @ state)  # [B, m, dv]

    def state_numel(self, d, dv):
        return d * dv
