"""Triton kernels against the reference (kernels/reference.py).

On the CPU the kernels run under Triton's interpreter (backend="triton" asks for it; the
environment is left alone, TRITON_INTERPRET stays unset). Each interpreted program costs
milliseconds, so these cases are sized to prove correctness: full shape coverage (d in
{16, 33, 64, 100, 128, 256}, dv != d, T not a multiple of the tile) for linear, delta and kda,
every mode at awkward shapes with every input dtype, with and without an initial state,
B = 1 and B = 1024. The tests marked ``gpu`` repeat the comparisons compiled on a CUDA device
(every mode at every shape, B up to 100 000, T up to 8192) and are skipped, with the reason,
where there is none (benchmarks/gpu_check.sh runs them on a GPU machine).

Tolerances (max abs error relative to the state's scale max |S|): float32 inputs 1e-5,
bfloat16/float16 inputs 1e-2.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

from lacapacity import kernels
from lacapacity.kernels import reference, triton_update

SHAPES = [(16, 24), (33, 40), (64, 100), (100, 64), (128, 20), (256, 48)]  # (d, dv), dv != d
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}
NAN = float("nan")


def make(mode, B, T, d, dv, dtype=torch.float32, *, seed=0, init=True, device="cpu"):
    """Inputs of one case: state float32 [B, d, dv], k [B, T, d], v [B, T, dv], and the mode's beta/gate alpha."""
    g = torch.Generator().manual_seed(seed)
    k = torch.randn(B, T, d, generator=g).to(dtype)
    v = torch.randn(B, T, dv, generator=g).to(dtype)
    state = torch.randn(B, d, dv, generator=g) if init else torch.zeros(B, d, dv)
    params = {}
    if mode in reference.USES_BETA:
        params["beta"] = 0.1 + 1.8 * torch.rand(B, T, generator=g)
    if mode in reference.SCALAR_GATE:
        params["alpha"] = 0.5 + 0.5 * torch.rand(B, T, generator=g)
    if mode in reference.CHANNEL_GATE:
        params["alpha"] = 0.5 + 0.5 * torch.rand(B, T, d, generator=g)
    move = lambda x: x.to(device)
    return move(state), move(k), move(v), {n: move(p) for n, p in params.items()}


def expected(state, k, v, mode, params, normalize=True):
    """The reference on CPU copies (float32), whatever device the inputs are on (its gate argument is ``gate``)."""
    cpu = {("gate" if n == "alpha" else n): p.cpu() for n, p in params.items()}
    return reference.recurrence(k.cpu(), v.cpu(), mode=mode, initial_state=state.cpu(), normalize=normalize, **cpu)


def assert_state_close(got, want, dtype, what=""):
    got = got.cpu()
    assert torch.isfinite(got).all(), f"{what}: non-finite entries in the state"
    scale = want.abs().max().clamp_min(1e-30)
    err = float((got - want).abs().max() / scale)
    assert err <= TOL[dtype], f"{what}: max abs error {err:.3g} x scale > {TOL[dtype]:g}"


def run_case(mode, B, T, d, dv, dtype=torch.float32, *, seed=0, init=True, normalize=True, device="cpu"):
    state, k, v, params = make(mode, B, T, d, dv, dtype, seed=seed, init=init, device=device)
    if not normalize:
        k = (k.float() / d**0.5).to(dtype)  # keep ||k||^2 beta < 2 roughly, so the delta modes stay bounded
    want = expected(state, k, v, mode, params, normalize)
    out = kernels.update(state, k, v, mode=mode, normalize=normalize, backend="triton", **params)
    assert out is state
    assert_state_close(
        state, want, dtype, f"{mode} B={B} T={T} d={d} dv={dv} {dtype} init={init} normalize={normalize}"
    )


# ------------------------------------------------------------------ interpreter (CPU)


