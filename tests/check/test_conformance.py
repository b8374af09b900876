"""check_variant passes every built-in and fails deliberately broken variants, naming the broken property."""

import math
import re

import pytest
import torch
from memory_support import UserLinear

from lacapacity import CapacityError, theory, variants
from lacapacity.check.conformance import check_variant
from lacapacity.variants import Declares


def _status(report, check):
    (row,) = [r for r in report.results if r.check == check]
    return row.status, row.detail


@pytest.mark.parametrize("name", ["linear", "decay", "gla", "delta", "gated_delta", "kda", "softmax"])
def test_every_builtin_passes(name):
    report = check_variant(variants.get(name), d=32)
    assert report.passed, str(report)
    assert [r.check for r in report.results] == [
        "protocol",
        "shape and dtype",
        "input dtypes",
        "determinism",
        "batch independence",
        "chunked writes",
        "device placement",
        "T2 two pairs",
        "T12 last key",
        "probe",
    ]
    assert _status(report, "T2 two pairs")[0] == ("pass" if name == "linear" else "n/a")
    assert _status(report, "T12 last key")[0] == ("pass" if name in ("delta", "gated_delta", "kda") else "n/a")


@pytest.mark.parametrize(
    "params",
    [
        {"name": "linear", "feature": "dpfp", "nu": 2},
        {"name": "decay", "alpha": ("uniform", 0.8, 1.0), "feature": "elu1", "normalize_read": True},
        {"name": "kda", "alpha": ("uniform", 0.8, 1.0), "beta": ("uniform", 0.5, 1.0)},
    ],
)
def test_builtins_with_features_and_draws_pass(params):
    params = dict(params)
    report = check_variant(variants.get(params.pop("name"), **params), d=16)
    assert report.passed, str(report)


def test_report_capacity_next_to_the_bounds_at_d_64():
    report = check_variant("linear")
    assert report.d == 64 and report.n_max == 256 and report.eps == 0.5
    # random unit keys, additive rule: n* = 1 + eps d (T7), measured on 4 draws
    assert abs(report.capacity - theory.capacity_random_keys(0.5, 64)) < 6
    assert report.bounds["T5 tight frame, additive rule: d (1 + eps)"] == 96.0
    assert report.bounds["T8 any 64 x dv state, linear read: D / (1 - eps)"] == 128.0
    text = str(report)
    assert (
        "check_variant: linear" in text
        and "capacity at d = 64" in text
        and "9 passed, 0 failed, 1 not applicable" in text
    )
    soft = check_variant("softmax", d=16)
    assert math.isnan(soft.capacity) and soft.capacity_note.startswith("> 64") or soft.capacity > 16
    assert math.isnan(
        soft.bounds["T8 any 16 x dv state, linear read: D / (1 - eps)"]
    )  # the cache grows: T8 does not bound it


# ------------------------------------------------------------------ broken variants


class _Good(UserLinear):
    """A correct additive memory that users might write; subclasses break one property each."""

    declares = Declares(additive=True)


class _LeaksAcrossBatch(_Good):
    def read(self, state, q):
        return q.float() @ (state + 0.1 * state.mean(0, keepdim=True))


class _Noisy(_Good):
    def __init__(self):
        self.calls = 0

    def read(self, state, q):
        self.calls += 1
        return q.float() @ state + 1e-3 * self.calls


class _Float64Reads(_Good):
    def read(self, state, q):
        return q.double() @ state.double()


class _ForgetsEarlierChunks(_Good):
    def write(self, state, k, v):
        return k.float().transpose(1, 2) @ v.float()  # overwrites instead of adding


class _WrongSize(_Good):
    def state_numel(self, d, dv):
        return d * d


class _NotAdditive(_Good):
    def read(self, state, q):
        return 0.5 * (q.float() @ state)  # declares additive, but halves every read


class _ReadsElsewhere(_Good):
    def read(self, state, q):
        return (q.float() @ state).to("meta")


class _LowPrecision(_Good):
    def write(self, state, k, v):
        return state + (k.float().transpose(1, 2) @ v.float()) * (
            1.0 if k.dtype == torch.float32 else 1.5
        )  # mishandles bf16/fp16


class _NotDelta(_Good):
    declares = Declares(additive=False, delta_rule=True)  # claims T12 but writes additively
    params = {"beta": 1.0}


class _NoRead:
    name = "no-read"

    def init_state(self, batch, d, dv, *, device=None):
        return torch.zeros(batch, d, dv)

    def write(self, state, k, v):
        return state

    def state_numel(self, d, dv):
        return d * dv


@pytest.mark.parametrize(
    "broken,prop,reason,alone",
    [  # alone: the only failing check (others break several properties at once, legitimately)
        (_LeaksAcrossBatch(), "batch independence", "changed items 0 and 2", False),
        (_Noisy(), "determinism", "two runs on the same inputs differ", False),
        (_Float64Reads(), "shape and dtype", "read returned torch.float64", False),
        (_ForgetsEarlierChunks(), "chunked writes", "give different reads", False),
        (_WrongSize(), "shape and dtype", "holds 128 numbers per batch item but state_numel", True),
        (_NotAdditive(), "T2 two pairs", "declared additive", True),
        (_ReadsElsewhere(), "device placement", "reads on meta", False),
        (_LowPrecision(), "input dtypes", "differs from the float32 read", True),
        (_NotDelta(), "T12 last key", "declared a delta rule with beta = 1", True),
        (_NoRead(), "protocol", "missing read", False),
    ],
)
def test_a_broken_variant_fails_naming_the_property(broken, prop, reason, alone):
    report = check_variant(broken, d=16)
    assert not report.passed
    status, detail = _status(report, prop)
    assert status == "FAIL" and reason in detail, str(report)
    assert prop in str(report) and "FAIL" in str(report)
    if alone:
        assert [r.check for r in report.failures] == [prop], str(report)


