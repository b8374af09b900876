"""Integer states (lacapacity.variants.quantise through lacapacity.variants.precision.stored), each against a quantiser written here in
numpy with explicit loops over the groups, and a token-by-token simulation of error feedback in plain torch."""

import math

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, variants
from lacapacity.inputs import keys, values
from lacapacity.sweep.config import Grid
from lacapacity.variants import precision, quantise


def _pairs(n, d, dv, B, seed=0):
    return keys.make("gaussian", n, d, batch=B, seed=seed), values.make("gaussian", n, dv, batch=B, seed=seed)


def _np_quantise(x, bits, scope, group=None):
    """The format's definition, loop by loop: each group's scale is its largest magnitude over Q; round half to
    even. ``x`` float32 [B, r, c]."""
    Q = 2 ** (bits - 1) - 1
    x = np.asarray(x, dtype=np.float32)
    out = np.empty_like(x)
    B, R, C = x.shape
    if scope == "tensor":
        groups = [(b, slice(None), slice(None)) for b in range(B)]
    elif scope == "row":
        groups = [(b, i, slice(None)) for b in range(B) for i in range(R)]
    elif scope == "col":
        groups = [(b, slice(None), j) for b in range(B) for j in range(C)]
    else:
        groups = [(b, i, slice(s, s + group)) for b in range(B) for i in range(R) for s in range(0, C, group)]
    for idx in groups:
        g = x[idx]
        scale = np.float32(np.abs(g).max()) / np.float32(Q)
        out[idx] = 0 if scale == 0 else np.clip(np.round(g / scale), -Q, Q) * scale
    return out


def test_spellings_parse_to_canonical_labels_and_bad_ones_are_one_line_errors():
    for name, label, scales in (
        ("int8", "int8", 1),
        ("int8/tensor", "int8", 1),
        ("int4/row", "int4/row", 16),
        ("int8/col+ef", "int8/col+ef", 8),
        ("int8/g4+int4", "int8/g4+int4", 32),
    ):
        spec = quantise.parse(name)
        assert spec.label == label and spec.scales((16, 8)) == scales
        assert precision.stored(variants.get("linear"), name).state_dtype == label
    for bad in ("int16", "int8/rows", "int8/g0", "int8+ef8", "int8/gx", "int"):
        with pytest.raises(CapacityError, match="a scaled state_dtype must be int8, int4 or fp8"):
            precision.stored(variants.get("linear"), bad)
    with pytest.raises(CapacityError, match="or int8, int4 or fp8"):
        precision.stored(variants.get("linear"), "float64")
    with pytest.raises(CapacityError, match="group size 3 must divide the last dimension"):
        precision.stored(variants.get("linear"), "int8/g3").init_state(1, 4, 4)
    assert Grid(n=(8,), state_dtype=("int8/tensor", "int4/row+ef")).state_dtype == ("int8", "int4/row+ef")
    with pytest.raises(CapacityError, match="a scaled state_dtype"):
        Grid(n=(8,), state_dtype=("int3",))


@pytest.mark.parametrize("bits", [8, 4])
@pytest.mark.parametrize("scope,group", [("tensor", None), ("row", None), ("col", None), ("group", 4)])
def test_quantise_is_the_definition_group_by_group(bits, scope, group):
    g = torch.Generator().manual_seed(bits)
    x = torch.randn(3, 6, 8, generator=g) * torch.tensor([0.01, 1.0, 100.0])[:, None, None]
    x[1, 2] = 0.0  # a row of zeros stays zero
    name = f"int{bits}" + {"tensor": "", "row": "/row", "col": "/col", "group": f"/g{group}"}[scope]
    got = quantise.quantise(x, name)
    want = _np_quantise(x.numpy(), bits, scope, group)
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=1e-6 * float(x.abs().max()))
    # as the wrapper stores it (round_ keeps float32 numbers)
    assert torch.equal(precision.round_(x.clone(), name), got)


def _e4m3_grid():
    """Every nonnegative float8_e4m3fn number, from its definition: subnormals m 2^-9 (m < 8), normals
    (1 + m/8) 2^e for e = -6 .. 8 (m < 8), the largest (1 + 6/8) 2^8 = 448."""
    grid = [m * 2.0**-9 for m in range(8)] + [(1 + m / 8) * 2.0**e for e in range(-6, 9) for m in range(8)]
    return np.array([g for g in grid if g <= 448.0])


