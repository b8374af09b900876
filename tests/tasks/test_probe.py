"""The recall probe: its Dataset schema, its metrics against brute force, T2 through the probe, bad input."""

import json

import numpy as np
import pytest
import torch

from lacapacity import CapacityError, theory, variants
from lacapacity.inputs import keys, values
from lacapacity.tasks import probe
from lacapacity.tasks.probe import METRICS

LIN = variants.get("linear")


def _brute_metrics(K, V, c):
    """Float64 brute force of every probe metric at checkpoint c, per batch item."""
    K, V = K[:, :c].double(), V[:, :c].double()
    R = K @ (K.transpose(1, 2) @ V)  # [B, c, dv]
    out = {m: [] for m in METRICS}
    for b in range(K.shape[0]):
        sq, rel, cos, hit, sig, leak = [], [], [], [], [], []
        for i in range(c):
            r, v = R[b, i], V[b, i]
            sq.append(float(((r - v) ** 2).sum()))
            rel.append(sq[-1] / float(v @ v))
            cos.append(float(r @ v / (r.norm() * v.norm())))
            scores = [float(r @ V[b, j]) for j in range(c)]
            hit.append(float(int(np.argmax(scores)) == i))
            a = float(r @ v / (v @ v))
            sig.append(a)
            leak.append(float(((r - a * v) ** 2).sum()))
        for m, x in zip(METRICS, (sq, rel, cos, hit, sig, leak)):
            out[m].append(np.mean(x))
    return out


def test_metrics_match_brute_force_at_every_checkpoint():
    K = keys.make("gaussian", 40, 8, batch=3, seed=0)
    V = values.make("gaussian", 40, 6, batch=3, seed=1) * torch.linspace(0.5, 2.0, 40)[None, :, None]  # non-unit values
    ds = probe.recall(LIN, K, V, checkpoints=[3, 17, 40])
    for c in (3, 17, 40):
        brute = _brute_metrics(K, V, c)
        for m in METRICS:
            assert np.allclose(ds[m].sel(n=c).values, brute[m], rtol=1e-4, atol=1e-5), (m, c)


def test_dataset_schema():
    K = keys.make("gaussian", 20, 8, batch=2, seed=0)
    V = values.make("gaussian", 20, 5, batch=2, seed=0)
    ds = probe.recall(LIN, K, V, checkpoints=[5, 20])
    assert set(ds.data_vars) == set(METRICS)
    for m, (long_name, units, desc) in METRICS.items():
        assert ds[m].dims == ("n", "batch")
        assert ds[m].attrs == {"long_name": long_name, "units": units, "description": desc}
    assert list(ds.n.values) == [5, 20] and ds.n.attrs["units"] == "pairs"
    assert list(ds.batch.values) == [0, 1]
    config = json.loads(ds.attrs["config"])
    assert config["variant"] == "linear" and config["d"] == 8 and config["dv"] == 5 and config["checkpoints"] == [5, 20]
    assert ds.attrs["state_numel"] == 40 and ds.attrs["device"] == "cpu"
    assert json.loads(ds.attrs["variant_params"]) == {"normalize": False, "backend": "auto"}
    roundtrip = ds.copy()
    assert roundtrip.identical(ds)


def test_default_checkpoints_cover_one_to_n():
    cps = probe.default_checkpoints(1000)
    assert cps[0] == 1 and cps[-1] == 1000 and cps == sorted(set(cps)) and 15 <= len(cps) <= 25
    ds = probe.recall(LIN, keys.make("gaussian", 50, 8), values.make("gaussian", 50, 8))
    assert list(ds.n.values) == probe.default_checkpoints(50)


def test_per_query_output_is_nan_padded():
    K = keys.make("gaussian", 12, 8, batch=2, seed=0)
    V = values.make("orthonormal", 12, 16, batch=2, seed=0)
    ds = probe.recall(LIN, K, V, checkpoints=[4, 12], per_query=True)
    sq = ds.mse_q
    assert sq.dims == ("n", "batch", "query") and sq.shape == (2, 2, 12)
    assert np.isnan(sq.sel(n=4).values[:, 4:]).all() and np.isfinite(sq.sel(n=4).values[:, :4]).all()
    assert np.allclose(sq.mean("query", skipna=True).values, ds.mse.values, rtol=1e-5)
    assert np.allclose(ds.recall_q.sel(n=12).mean("query").values, ds.recall.sel(n=12).values)
    for m in probe.METRICS:  # each metric per query: named like the metric, with _q, and averaging to it
        assert probe.PER_QUERY[m] == f"{m}_q" and ds[f"{m}_q"].dims == ("n", "batch", "query")
        assert np.allclose(ds[f"{m}_q"].mean("query", skipna=True).values, ds[m].values, rtol=1e-5, atol=1e-6)


def test_two_pair_closed_form_through_the_probe():
    # Non-unit keys, one pair at a time: the per-query read error of k1 at n = 2 is |k1 S - v1|^2 with T2.
    gen = torch.Generator().manual_seed(3)
    K = torch.randn(64, 2, 10, generator=gen) * 1.5
    V = torch.randn(64, 2, 7, generator=gen)
    ds = probe.recall(LIN, K, V, checkpoints=[2], per_query=True)
    r1 = theory.two_pair_readout(K[:, 0].double(), K[:, 1].double(), V[:, 0].double(), V[:, 1].double())
    want = ((r1 - V[:, 0].double()) ** 2).sum(-1).numpy()
    assert np.allclose(ds.mse_q.sel(n=2, query=0).values, want, rtol=1e-5)
    sig = ((r1 * V[:, 0].double()).sum(-1) / (V[:, 0].double() ** 2).sum(-1)).numpy()
    assert np.allclose(ds.signal_q.sel(n=2, query=0).values, sig, rtol=1e-4, atol=1e-5)


