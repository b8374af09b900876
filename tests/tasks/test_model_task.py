"""The model task (capacity/tasks/model): a hybrid model's heads measured on a text, through the engine and the
command line. Its numbers are held to computations of their own here (the model's cached state read back by hand,
the state rounded to bfloat16 by hand); its reuse key to the weights, the text and the tokenizer; its bad inputs to
one line and exit 2 with nothing written.

Needs the extra ``models`` (transformers); skips without it.
"""

import json

import numpy as np
import pytest
import torch
import xarray as xr

from lacapacity.errors import CapacityError
from lacapacity.inputs import capture
from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks.model import source
from lacapacity.tasks.model.task import Model

pytest.importorskip(
    "transformers", reason="the model task needs the extra: pip install 'linear-attention-capacity[models]'"
)

N = 64
SETS = ["variant=gated_delta,linear", f"n={N}", "ages=0,1,4,16", "window=8", "formats=bfloat16,int8/row+ef"]


def _sets(*extra):
    return [a for s in (*SETS, *extra) for a in ("--set", s)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A tiny random OLMo-Hybrid saved with save_pretrained (no tokenizer: the text is read as bytes)."""
    path = tmp_path_factory.mktemp("model") / "olmo"
    capture.tiny("olmo_hybrid", seed=3).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def ran(folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    from lacapacity.sweep import runner

    study = Study(
        "model",
        "",
        Grid(variant=("gated_delta", "linear"), n=(N,), d=(64,)),
        Model(model=str(folder), ages=(0, 1, 4, 16), window=8, formats=("bfloat16", "int8/row+ef")),
    )
    result = runner.run(study, out=out, quiet=True, executor="serial")
    return out, result


@pytest.mark.slow  # about 10-25 s on the loaded 2-core VM (an engine run of a model)
def test_the_numbers_are_the_models(ran, folder):
    out, _ = ran
    with xr.open_dataset(out / "model.nc") as ds:
        assert list(ds.layer.values) == [0] and ds.sizes["head"] == 4 and list(ds.age.values) == [0, 1, 4, 16]
        assert ds.attrs["tokenizer"] == "bytes" and ds.attrs["family"] == "gated_delta"
        err = ds.recall_error.sel(variant="gated_delta").squeeze().values  # [head, age]
        prec = ds.precision_error.sel(variant="gated_delta").squeeze().values  # [head, format]
        gates = ds.gate_mean.sel(variant="gated_delta").squeeze().values
        # the model's numbers are the same in every cell
        np.testing.assert_array_equal(ds.recall_error.sel(variant="linear").squeeze().values, err)
    # independently: the model's own cached state, read back with the last pair's key, by hand
    model = source.load(str(folder), None).model
    ids = torch.tensor([list(source.DEFAULT_TEXT.read_bytes()[:N])])
    (layer,), output = capture.collect(model, ids)
    S = output.cache.get_recurrent_state(0, state_idx=0)[0].double()  # [H, d, dv]
    k, v = layer.k[:, -1].double(), layer.v[:, -1].double()
    want = ((torch.einsum("hd,hde->he", k, S) - v) ** 2).sum(-1) / (v**2).sum(-1)
    np.testing.assert_allclose(err[:, 0], want.numpy(), rtol=1e-5)
    np.testing.assert_allclose(gates, layer.alpha.double().mean(dim=1).numpy(), rtol=1e-6)
    # the state rounded to bfloat16 after every token, by hand (a plain loop of the gated delta rule)
    H, T, d = layer.k.shape
    S32, Sbf = torch.zeros(H, d, layer.v.shape[-1]), torch.zeros(H, d, layer.v.shape[-1])
    o32, obf = [], []
    for t in range(T):
        kt, vt, a, b = layer.k[:, t], layer.v[:, t], layer.alpha[:, t, None, None], layer.beta[:, t, None]
        for S, outs, rnd in ((S32, o32, False), (Sbf, obf, True)):
            S.mul_(a)
            S.add_(kt[:, :, None] * (b * (vt - torch.einsum("hd,hde->he", kt, S)))[:, None, :])
            if rnd:
                S.copy_(S.to(torch.bfloat16).float())
            outs.append(torch.einsum("hd,hde->he", layer.q[:, t], S))
    o32, obf = torch.stack(o32, 1).double(), torch.stack(obf, 1).double()
    want = ((obf - o32).pow(2).sum(dim=(1, 2)) / o32.pow(2).sum(dim=(1, 2))).sqrt()
    np.testing.assert_allclose(prec[:, 0], want.numpy(), rtol=0.05)
    assert (prec[:, 0] > 0).all()


@pytest.mark.slow  # about 10-25 s on the loaded 2-core VM (an engine run of a model)
def test_a_second_run_reuses_and_new_weights_or_text_do_not(ran, folder, tmp_path):
    out, _ = ran
    from lacapacity.sweep import runner

    base = Model(model=str(folder), ages=(0, 1, 4, 16), window=8, formats=("bfloat16", "int8/row+ef"))
    grid = Grid(variant=("gated_delta", "linear"), n=(N,), d=(64,))
    again = runner.run(Study("model", "", grid, base), out=out, quiet=True, executor="serial")
    assert again.measured == 0
    text = tmp_path / "t.txt"
    text.write_bytes(source.DEFAULT_TEXT.read_bytes()[:N] + b"!")
    assert source.digest(str(folder), str(text)) != source.digest(str(folder), None)
    other = tmp_path / "olmo2"
    model = capture.tiny("olmo_hybrid", seed=3)
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] += 1e-3
    model.save_pretrained(other)
    assert source.digest(str(other), None) != source.digest(str(folder), None)
    assert base.to_json()["digest"] == source.digest(str(folder), None)


@pytest.mark.slow  # about 10-25 s on the loaded 2-core VM (an engine run of a model)
def test_the_command_runs_on_a_random_config_and_draws(cli, tmp_path):
    ran = cli.here(
        "run", "model", *_sets("model=random:kimi_linear"), "--out", tmp_path, "--quiet", "--executor", "serial"
    )
    assert ran.returncode == 0, ran.stderr
    with xr.open_dataset(tmp_path / "model.nc") as ds:
        assert ds.attrs["family"] == "kda" and ds.attrs["model_type"] == "kimi_linear"
        assert np.isfinite(ds.recall_error.values).all() and np.isfinite(ds.precision_error.values).all()
    for name in ("model-maps", "model-recall", "model-precision"):
        assert (tmp_path / "figures" / f"model_{name}.png").is_file()


@pytest.fixture(scope="module")
def bad(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    (root / "empty").mkdir()
    llama = root / "llama"
    llama.mkdir()
    (llama / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    broken = root / "broken"
    capture.tiny("qwen3_next").config.save_pretrained(broken)
    (broken / "model.safetensors").write_bytes(b"not weights")
    short = root / "short.txt"
    short.write_text("too short")
    return root


@pytest.mark.parametrize(
    "case, fragments",
    [
        ("model=BAD/llama", ["has no linear-attention layer", "qwen3_next (gated_delta)", "nemotron_h (mamba2)"]),
        ("model=Qwen/Qwen3.5-0.8B", ["hub id cannot be downloaded here", "pass its folder"]),
        ("model=BAD/empty", ["is not a model (no config.json)"]),
        ("text=BAD/short.txt", ["the text has 9 tokens, fewer than n = 64"]),
        ("model=BAD/broken", ["weights in", "failed to load"]),
        ("model=random:llama", ["model type 'llama' has no linear-attention layer"]),
    ],
    ids=["type", "hub", "folder", "short", "weights", "random"],
)
def test_bad_input_is_one_line_and_writes_nothing(cli, bad, tmp_path, case, fragments):
    out = tmp_path / "out"
    ran = cli.here("run", "model", *_sets(case.replace("BAD", str(bad))), "--out", out, "--quiet")
    cli.fails(ran, *fragments)
    assert not out.exists() or not any(out.rglob("*.nc"))


@pytest.mark.parametrize("kind", ["qwen3_5", "qwen3_5_moe"])
def test_a_multimodal_qwen3_5_checkpoint_is_measured_through_its_text_model(tmp_path, kind):
    """A Qwen3.5 checkpoint (model type qwen3_5: a vision tower and a qwen3_5_text language model; the MoE one
    likewise) is loaded as its language model, whose Gated DeltaNet layers are captured and proved; the multimodal
    model itself, given text, is captured the same way, to the same keys."""
    import transformers

    text = {"vocab_size": 256, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8, "layer_types": ["linear_attention", "full_attention"], "pad_token_id": 0}  # fmt: skip
    vision = {"depth": 1, "hidden_size": 16, "intermediate_size": 32, "num_heads": 2, "out_hidden_size": 32}
    torch.manual_seed(4)
    if kind == "qwen3_5":
        full = transformers.Qwen3_5ForConditionalGeneration(
            transformers.Qwen3_5Config(text_config=text, vision_config=vision)
        ).eval()
    else:
        text |= {"num_experts": 2, "num_experts_per_tok": 1, "moe_intermediate_size": 32}
        text["shared_expert_intermediate_size"] = 32
        full = transformers.Qwen3_5MoeForConditionalGeneration(
            transformers.Qwen3_5MoeConfig(text_config=text, vision_config=vision)
        ).eval()
    assert full.config.model_type == kind
    full.save_pretrained(tmp_path / "qwen35")
    source.check(str(tmp_path / "qwen35"))
    loaded = source.load(str(tmp_path / "qwen35"), None)
    assert loaded.family == "gated_delta" and loaded.model.config.model_type == f"{kind}_text"
    ids = loaded.ids[:, :70]
    (layer,), output = capture.collect(loaded.model, ids)
    assert capture.proof(layer) <= 1e-5
    cached = output.cache.get_recurrent_state(0, state_idx=0)[0].float()
    assert capture.rel_rms(capture.replay(layer)[1], cached) <= 1e-5
    (direct,), _ = capture.collect(full, ids)
    assert capture.proof(direct) <= 1e-5
    torch.testing.assert_close(direct.k, layer.k)


def test_minimax_heads_are_measured_as_a_decay_memory():
    """A random MiniMax's lightning heads through the task's measurements: the closed form is T22 at each head's
    own gate exp(-slope_rate) (its keys are not unit, so reads are divided by ||k||^2 as for Mamba-2)."""
    from lacapacity import theory
    from lacapacity.tasks.model import heads

    loaded = source.load("random:minimax", None)
    assert loaded.family == "decay"
    (layer,), _ = capture.collect(loaded.model, loaded.ids[:, :N])
    got = heads.recall(layer, (0, 1, 4, 16), 8)
    slope = loaded.model.model.layers[0].self_attn.slope_rate.reshape(-1).double()
    np.testing.assert_allclose(got["gate_mean"], torch.exp(-slope).numpy(), rtol=1e-6)
    assert np.isnan(got["beta_mean"]).all()
    want = theory.forgetting_error(np.arange(N), N, layer.k.shape[-1], "decay", alpha=float(got["gate_mean"][0]))
    np.testing.assert_allclose(got["fullness_theory"][0], np.mean(want), rtol=1e-9)
    S = layer.state.double()
    k, v = layer.k[:, -1].double(), layer.v[:, -1].double()
    read = torch.einsum("hd,hde->he", k, S) / (k**2).sum(-1, keepdim=True)
    np.testing.assert_allclose(
        got["recall_error"][:, 0], (((read - v) ** 2).sum(-1) / (v**2).sum(-1)).numpy(), rtol=1e-5
    )


def test_the_maps_of_an_additive_rule_say_it_has_no_beta():
    """Mamba-2's and MiniMax's heads have no beta (beta_mean all NaN): the maps are drawn, the beta panel says so (the
    figure was refused as empty before); a Dataset without beta_mean at all is still one line."""
    from lacapacity.tasks.model import figures

    names = ("coherence2", "coherence2_random", "effective_rank", "gate_mean", "fullness", "fullness_theory")
    rng = np.random.default_rng(0)
    ds = xr.Dataset(
        {v: (("layer", "head"), rng.uniform(0.1, 1, (2, 3))) for v in names}, coords={"layer": [0, 2], "n": [64]}
    )
    ds["beta_mean"] = (("layer", "head"), np.full((2, 3), np.nan))
    fig = figures.model_maps(ds)
    assert any("additive" in t.get_text() for ax in fig.axes for t in ax.texts)
    with pytest.raises(CapacityError, match="missing variable 'beta_mean'"):
        figures.model_maps(ds.drop_vars("beta_mean"))


def test_without_transformers_the_line_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a)
    )
    with pytest.raises(CapacityError, match=r"needs transformers: pip install 'linear-attention-capacity\[models\]'"):
        source.check("random:qwen3_next")
