"""compare names the memories it was given that are the same memory at their parameters (lacapacity.variants.coincide),
and only those: held to the curves it measured."""

import subprocess
import sys

import numpy as np
import pytest

from lacapacity import sweep, variants
from lacapacity.errors import CapacityWarning
from lacapacity.variants import coincide

GIVEN = ["gated_delta", "kda", "gdn2", "delta", "gated_delta(alpha=1.0)", "gated_delta(alpha=0.9)", "linear"]


@pytest.mark.slow  # about 8 s
def test_compare_names_the_same_memories_and_their_curves_coincide(tmp_path):
    with pytest.warns(CapacityWarning) as got:
        res = sweep.compare(GIVEN, d=(8, 16), load=(0.5, 1, 2, 4), seeds=1, out=tmp_path, progress=False)
    lines = [str(w.message) for w in got if issubclass(w.category, CapacityWarning)]
    assert len(lines) == 2, lines
    assert lines[0].startswith("gated_delta, kda and gdn2 are the same memory at these parameters")
    assert lines[1].startswith("delta and gated_delta(alpha=1.0) are the same memory") and "d = 8 and 16" in lines[1]
    # the measured curves: each named group's agree to float32 rounding, every other pair's differ
    mse = res.dataset.mse.squeeze("key_family", drop=True).mean("seed")
    curve = {str(v): np.asarray(mse.sel(variant=v).values, float) for v in mse["variant"].values}
    named = [{"gated_delta", "kda", "gdn2"}, {"delta", "gated_delta(alpha=1.0)"}]
    for i, a in enumerate(GIVEN):
        for b in GIVEN[i + 1 :]:
            gap = float(np.max(np.abs(curve[a] - curve[b])) / np.max(np.abs(curve[a])))
            if any({a, b} <= group for group in named):
                assert gap < 1e-5, (a, b, gap)
            else:
                assert gap > 1e-3, (a, b, gap)


def test_same_is_empty_for_different_memories_and_skips_a_d_a_memory_refuses():
    mems = [(v, variants.resolve(v)) for v in ("delta", "delta(beta=0.5)", "linear", "decay(alpha=0.99)")]
    assert coincide.same(mems, [8]) == []
    linear = variants.resolve("linear")
    group, worst = coincide.same([("a", linear), ("b", variants.resolve("decay(alpha=1.0)"))], [8])[0]
    assert group == ["a", "b"] and worst <= coincide.TOL

    class Sixteen:  # the linear memory, declared to take d = 16 only: not probed at d = 8
        name = "sixteen"
        declares = variants.Declares(dims=(16,))
        init_state, write, read, state_numel = linear.init_state, linear.write, linear.read, linear.state_numel

    assert coincide.same([("linear", linear), ("sixteen", Sixteen())], [8]) == []
    assert coincide.same([("linear", linear), ("sixteen", Sixteen())], [16])[0][0] == ["linear", "sixteen"]


@pytest.mark.slow  # about 12 s: a process
def test_the_command_line_says_it_in_one_line(tmp_path):
    args = ["gated_delta", "kda", "--d", "8", "--load", "1", "--seeds", "1", "--out", str(tmp_path), "--no-figures"]
    proc = subprocess.run(
        [sys.executable, "-m", "lacapacity.cli", "compare", *args], capture_output=True, text=True, check=True
    )
    said = [line for line in proc.stderr.splitlines() if "the same memory" in line]
    assert said == [line for line in said if line.startswith("capacity: warning: gated_delta and kda are the same")]
    assert len(said) == 1
