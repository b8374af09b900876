"""Lattice's orthogonal update against a float64 loop written here (relative RMS error < 1e-5 in float32); a value
along a slot leaves it; check_variant."""

import pytest
import torch
from memory_support import rel_rms

from lacapacity import check_variant, variants
from lacapacity.inputs import keys, values


@pytest.mark.parametrize("d", [12, 96])
def test_lattice_matches_a_float64_loop(d):
    K = keys.make("gaussian", 30, d, batch=2, seed=d)
    V = values.make("gaussian", 30, 6, batch=2, seed=d + 1)
    mem = variants.get("lattice", beta=("uniform", 0.3, 1.0), seed=2)
    st = mem.init_state(2, d, 6)
    for a, b in ((0, 1), (1, 12), (12, 30)):
        st = mem.write(st, K[:, a:b], V[:, a:b])
    beta = mem._values("beta", 2, 0, 30, d, "cpu").double()
    S = torch.zeros(2, d, 6, dtype=torch.float64)
    for b in range(2):
        for t in range(30):
            k, v = K[b, t].double(), V[b, t].double()
            for i in range(d):  # slot by slot: the part of v orthogonal to s_i
                s = S[b, i]
                orth = v - (v @ s) / (s @ s) * s if s.norm() > 0 else v
                S[b, i] = s + beta[b, t] * k[i] * orth
    assert rel_rms(st.matrix, S) < 1e-5


def test_a_value_along_a_slot_leaves_it_and_check_variant_passes():
    mem = variants.get("lattice", normalize=False)
    S = mem.write(mem.init_state(1, 3, 4), torch.tensor([[[0.0, 1.0, 0.0]]]), torch.tensor([[[1.0, 2.0, 0.0, 0.0]]]))
    again = mem.write(S, torch.tensor([[[0.5, 1.0, 0.0]]]), torch.tensor([[[2.0, 4.0, 0.0, 0.0]]]))
    assert torch.allclose(again[0, 1], S[0, 1])  # slot 1 already holds that direction
    assert torch.allclose(again[0, 0], torch.tensor([1.0, 2.0, 0.0, 0.0]))  # slot 0 was empty: 0.5 v
    report = check_variant(variants.get("lattice"), d=8)
    assert report.passed, str(report)