def _np_fp8(x, scope, group=None, target=448.0):
    """fp8 with scales, loop by loop: each group's scale is its largest magnitude over ``target``; x / scale goes
    to the nearest number of the e4m3 grid (ties to the even significand). ``x`` float32 [B, r, c]; ``scope``
    row, col or cols (``group`` consecutive columns)."""
    grid = _e4m3_grid()
    full = np.concatenate([-grid[::-1], grid[1:]])
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    B, R, C = x.shape
    if scope == "row":
        groups = [(b, i, slice(None)) for b in range(B) for i in range(R)]
    elif scope == "col":
        groups = [(b, slice(None), j) for b in range(B) for j in range(C)]
    else:
        groups = [(b, slice(None), slice(s, s + group)) for b in range(B) for s in range(0, C, group)]
    for idx in groups:
        g = x[idx]
        scale = np.abs(g).max() / target
        if scale == 0:
            out[idx] = 0
            continue
        y = g / scale
        j = np.abs(full[None, :] - y.reshape(-1, 1)).argmin(1)  # the nearest; a tie goes to the first (checked below)
        out[idx] = (full[j] * scale).reshape(g.shape)
    return out


@pytest.mark.parametrize(
    "name,scope,group,target",
    [("fp8/row", "row", None, 448.0), ("fp8/col", "col", None, 448.0), ("fp8/c4@240", "cols", 4, 240.0)],
)
def test_fp8_with_scales_is_the_definition_group_by_group(name, scope, group, target):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 6, 8, generator=g) * torch.tensor([0.01, 100.0])[:, None, None]
    got = quantise.quantise(x, name)
    want = _np_fp8(x.numpy(), scope, group, target)
    # a tie (probability ~0 for Gaussian draws) would round to even in torch and to the lower number here
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=0)
    assert torch.equal(precision.round_(x.clone(), name), got)
    spec = quantise.parse(name)
    assert spec.fp8 and spec.qmax == target and spec.label == name
    # the largest entry of every group is kept exactly; every other one lands on the scaled grid
    assert float((got.abs().amax() - x.abs().amax()).abs()) <= 1e-6 * float(x.abs().amax())


def test_fp8_spellings_bytes_and_bad_targets():
    for name, label, scales in (
        ("fp8", "fp8", 1),
        ("fp8/col", "fp8/col", 8),
        ("fp8/c4@240", "fp8/c4@240", 2),
        ("fp8/c8@448", "fp8/c8", 1),
        ("fp8/row@240+ef", "fp8/row@240+ef", 16),
    ):
        spec = quantise.parse(name)
        assert spec.label == label and spec.scales((16, 8)) == scales, (name, spec.label, spec.scales((16, 8)))
    lin = variants.get("linear")
    d, dv = 128, 64
    assert precision.state_bytes(lin, d, dv, "fp8/col") == d * dv + 4 * dv  # one byte a number, a scale per column
    assert precision.state_bytes(lin, d, dv, "fp8/c32@240") == d * dv + 4 * 2
    assert precision.itemsize("fp8/c32@240") == 1
    for bad, match in (
        ("fp8@250", "float8_e4m3fn number in"),
        ("fp8@500", "float8_e4m3fn number in"),
        ("int8@240", "a scaled state_dtype"),
        ("fp8/c0", "a scaled state_dtype"),
        ("fp16/row", "state_dtype must be one of"),
    ):
        with pytest.raises(CapacityError, match=match):
            precision.stored(lin, bad)
    with pytest.raises(CapacityError, match="fp8/c3 state: the group size 3 must divide the last dimension"):
        precision.stored(lin, "fp8/c3").init_state(1, 4, 8)