@pytest.mark.slow
@pytest.mark.parametrize("d, dv", SHAPES)
@pytest.mark.parametrize("mode", ["linear", "delta", "kda"])
def test_update_all_shapes(mode, d, dv):
    T = 70 if mode == "linear" else 13  # linear: > 1 token tile, not a multiple of it
    run_case(mode, 2, T, d, dv, seed=d)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda t: str(t).replace("torch.", ""))
@pytest.mark.parametrize("mode", reference.MODES)
def test_update_every_mode_dtype(mode, dtype):
    run_case(mode, 2, 9, 33, 20, dtype, seed=1, init=True)
    run_case(mode, 1, 5, 100, 9, dtype, seed=2, init=False)


@pytest.mark.parametrize("mode", reference.MODES)
def test_update_without_normalisation(mode):
    run_case(mode, 2, 9, 20, 33, torch.float32, seed=3, normalize=False)
    run_case(mode, 1, 6, 20, 33, torch.bfloat16, seed=4, normalize=False, init=False)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["linear", "kda"])
def test_update_many_states(mode):
    """B = 97 states in one launch, tiny d and T: every program finds its own state.

    (97, not a power of two; under the interpreter each program costs about 3 ms, so 1024 states cost a minute
    for the same property; test_gpu_update_many_states launches 10^5 on a GPU.)
    """
    run_case(mode, 97, 2, 3, 2, seed=5)


def test_update_linear_split_chunk_atomic_path():
    """A chunk split over several programs per state tile (atomic adds) equals the reference."""
    for dtype in (torch.float32, torch.bfloat16):
        state, k, v, _ = make("linear", 1, 300, 40, 24, dtype, seed=6)
        want = expected(state, k, v, "linear", {})
        triton_update.update(state, k, v, mode="linear", splits=3)
        assert_state_close(state, want, dtype, f"linear split {dtype}")


def test_update_linear_16bit_keys_normalised_at_float32_accuracy():
    """The unit keys go to tl.dot as hi + lo parts in the input dtype: 16-bit inputs keep ~16 bits of them.

    Rounding the unit keys to bfloat16 alone would cost ~2e-3 of the state's scale.
    """
    for dtype in (torch.bfloat16, torch.float16):
        state, k, v, _ = make("linear", 2, 70, 33, 20, dtype, seed=18)
        want = expected(state, k, v, "linear", {})
        kernels.update(state, k, v, mode="linear", backend="triton")
        assert float((state - want).abs().max() / want.abs().max()) <= 1e-4


def test_update_linear_small_tiles():
    """Several v-blocks and token tiles per state (tiles smaller than the heuristics pick)."""
    state, k, v, _ = make("linear", 2, 50, 33, 50, seed=7)
    want = expected(state, k, v, "linear", {})
    triton_update.update(state, k, v, mode="linear", config={"BT": 16, "BV": 16})
    assert_state_close(state, want, torch.float32, "linear small tiles")


@pytest.mark.parametrize("mode", ["linear", "gla", "gated_delta"])
def test_update_strided_views_padding_untouched(mode):
    """State, keys, values and gates as views into NaN-padded buffers: the kernel neither reads nor writes the padding."""
    B, T, d, dv = 2, 21, 33, 20
    state0, k0, v0, params = make(mode, B, T, d, dv, seed=8)
    want = expected(state0, k0, v0, mode, params)
    big_s = torch.full((B, dv + 3, d + 5), NAN)  # the state stored transposed, inside padding
    state = big_s[:, :dv, :d].transpose(1, 2)  # [B, d, dv] view, strides (.., 1, d + 5)
    state.copy_(state0)
    big_k = torch.full((B, T, d + 7), NAN)
    big_k[..., :d] = k0
    big_v = torch.full((B, 2 * T, dv), NAN)
    big_v[:, ::2] = v0
    if "alpha" in params:
        big_g = torch.full((*params["alpha"].shape[:-1], params["alpha"].shape[-1] + 1), NAN)
        big_g[..., :-1] = params["alpha"]
        params["alpha"] = big_g[..., :-1]
    kernels.update(state, big_k[..., :d], big_v[:, ::2], mode=mode, backend="triton", **params)
    assert_state_close(state, want, torch.float32, f"{mode} strided")
    pad = torch.ones_like(big_s, dtype=torch.bool)
    pad[:, :dv, :d] = False
    assert torch.isnan(big_s[pad]).all(), "the kernel wrote outside the state"


