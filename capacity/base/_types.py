"""Type aliases of the public signatures, for the type check of the public modules (docs/testing.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import torch

# one seed for the whole batch (a whole number in [0, 2^63 - 1] or a CPU torch.Generator), or one per batch item
Seed: TypeAlias = int | np.integer | torch.Generator | Sequence[int | np.integer | torch.Generator] | np.ndarray
# a torch device or its name ("cpu", "cuda:0"); None: the default of the function taking it
Device: TypeAlias = str | torch.device | None
