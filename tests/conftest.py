"""Shared test settings.

A fixed thread count keeps timings predictable on small CI machines. Under pytest-xdist (the README's
``-n 2``) each worker already has a core of its own: one torch thread per worker, since two threads per
worker on two cores would make every small matmul wait on the other worker's threads (measured: a
[54, 16] x [16, 54] product takes 0.01 ms on one thread, 0.6 ms on two with the other core busy).
"""

import os

import torch

torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else max(1, min(2, torch.get_num_threads())))


# What a test needs from the machine, declared once: a test marked with one of these is skipped, with the reason,
# where the machine lacks it (pyproject.toml registers the markers).
import importlib.util  # noqa: E402

import pytest  # noqa: E402

_NEEDS = {
    "requires_cuda": (lambda: torch.cuda.is_available(), "no CUDA device: compiled-kernel tests need a GPU"),
    "requires_triton": (lambda: importlib.util.find_spec("triton") is not None, "triton is not installed"),
    "requires_fla": (
        lambda: importlib.util.find_spec("fla") is not None and importlib.util.find_spec("einops") is not None,
        "fla-core is not installed (pip install -e '.[test]' installs fla-core==0.6.0 and einops)",
    ),
}


def pytest_collection_modifyitems(config, items):
    have = {}
    for item in items:
        for name, (check, reason) in _NEEDS.items():
            if item.get_closest_marker(name) is not None:
                if name not in have:
                    have[name] = check()
                if not have[name]:
                    item.add_marker(pytest.mark.skip(reason=reason))