def test_t3_signal_and_leak_for_orthonormal_values():
    K = keys.make("gaussian", 24, 8, batch=4, seed=2) * 1.3  # non-unit keys: signal = |k_i|^2
    V = values.make("orthonormal", 24, 32, batch=4, seed=2)
    ds = probe.recall(LIN, K, V, checkpoints=[24], per_query=True)
    signal, leak = theory.decomposition(K.double(), V.double())
    assert np.allclose(ds.signal_q.sel(n=24).values, (K.double() ** 2).sum(-1).numpy(), rtol=1e-5)
    assert np.allclose(ds.leak_q.sel(n=24).values, (leak**2).sum(-1).numpy(), rtol=1e-4)


class _Recorder:
    """A third-party variant (not registered) that records the devices and chunks it is given."""

    name = "recorder"

    def __init__(self):
        self.inner, self.chunks, self.devices = variants.get("linear"), [], set()

    def init_state(self, batch, d, dv, *, device=None):
        self.devices.add(str(device))
        return self.inner.init_state(batch, d, dv, device=device)

    def write(self, state, k, v):
        self.chunks.append(k.shape[1])
        self.devices.update({str(state.device), str(k.device)})
        return self.inner.write(state, k, v)

    def read(self, state, q):
        return self.inner.read(state, q)

    def state_numel(self, d, dv):
        return d * dv


def test_the_state_takes_whole_blocks_and_a_checkpoint_inside_a_block_reads_a_copy():
    """The writes that build the state are the same whatever the checkpoints (blocks of probe.BLOCK pairs, in
    order); a checkpoint inside a block writes the rest of its pairs into a copy, so each point depends on n alone."""
    assert probe.BLOCK == 64
    rec = _Recorder()
    K, V = keys.make("gaussian", 150, 4), values.make("gaussian", 150, 4)
    ds = probe.recall(rec, K, V, checkpoints=[1, 7, 30, 64, 100, 150])
    assert rec.chunks == [1, 7, 30, 64, 36, 64, 22] and rec.devices == {"cpu"}
    assert ds.attrs["variant"] == "recorder"
    alone = [float(probe.recall(LIN, K[:, :c], V[:, :c], checkpoints=[c]).mse[0, 0]) for c in (1, 7, 30, 64, 100, 150)]
    assert ds.mse.values[:, 0].tolist() == alone  # bit for bit: each point as if it were the only one
    G = K[0].double() @ K[0].double().T
    brute = [float((((G[:c, :c] @ V[0, :c].double()) - V[0, :c].double()) ** 2).sum(1).mean()) for c in (7, 150)]
    np.testing.assert_allclose(ds.mse.sel(n=[7, 150]).values[:, 0], brute, rtol=1e-5)


class _BadRead(_Recorder):
    def read(self, state, q):
        return super().read(state, q)[:, :-1]


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((LIN, torch.randn(1, 5, 4), torch.randn(1, 6, 4)), {}, "must share B and n"),
        ((LIN, torch.randn(5, 4), torch.randn(5, 4)), {}, "keys must have 3 dimensions"),
        ((LIN, torch.full((1, 5, 4), float("nan")), torch.randn(1, 5, 4)), {}, "keys contains NaN or inf"),
        ((LIN, torch.randn(1, 5, 4), torch.full((1, 5, 4), float("inf"))), {}, "values contains NaN or inf"),
        (
            (LIN, torch.randn(1, 5, 4), torch.randn(1, 5, 4)),
            {"checkpoints": [2, 9]},
            r"checkpoints must lie in \[1, n\]",
        ),
        (
            (LIN, torch.randn(1, 5, 4), torch.randn(1, 5, 4)),
            {"checkpoints": [0]},
            "checkpoint must be a whole number >= 1",
        ),
        ((LIN, torch.randn(1, 5, 4), torch.randn(1, 5, 4)), {"checkpoints": []}, "non-empty"),
        ((object(), torch.randn(1, 5, 4), torch.randn(1, 5, 4)), {}, "has no method init_state"),
        ((_BadRead(), torch.randn(1, 5, 4), torch.randn(1, 5, 4)), {}, "variant 'recorder': read returned"),
        ((LIN, torch.randn(1, 5, 4, dtype=torch.float64).to(torch.int64), torch.randn(1, 5, 4)), {}, "floating-point"),
    ],
)
def test_bad_input(args, kwargs, match):
    with pytest.raises(CapacityError, match=match):
        probe.recall(*args, **kwargs)


def test_unknown_variant_lists_the_known_ones():
    with pytest.raises(CapacityError, match="unknown variant 'nope'; known: .*linear"):
        variants.get("nope")


def test_mismatched_devices_are_named():
    from lacapacity.base import _validate

    with pytest.raises(CapacityError, match="tensors must be on one device, got keys on cpu, values on meta"):
        _validate.same_device(keys=torch.zeros(1), values=torch.zeros(1, device="meta"))


def test_decode_false_skips_only_the_argmax_recall():
    K, V = keys.make("gaussian", 40, 8, batch=2, seed=0), values.make("gaussian", 40, 8, batch=2, seed=1)
    full = probe.recall(LIN, K, V, checkpoints=[10, 40], per_query=True)
    lean = probe.recall(LIN, K, V, checkpoints=[10, 40], per_query=True, decode=False)
    assert (
        "recall" not in lean
        and "recall_q" not in lean
        and set(full.data_vars) - set(lean.data_vars) == {"recall", "recall_q"}
    )
    for m in lean.data_vars:
        assert lean[m].equals(full[m])
    assert json.loads(lean.attrs["config"])["decode"] is False
    with pytest.raises(CapacityError, match="decode must be True or False"):
        probe.recall(LIN, K, V, decode="no")