def test_update_broadcast_gate_and_beta():
    """A number or [d] gate and a number beta reach the kernel as stride-0 views, not copies."""
    state, k, v, _ = make("kda", 3, 8, 33, 17, seed=9)
    want = reference.recurrence(
        k,
        v,
        mode="kda",
        beta=torch.full((3, 8), 0.6),
        gate=torch.linspace(0.5, 1.0, 33).expand(3, 8, 33),
        initial_state=state,
    )
    kernels.update(state, k, v, mode="kda", beta=0.6, alpha=torch.linspace(0.5, 1.0, 33), backend="triton")
    assert_state_close(state, want, torch.float32, "kda broadcast")


def test_update_zero_key_and_empty_chunk():
    """A zero key stays zero under normalisation (as the reference's clamp); T = 0 leaves the state alone."""
    state, k, v, params = make("delta", 2, 5, 16, 8, seed=10)
    k[0, 2] = 0.0
    want = expected(state, k, v, "delta", params)
    kernels.update(state, k, v, mode="delta", backend="triton", **params)
    assert_state_close(state, want, torch.float32, "zero key")
    before = state.clone()
    kernels.update(state, k[:, :0], v[:, :0], mode="delta", beta=params["beta"][:, :0], backend="triton")
    assert torch.equal(state, before)


# ------------------------------------------------------------------ backend rules


def test_auto_backend_on_cpu_is_torch_and_interpret_env_selects_triton(monkeypatch):
    calls = []
    monkeypatch.setattr(triton_update, "update", lambda *a, **kw: calls.append("update"))
    state, k, v, _ = make("linear", 1, 3, 4, 4)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    kernels.update(state, k, v, mode="linear")
    assert calls == []
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernels.update(state, k, v, mode="linear")
    assert calls == ["update"]
    kernels.update(state, k, v, mode="linear", backend="torch")
    assert calls == ["update"]


def _language_attributes():
    """(object, name) -> value for every triton.language module and class: what the interpreter patches."""
    out = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("triton.language"):
            continue
        for obj in [
            mod,
            *[c for c in vars(mod).values() if isinstance(c, type) and c.__module__.startswith("triton.language")],
        ]:
            for attr, value in vars(obj).items():
                out[(id(obj), attr)] = value
    return out


def test_interpreter_leaves_no_trace():
    """An interpreted launch leaves the environment, Triton's knob and triton.language as they were."""
    from triton import knobs

    env = os.environ.get("TRITON_INTERPRET")
    before = _language_attributes()
    run_case("kda", 1, 3, 16, 8)
    after = _language_attributes()
    assert os.environ.get("TRITON_INTERPRET") == env
    assert knobs.runtime.interpret is (env == "1")
    changed = [key for key, value in before.items() if after.get(key, before) is not value]
    assert changed == [], f"triton.language attributes left patched: {changed[:5]}"


# ------------------------------------------------------------------ compiled (GPU)


@pytest.mark.requires_cuda
@pytest.mark.parametrize("d, dv", SHAPES + [(256, 256), (7, 3)])
@pytest.mark.parametrize("mode", reference.MODES)
def test_gpu_update_all_shapes(mode, d, dv):
    run_case(mode, 3, 77, d, dv, torch.float32, seed=d, device="cuda")
    run_case(mode, 1, 40, d, dv, torch.float32, seed=d + 1, init=False, device="cuda")


