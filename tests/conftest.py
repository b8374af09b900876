"""Shared test settings.

A fixed thread count keeps timings predictable on small CI machines. Under pytest-xdist (the README's
``-n 2``) each worker already has a core of its own: one torch thread per worker, since two threads per
worker on two cores would make every small matmul wait on the other worker's threads (measured: a
[54, 16] x [16, 54] product takes 0.01 ms on one thread, 0.6 ms on two with the other core busy).
"""

import os

import torch

torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(2, torch.get_num_threads())))
