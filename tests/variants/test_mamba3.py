"""Mamba-3 (SISO): against a float64 recurrence in complex numbers written here from the paper's update
(relative RMS error < 1e-5 in float32), lam = 1 without rotation is the existing mamba2, its sizes and check_variant."""

import pytest
import torch
from memory_support import pairs, rel_rms, write_in_chunks

from lacapacity import check_variant, variants
from lacapacity.inputs import keys
from lacapacity.variants import precision


def _inputs(B=2, T=30, d=12, dv=6, seed=0):
    K, V = pairs(T, d, dv, B=B, seed=seed)
    return K, V


def _write(mem, K, V):
    return write_in_chunks(mem, K, V, (0, 1, 9, 10))


def _complex_reference(K, V, Q, dt, A, lam, omega):
    """h_t = e^(dt_t (-A + i w)) h_{t-1} + (1 - lam) dt_t e^(dt_t (-A + i w)) B_{t-1} x_{t-1} + lam dt_t B_t x_t with
    complex B = pairs of key channels, per pair frequency w; the read after n tokens Re(sum_pairs conj(C) h).
    Float64; the state kept in the frame of the last token, so that no clock is needed. Returns [B, m, dv]."""
    Bn, T, d = K.shape
    P = d // 2
    w = omega * 10000.0 ** (-torch.arange(P, dtype=torch.float64) / P)  # [P]
    kc = torch.complex(K[..., 0 : 2 * P : 2].double(), K[..., 1 : 2 * P : 2].double())  # [B, T, P]
    qc = torch.complex(Q[..., 0 : 2 * P : 2].double(), Q[..., 1 : 2 * P : 2].double())
    x = V.double()
    h = torch.zeros(Bn, P, V.shape[2], dtype=torch.complex128)
    tail = torch.zeros(Bn, d - 2 * P, V.shape[2], dtype=torch.float64)  # an odd last channel: real, not turned
    for t in range(T):
        step = dt[:, t].double()  # [B]
        trans = torch.exp(step[:, None] * torch.complex(torch.full((P,), -A, dtype=torch.float64), w))  # [B, P]
        h = trans[:, :, None] * h + lam * step[:, None, None] * kc[:, t, :, None] * x[:, t, None, :]
        tail = torch.exp(-A * step)[:, None, None] * tail + lam * step[:, None, None] * (
            K[:, t, 2 * P :, None].double() * x[:, t, None, :]
        )
        if t > 0:
            h = h + (1 - lam) * (step[:, None, None] * trans[:, :, None]) * kc[:, t - 1, :, None] * x[:, t - 1, None, :]
            tail = tail + (1 - lam) * (step * torch.exp(-A * step))[:, None, None] * (
                K[:, t - 1, 2 * P :, None].double() * x[:, t - 1, None, :]
            )
    read = torch.einsum("bmp,bpv->bmv", qc.conj(), h).real + Q[..., 2 * P :].double() @ tail
    return read


@pytest.mark.parametrize("d", [12, 9, 96])
@pytest.mark.parametrize("lam,omega", [(0.5, 1.0), (0.3, 40.0), (1.0, 25.0)])
def test_mamba3_matches_a_complex_float64_recurrence(d, lam, omega):
    K, V = _inputs(d=d, seed=2)
    Q = torch.cat([K[:, :4], keys.make("gaussian", 4, d, batch=2, seed=9)], 1)
    mem = variants.get("mamba3", A=2.0, dt=0.05, w_std=1.0, lam=lam, omega=omega, seed=3)
    st = _write(mem, K, V)
    ours = mem.read(st, Q)
    want = _complex_reference(K, V, Q, mem.steps(K), 2.0, lam, omega)
    assert rel_rms(ours, want) < 1e-5
    assert abs(float(st.clock[0]) - float(mem.steps(K)[0].double().sum())) < 1e-9  # the clock is the elapsed time


def test_mamba3_with_lam_one_and_no_rotation_is_mamba2():
    K, V = _inputs(seed=4)
    m3 = variants.get("mamba3", A=1.5, dt=0.1, lam=1.0, omega=0.0, seed=2)
    m2 = variants.get("mamba2", A=1.5, dt=0.1, seed=2, backend="torch")
    s3, s2 = _write(m3, K, V).matrix, m2.write(m2.init_state(2, 12, 6), K, V)
    assert rel_rms(s3, s2) < 1e-6
    assert rel_rms(_write(variants.get("mamba3", A=1.5, dt=0.1, lam=0.5, omega=0.0, seed=2), K, V).matrix, s2) > 1e-2


def test_the_rotation_turns_an_old_key_away_and_leaves_the_newest_in_place():
    """With a large omega a query equal to an old key reads little of it; the newest key, turned by the same clock as
    the read, reads back as without rotation. One pair is written with a value, the others with zero values."""
    K, _ = _inputs(B=1, T=20, d=32, dv=8, seed=6)
    v = torch.randn(1, 1, 8, generator=torch.Generator().manual_seed(0))
    flat, turned = (variants.get("mamba3", dt=0.5, A=0.01, lam=1.0, omega=o, w_std=0.0) for o in (0.0, 30.0))
    for pos in (0, 19):
        V = torch.zeros(1, 20, 8)
        V[:, pos] = v
        a, b = (m.read(_write(m, K, V), K[:, pos : pos + 1]) for m in (flat, turned))
        if pos == 19:
            assert rel_rms(b, a) < 1e-6
        else:
            assert b.norm() < 0.3 * a.norm()


@pytest.mark.parametrize("lam,extra", [(0.5, 12 + 6), (1.0, 0)])
def test_sizes_and_bytes(lam, extra):
    mem = variants.get("mamba3", lam=lam)
    K, V = _inputs()
    st = _write(mem, K, V)
    assert mem.state_numel(12, 6) == 72 + extra
    assert precision.state_bytes(mem, 12, 6, "bfloat16") == (72 + extra) * 2
    assert st.clock.dtype == torch.float64  # the clock is bookkeeping: never rounded, not counted


@pytest.mark.parametrize("params", [{}, {"lam": 1.0}])
def test_mamba3_passes_check_variant(params):
    report = check_variant(variants.get("mamba3", **params), d=8)
    assert report.passed, str(report)


def test_bad_parameters_are_one_line_errors():
    for kw, match in [({"lam": 1.5}, "lam must be"), ({"omega": -1.0}, "omega must be"), ({"A": 0}, "A must be")]:
        with pytest.raises(ValueError, match=match):
            variants.get("mamba3", **kw)
    again = variants.get("mamba3", **variants.get("mamba3", lam=0.25, omega=3.0).params)
    assert again.params["lam"] == 0.25 and again.params["omega"] == 3.0