@pytest.mark.requires_cuda
@pytest.mark.parametrize("dtype", DTYPES[1:], ids=lambda t: str(t).replace("torch.", ""))
@pytest.mark.parametrize("mode", reference.MODES)
def test_gpu_update_16bit_and_unnormalised(mode, dtype):
    for d, dv in ((33, 20), (128, 100)):
        run_case(mode, 3, 77, d, dv, dtype, seed=d, device="cuda")
        run_case(mode, 2, 40, d, dv, dtype, seed=d, init=False, normalize=False, device="cuda")
    run_case(mode, 2, 40, 64, 48, torch.float32, seed=19, normalize=False, device="cuda")


@pytest.mark.requires_cuda
@pytest.mark.parametrize("mode", reference.MODES)
def test_gpu_update_many_states(mode):
    """10^5 states in one launch (B on grid axis 0, beyond the 65535 limit of axes 1 and 2)."""
    run_case(mode, 100_000, 3, 4, 5, seed=14, device="cuda")


@pytest.mark.requires_cuda
@pytest.mark.parametrize("mode", ["linear", "delta", "gla"])
def test_gpu_update_long_chunk(mode):
    """T = 8192 tokens into one state (linear: split over many programs with atomic adds)."""
    for dtype in (torch.float32, torch.bfloat16):
        run_case(mode, 1, 8192, 64, 64, dtype, seed=15, device="cuda")


@pytest.mark.requires_cuda
def test_gpu_update_strided_views_padding_untouched():
    B, T, d, dv = 2, 100, 33, 20
    state0, k0, v0, params = make("gated_delta", B, T, d, dv, seed=16, device="cuda")
    want = expected(state0, k0, v0, "gated_delta", params)
    big_s = torch.full((B, dv + 3, d + 5), NAN, device="cuda")
    state = big_s[:, :dv, :d].transpose(1, 2)
    state.copy_(state0)
    big_k = torch.full((B, T, d + 7), NAN, device="cuda")
    big_k[..., :d] = k0
    kernels.update(state, big_k[..., :d], v0, mode="gated_delta", **params)
    assert_state_close(state, want, torch.float32, "gpu strided")
    pad = torch.ones_like(big_s, dtype=torch.bool)
    pad[:, :dv, :d] = False
    assert torch.isnan(big_s[pad]).all()


@pytest.mark.requires_cuda
def test_gpu_compiled_after_interpreted_in_one_process():
    """An interpreted launch (CPU tensors) does not disturb compiled launches that follow it."""
    run_case("delta", 1, 3, 16, 8)
    run_case("delta", 2, 30, 64, 48, device="cuda")


@pytest.mark.requires_cuda
def test_gpu_auto_backend_runs_the_kernel(monkeypatch):
    calls = []
    real = triton_update.update
    monkeypatch.setattr(triton_update, "update", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    state, k, v, _ = make("linear", 2, 5, 8, 8, device="cuda")
    kernels.update(state, k, v, mode="linear")
    assert calls == [1]


# ---------------------------------------------------------------- the probe through the Triton path


@pytest.mark.parametrize(
    "name,params", [("linear", {}), ("delta", {"beta": 1.0}), ("gated_delta", {"alpha": 0.9, "beta": 0.7})]
)
def test_probe_runs_through_the_triton_kernels(name, params):
    """The probe, with the variant's writes on the Triton path (interpreted on the CPU), equals the torch path."""
    from lacapacity import variants
    from lacapacity.inputs import keys as key_families
    from lacapacity.inputs import values
    from lacapacity.tasks import probe

    K = key_families.make("gaussian", 24, 16, batch=2, seed=0)
    V = values.make("gaussian", 24, 12, batch=2, seed=1)
    via_triton = probe.recall(variants.get(name, backend="triton", **params), K, V, checkpoints=[5, 24])
    via_torch = probe.recall(variants.get(name, backend="torch", **params), K, V, checkpoints=[5, 24])
    for m in ("mse", "signal", "leak", "recall"):
        assert abs(via_triton[m] - via_torch[m]).max() <= 1e-5 * max(1.0, float(abs(via_torch[m]).max())), m