def test_the_good_user_variant_passes_and_an_undeclared_one_is_tried():
    assert check_variant(_Good(), d=16).passed

    class Undeclared(_Good):
        declares = Declares()

    status, detail = _status(check_variant(Undeclared(), d=16), "T2 two pairs")
    assert status == "pass" and "not declared, holds" in detail

    class Scaled(Undeclared):
        def read(self, state, q):
            return 2.0 * (q.float() @ state)

    status, detail = _status(check_variant(Scaled(), d=16), "T2 two pairs")
    assert status == "n/a" and "declare Declares(additive=True) to require it" in detail


# ------------------------------------------------------------------ beta, dims and the exact capacity


class _LeastSquares(_Good):
    """Keeps every pair and reads q pinv(K) V: the best linear read of a d x dv state (T8), error exactly 1 - d/n."""

    name = "least-squares"
    declares = Declares(additive=False, state="growing")

    def init_state(self, batch, d, dv, *, device=None):
        return (torch.zeros(batch, 0, d, device=device), torch.zeros(batch, 0, dv, device=device))

    def write(self, state, k, v):
        return (torch.cat([state[0], k.float()], 1), torch.cat([state[1], v.float()], 1))

    def read(self, state, q):
        S = torch.linalg.pinv(state[0].double()) @ state[1].double()  # [B, d, dv]
        return (q.double() @ S).float()

    def numel(self, state):
        return int(state[0][0].numel() + state[1][0].numel())


@pytest.mark.parametrize("d,eps", [(16, 0.4), (16, 0.5), (12, 0.3)])
def test_capacity_is_an_exact_measured_crossing_within_the_t8_bound(d, eps):
    report = check_variant(_LeastSquares(), d=d, eps=eps)
    assert report.passed, str(report)
    bound = d / (1 - eps)  # T8: mse = 1 - d/n <= eps  <=>  n <= d / (1 - eps)
    assert isinstance(report.capacity, int) and report.capacity <= bound
    # the largest n with 1 - d/n <= eps (up to float rounding exactly at the bound)
    assert report.capacity == math.floor(bound) or (bound.is_integer() and report.capacity == bound - 1)
    assert f"at n = {report.capacity + 1}" in report.capacity_note
    assert re.search(rf"measured\s+{report.capacity} \(mse ", str(report))


def test_capacity_of_the_linear_memory_is_the_first_crossing_of_its_measured_curve():
    from lacapacity.inputs import keys, values
    from lacapacity.tasks import probe

    report = check_variant("linear", d=16)
    K = keys.make("gaussian", 64, 16, batch=4, seed=0)
    V = values.make("orthonormal", 64, 64, batch=4, seed=0)
    ds = probe.recall(variants.get("linear"), K, V, checkpoints=list(range(1, 65)), decode=False)
    mse = ds.mse.mean("batch").values  # every n from 1 to 64
    first_fail = int(next(i for i, m in enumerate(mse) if m > 0.5)) + 1  # n of the first failure
    assert report.capacity == first_fail - 1


class _DeltaHalf(_Good):
    declares = Declares(additive=False, delta_rule=True)

    def __init__(self, beta, where):
        self.b = beta
        if where == "params":
            self.params = {"beta": beta}
        elif where == "attribute":  # a constructor argument kept as an attribute: variants.params reads it back
            self.beta = beta
        else:  # as from_fla records its per-token inputs
            self.params = {"per_token.beta": torch.tensor(beta).tolist()}

    def write(self, state, k, v):
        for t in range(k.shape[1]):
            kt, vt = k[:, t : t + 1].float(), v[:, t : t + 1].float()  # [B, 1, d], [B, 1, dv]
            state = state + self.b * kt.transpose(1, 2) @ (vt - kt @ state)
        return state


@pytest.mark.parametrize("where", ["params", "attribute", "fla"])
def test_t12_reads_beta_wherever_the_variant_records_it(where):
    status, detail = _status(check_variant(_DeltaHalf(0.5, where), d=16), "T12 last key")
    assert status == "n/a" and "beta = 0.5" in detail and "T12 needs beta = 1" in detail
    assert _status(check_variant(_DeltaHalf(1.0, where), d=16), "T12 last key")[0] == "pass"


class _OnlyDims(_Good):
    """Refuses every key dimension but the declared ones."""

    declares = Declares(additive=True, dims=(8, 24))

    def write(self, state, k, v):
        if k.shape[-1] not in self.declares.dims:
            raise ValueError(f"this memory takes d in {self.declares.dims}, got {k.shape[-1]}")
        return super().write(state, k, v)


def test_checks_and_capacity_run_at_a_declared_d():
    report = check_variant(_OnlyDims())
    assert report.passed, str(report)
    assert report.check_d == 8 and report.d == 24 and report.n_max == 96
    assert "declares dims [8, 24]" in str(report) and "checks at d = 8" in str(report)
    assert check_variant(_OnlyDims(), d=8).d == 8
    wrong_d = r"d = 64 is not a key dimension 'user-linear' takes: its dims are \[8, 24\]"
    with pytest.raises(CapacityError, match=wrong_d):
        check_variant(_OnlyDims(), d=64)
    with pytest.raises(CapacityError, match="dims must be None or a tuple of distinct whole numbers >= 2"):
        Declares(dims=("eight",))
    bad = _Good()
    bad.declares = {"dims": (8, 24)}  # not a Declares
    status, detail = _status(check_variant(bad, d=16), "protocol")
    assert status == "FAIL" and "declares must be a lacapacity.variants.Declares, got dict" in detail