def test_fp8_stochastic_rounding_is_unbiased_and_lands_on_a_neighbour():
    # one column of 4 per item (scale amax / 448 = 1 / 448): 0.3 * 448 = 134.4 between 128 and 144
    x = torch.tensor([[1.0], [0.3], [-0.05], [0.0]]).expand(2, 4, 1).repeat(4000, 1, 1)
    y = (precision.round_(x.clone(), "fp8/col", stochastic=True, seed=3) * 448).round(decimals=3)
    assert set(torch.unique(y[:, 1, 0]).tolist()) == {128.0, 144.0}
    assert set(torch.unique(y[:, 2, 0]).tolist()) == {-24.0, -22.0}  # -22.4: spacing 2 in [16, 32)
    assert (y[:, 0, 0] == 448).all() and (y[:, 3, 0] == 0).all()
    m = y.double().mean(0)[:, 0] / 448
    se = y.double().std(0)[:, 0] / 448 / math.sqrt(y.shape[0])
    assert ((m - x[0, :, 0].double()).abs() <= 4 * se + 1e-9).all()
    assert abs(float((y[:, 1, 0] == 144).double().mean()) - 0.4) < 0.03  # (134.4 - 128) / 16


def test_stochastic_rounding_is_unbiased_and_lands_on_a_neighbour():
    x = torch.tensor([[0.3, -1.0, 0.55, 0.0]]).expand(4000, 4).contiguous()  # scale 1/7 per row
    y = precision.round_(x.clone(), "int4/row", stochastic=True, seed=3) * 7
    assert ((y - y.round()).abs() < 1e-5).all() and ((y - x * 7).abs() < 1).all()
    y = y.round()
    m = y.double().mean(0) / 7
    se = y.double().std(0) / 7 / math.sqrt(y.shape[0])
    assert ((m - x[0].double()).abs() <= 4 * se + 1e-9).all()
    assert abs(float((y[:, 0] == 3).double().mean()) - 0.1) < 0.02  # 2.1: up to 3 with probability 0.1


def _simulate(label, name, n, d, B, seed=0, *, alpha=1.0, beta=1.0):
    """Step rounding of the linear, decay and delta recurrences token by token, with the residual of ``name``'s
    feedback kept here: x = write(Q) + r; Q = quantise(x); r = x - Q (or r stored itself in int4)."""
    K, V = _pairs(n, d, d, B, seed)
    spec = quantise.parse(name)
    S = torch.zeros(B, d, d)
    r = torch.zeros(B, d, d)
    res = spec.label.split("+")[1] if "+" in spec.label else None
    base = spec.label.split("+")[0]
    for t in range(n):
        k, v = K[:, t, :, None], V[:, t, None, :]
        if label == "linear":
            S = S + k * v
        elif label == "decay":
            S = alpha * S + k * v
        else:
            S = alpha * S
            S = S + k * (beta * (v - (k * S).sum(1, keepdim=True)))
        x = S + r if res else S
        S = torch.from_numpy(_np_quantise(x.numpy(), spec.bits, spec.scope, spec.group))
        if res == "ef":
            r = x - S
        elif res == "int4":
            r = torch.from_numpy(_np_quantise((x - S).numpy(), 4, spec.scope, spec.group))
        assert base in name
    return S


