"""Shared test settings: a fixed thread count keeps timings predictable on small CI machines."""

import torch

torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