@pytest.mark.parametrize(
    "label,memory,name",
    [
        ("linear", "linear", "int8/row"),
        ("linear", "linear", "int8/row+ef"),
        ("linear", "linear", "int8/col+int4"),
        ("decay", "decay(alpha=0.9)", "int4/g4+ef"),
        ("delta", "delta(beta=0.5)", "int8+ef"),
    ],
)
def test_step_rounding_and_feedback_match_a_token_by_token_simulation(label, memory, name):
    n, d, B = 40, 8, 3
    K, V = _pairs(n, d, d, B)
    mem = precision.stored(variants.resolve(memory), name, "step")
    got = mem.write(mem.init_state(B, d, d), K, V).inner
    want = _simulate(label, name, n, d, B, alpha=0.9 if label == "decay" else 1.0, beta=0.5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # through the memory's own write (the generic path), in two calls, the same numbers
    generic = precision.Stored(variants.resolve(memory), name, "step")
    generic._fast = None
    st = generic.write(generic.init_state(B, d, d), K[:, :17], V[:, :17])
    torch.testing.assert_close(generic.write(st, K[:, 17:], V[:, 17:]).inner, got, rtol=1e-5, atol=1e-6)


def test_feedback_keeps_the_additive_state_within_one_rounding_and_final_feeds_nothing_back():
    n, d, B = 300, 16, 4
    K, V = _pairs(n, d, d, B, seed=2)
    lin = variants.get("linear")
    F = lin.write(lin.init_state(B, d, d), K, V)
    ef = precision.stored(lin, "int4/row+ef", "step")
    st = ef.write(ef.init_state(B, d, d), K, V)
    # Q + r is the float32 state: the stored state is one rounding away from it, whatever n
    once = quantise.quantise(F, "int4/row")
    torch.testing.assert_close(st.inner, once, rtol=1e-4, atol=1e-4)
    plain = precision.stored(lin, "int4/row", "step")
    drift = (plain.write(plain.init_state(B, d, d), K, V).inner - F).pow(2).mean()
    assert drift > 20 * (st.inner - F).pow(2).mean()
    # chunks: rounded at chunk ends, the residual carried from chunk to chunk
    ch = precision.stored(lin, "int8/row+ef", "chunk=32")
    F288 = lin.write(lin.init_state(B, d, d), K[:, :288], V[:, :288])  # 9 whole chunks
    got = ch.write(ch.init_state(B, d, d), K[:, :288], V[:, :288]).inner
    torch.testing.assert_close(got, quantise.quantise(F288, "int8/row"), rtol=1e-4, atol=1e-5)
    # final: every read rounds the float32 state once, twice the same
    fin = precision.stored(lin, "int8/row+ef", "final")
    st = fin.write(fin.init_state(B, d, d), K, V)
    eye = torch.eye(d).expand(B, d, d)
    r1, r2 = fin.read(st, eye), fin.read(st, eye)
    assert torch.equal(r1, r2) and torch.equal(r1, quantise.quantise(F, "int8/row"))


@pytest.mark.parametrize("label", ["gla", "kda", "dplr", "lsq", "softmax", "longhorn", "delta_product"])
def test_every_builtin_memory_stores_on_the_grid_with_a_bounded_residual(label):
    n, d, B = 24, 8, 2
    K, V = _pairs(n, d, d, B, seed=3)
    mem = precision.stored(variants.resolve(label), "int8/row+ef", "step")
    st = mem.write(mem.init_state(B, d, d), K, V)
    out = mem.read(st, K[:, :4])
    assert torch.isfinite(out).all()
    rounder = st._rounder
    tensors = [t for t in precision.state_tensors(st) if t.is_floating_point()]
    assert tensors and len(rounder._residual) >= 1
    for which, t in enumerate(tensors):
        rows = t.reshape(-1, t.shape[-1])
        scale = rows.abs().amax(-1, keepdim=True) / 127
        q = torch.where(scale > 0, rows / scale, torch.zeros_like(rows))
        assert (q - q.round()).abs().max() < 1e-3, (label, which)  # every entry a whole number of its row's scale
        r = rounder._residual.get(which)
        if r is not None and r.shape == t.shape:  # |residual| <= half a step of the row it was rounded with
            assert (r.reshape(-1, t.shape[-1]).abs() <= 0.5 * scale + 1e-6 + 1e-3 * scale).all()


def test_a_user_memory_with_a_dataclass_state_gets_scales_and_feedback_per_tensor():
    from dataclasses import dataclass

    @dataclass
    class Two:
        a: torch.Tensor
        b: torch.Tensor
        count: torch.Tensor  # an integer counter: not rounded

    class User:
        name = "two"

        def init_state(self, batch, d, dv, *, device=None):
            return Two(torch.zeros(batch, d, dv), torch.zeros(batch, dv), torch.zeros(batch, dtype=torch.long))

        def write(self, state, k, v):
            return Two(state.a + k.transpose(1, 2) @ v, state.b + 2 * v.sum(1), state.count + k.shape[1])

        def read(self, state, q):
            return q @ state.a + state.b[:, None]

        def state_numel(self, d, dv):
            return d * dv + dv

    n, d, B = 30, 4, 2
    K, V = _pairs(n, d, d, B, seed=4)
    mem = precision.stored(User(), "int4/col+ef", "step")
    st = mem.write(mem.init_state(B, d, d), K, V)
    exact = User().write(User().init_state(B, d, d), K, V)
    assert torch.equal(st.inner.count, exact.count)
    # with feedback each tensor is one rounding away from its exact value (per column; [B, dv] per item)
    torch.testing.assert_close(st.inner.a, quantise.quantise(exact.a, "int4/col"), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(st.inner.b, quantise.quantise(exact.b, "int4/col"), rtol=1e-4, atol=1e-5)
    # bytes: a (4x4) int4 + 4 column scales + residual; b (4) int4 + 1 scale + residual
    assert precision.state_bytes(User(), d, d, "int4/col+ef") == (8 + 16 + 64) + (2 + 4 + 16)


def test_state_bytes_count_integers_scales_and_residuals():
    d, dv = 64, 32
    lin = variants.get("linear")
    assert precision.state_bytes(lin, d, dv, "int8") == d * dv + 4
    assert precision.state_bytes(lin, d, dv, "int8/row") == d * dv + 4 * d
    assert precision.state_bytes(lin, d, dv, "int4/col") == d * dv // 2 + 4 * dv
    assert precision.state_bytes(lin, d, dv, "int8/g16") == d * dv + 4 * d * dv // 16
    assert precision.state_bytes(lin, d, dv, "int8/row+ef") == d * dv + 4 * d + 4 * d * dv
    assert precision.state_bytes(lin, d, dv, "int8/row+int4") == d * dv + 4 * d + d * dv // 2 + 4 * d
    assert precision.stored(lin, "int8/row+int4").state_bytes(d, dv) == d * dv * 3 // 2 + 8 * d
    assert precision.state_bytes(variants.get("softmax"), 8, 8, "int8/row", n=10) == 2 * (10 * 8 + 4 * 10)
    assert precision.itemsize("int8/row") == 1
    with pytest.raises(CapacityError, match="half a byte"):
        precision.itemsize("int4")


@pytest.mark.slow
def test_the_command_line_runs_an_integer_state(tmp_path, cli):
    import xarray as xr

    out = tmp_path / "q"
    done = cli.here(
        "run",
        "precision",
        "--set",
        "variant=linear",
        "--set",
        "n=16,64",
        "--set",
        "seed=0",
        "--set",
        "state_dtype=float32,int8/row+ef,int4/tensor,fp8/c32@240",
        "--set",
        "rounding=step",
        "--set",
        "queries=16",
        "--out",
        str(out),
        "--device",
        "cpu",
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    ds = xr.open_dataset(next(out.rglob("*.nc")))
    assert [str(s) for s in ds["state_dtype"].values] == ["float32", "int8/row+ef", "int4", "fp8/c32@240"]
    mse = ds["mse"].mean([dim for dim in ds["mse"].dims if dim not in ("state_dtype", "n")])
    assert float(mse.sel(state_dtype="int4", n=64)) > float(mse.sel(state_dtype="float32", n=64))
    done = cli.here("run", "precision", "--set", "state_dtype=int3", "--out", tmp_path / "bad", "--quiet")
    cli.fails(done, "a scaled state_dtype")


@pytest.mark.parametrize(
    "name,scope,group,target", [("fp8/col+ef", "col", None, 448.0), ("fp8/c4@240", "cols", 4, 240.0)]
)
def test_fp8_step_rounding_matches_a_token_by_token_simulation(name, scope, group, target):
    """The decaying memory stored in fp8 after every write (with a float32 residual for +ef), against the write,
    the rounding of ``_np_fp8`` and the residual kept here."""
    n, d, B = 24, 8, 2
    K, V = _pairs(n, d, d, B, seed=4)
    mem = precision.stored(variants.resolve("decay(alpha=0.9)"), name, "step")
    got = mem.write(mem.init_state(B, d, d), K, V).inner
    S, r = np.zeros((B, d, d)), np.zeros((B, d, d))
    for t in range(n):
        x = 0.9 * S + K[:, t, :, None].double().numpy() * V[:, t, None, :].double().numpy() + r
        S = _np_fp8(x.astype(np.float32), scope, group, target)
        if name.endswith("+ef"):
            r = x - S
    np.testing.assert_allclose(got.numpy(), S, rtol=1e-5, atol=1e-6)
