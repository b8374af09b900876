"""A real model as an input (lacapacity.inputs.capture): the capture of each linear layer's kernel inputs is proved by
replay. The toolkit's recurrence of the family (``lacapacity.kernels.reference``), fed the captured q, k, v, gates and beta,
reproduces the kernel's own outputs and the final state the model keeps in its cache, in float32, on tiny random
configs built from the config classes (no download). A wrong convention (the log-gate taken as a gate, beta applied
twice, grouped heads mapped the other way) gives a large error: those runs are kept as tests.

Needs the extra ``models`` (transformers); skips without it.
"""

import dataclasses

import pytest
import torch

from lacapacity.errors import CapacityError
from lacapacity.inputs import capture

pytest.importorskip(
    "transformers", reason="capturing a model needs the extra: pip install 'linear-attention-capacity[models]'"
)

TYPES = ["qwen3_next", "qwen3_5_text", "olmo_hybrid", "kimi_linear", "nemotron_h", "minimax"]
T = 70  # over one 64-token chunk of the kernels, so their chunking is exercised


def _model(model_type: str) -> torch.nn.Module:
    model = capture.tiny(model_type, seed=1)
    if capture.family_of(model_type) == "mamba2":
        # random init makes the scan's output tiny beside its skip term D x (y / Dx ~ 1e-6), so the output less D x
        # would carry the skip's rounding; without the skip and with larger B, C, dt the scan's own output is tested
        with torch.no_grad():
            for mod in model.modules():
                if hasattr(mod, "D") and hasattr(mod, "dt_bias"):
                    mod.D.zero_()
                    mod.dt_bias.fill_(0.5)
                    mod.in_proj.weight.mul_(20)
    return model


@pytest.fixture(scope="module", params=TYPES)
def captured(request):
    model = _model(request.param)
    ids = torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(2))
    layers, output = capture.collect(model, ids)
    return request.param, model, layers, output


def _cached(output, layer):
    if layer.family == "decay":  # MiniMax's cache keeps K^T V per layer
        return output.cache.get_linear_cache(layer.index)[0].float()
    S = output.cache.get_recurrent_state(layer.index, state_idx=0)[0].float()
    return S.transpose(-1, -2) if layer.family == "mamba2" else S  # Mamba-2 keeps [P, N]: rows are the value


def test_replay_reproduces_outputs_and_cached_state(captured):
    model_type, model, layers, output = captured
    assert [L.index for L in layers] == [0]  # the linear layer of the two, once
    (layer,) = layers
    assert layer.family == capture.family_of(model_type)
    assert layer.tokens == T
    out, S = capture.replay(layer)
    assert capture.rel_rms(out, layer.out) <= 1e-5
    assert capture.rel_rms(S, layer.state) <= 1e-5
    assert capture.rel_rms(S, _cached(output, layer)) <= 1e-5
    assert float(layer.out.norm()) > 0 and float(S.norm()) > 0


# the same kernel functions in more model types: each runs once here (every layer that has a linear mixer), with the
# conventions checked on it; the fixture's types above run every test
MORE = ["qwen3_5_moe_text", "bailing_hybrid", "bamba", "falcon_h1", "zamba2", "granitemoehybrid"]


@pytest.mark.parametrize("model_type", MORE)
def test_more_types_share_the_kernels_and_replay(model_type):
    model = _model(model_type)
    ids = torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(2))
    layers, output = capture.collect(model, ids)
    assert layers and all(layer.family == capture.family_of(model_type) for layer in layers)
    for layer in layers:
        out, S = capture.replay(layer)
        assert capture.rel_rms(out, layer.out) <= 1e-5
        assert capture.rel_rms(S, layer.state) <= 1e-5
        assert capture.rel_rms(S, _cached(output, layer)) <= 1e-5
        for wrong in (_log_gate_as_gate, _beta_twice) + ((_heads_tiled,) if layer.family != "kda" else ()):
            bad_out, bad_S = capture.replay(wrong(layer))
            assert max(capture.rel_rms(bad_out, layer.out), capture.rel_rms(bad_S, layer.state)) > 1e-2


def test_the_chunked_replay_is_the_token_by_token_oracle(captured):
    """``replay`` without ``write`` runs chunk by chunk; with one, token by token through ``kernels.reference``: the
    same outputs and state (T = 70 spans two 64-token chunks, and five of KDA's 16), on the captured stream."""
    _, _, (layer,), _ = captured
    out, S = capture.replay(layer)
    oracle_out, oracle_S = capture.replay(layer, write=lambda S, t: S)
    assert capture.rel_rms(out, oracle_out) <= 1e-6
    assert capture.rel_rms(S, oracle_S) <= 1e-6


def test_the_chunked_replay_keeps_gates_that_underflow():
    """A head that forgets all at once (a gate of GATE_FLOOR, log -69) then keeps its state (gates near 1): the
    chunk's cumulative log-gates are large, and the decays between the later tokens must still be exact."""
    g = torch.Generator().manual_seed(0)
    H, T, d = 2, 40, 8
    k = torch.nn.functional.normalize(torch.randn(H, T, d, generator=g), dim=-1)
    alpha = 1 - 1e-3 * torch.rand(H, T, generator=g)
    alpha[:, 1:4] = capture.GATE_FLOOR
    for family, gate in (("gated_delta", alpha), ("kda", alpha[..., None].expand(H, T, d).contiguous())):
        v, beta = torch.randn(H, T, d, generator=g), torch.rand(H, T, generator=g)
        layer = capture.Layer(0, family, k, k, v, gate, beta, torch.zeros(H, T, d), torch.zeros(H, d, d))
        out, S = capture.replay(layer)
        oracle_out, oracle_S = capture.replay(layer, write=lambda S, t: S)
        assert capture.rel_rms(out, oracle_out) <= 1e-6
        assert capture.rel_rms(S, oracle_S) <= 1e-6


def _log_gate_as_gate(layer):
    return dataclasses.replace(layer, alpha=(-layer.alpha.log()).clamp(capture.GATE_FLOOR, 1.0))


def _beta_twice(layer):
    if layer.family == "decay":  # MiniMax writes k^T v unscaled: its gate applied twice instead
        return dataclasses.replace(layer, alpha=layer.alpha**2)
    if layer.beta is None:  # Mamba-2's write scale dt, already in v: apply it again
        return dataclasses.replace(layer, v=layer.v * layer.dt[..., None])
    return dataclasses.replace(layer, beta=layer.beta**2)


def _heads_tiled(layer):
    """Key head j serving value heads j, j + h, ... (repeat, not repeat_interleave); MiniMax, whose heads are not
    grouped: the per-head gates (its slope rates) given to the heads in the other order."""
    if layer.family == "decay":
        return dataclasses.replace(layer, alpha=layer.alpha.flip(0))
    return dataclasses.replace(layer, q=layer.q[::2].repeat(2, 1, 1), k=layer.k[::2].repeat(2, 1, 1))


@pytest.mark.parametrize("wrong", [_log_gate_as_gate, _beta_twice, _heads_tiled], ids=["log_gate", "beta2", "heads"])
def test_a_wrong_convention_is_caught(captured, wrong):
    model_type, _, (layer,), _ = captured
    if wrong is _heads_tiled and model_type == "kimi_linear":
        pytest.skip("KDA has one value head per key head: no grouping to get wrong")
    bad = wrong(layer)
    out, S = capture.replay(bad)
    assert max(capture.rel_rms(out, layer.out), capture.rel_rms(S, layer.state)) > 1e-2


def test_the_proof_adds_mamba2s_skip_back():
    """With Nemotron-H's random init the scan's output is about 1e-6 of its skip term D x: the output less D x keeps
    only the skip's rounding (3e-2 against the replay, seen), so ``proof`` compares outputs with the skip added back
    to both; the state, which the skip never enters, is compared as it is."""
    model = capture.tiny("nemotron_h", seed=1)
    ids = torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(2))
    (layer,), _ = capture.collect(model, ids)
    assert layer.skip is not None and float(layer.skip.norm()) > 1e3 * float(layer.out.norm())
    assert capture.proof(layer) <= 1e-5
    out, S = capture.replay(layer)
    assert capture.rel_rms(S, layer.state) <= 1e-5


def test_a_model_without_a_captured_family_is_one_line():
    with pytest.raises(CapacityError, match=r"model type 'llama' has no linear-attention layer.*qwen3_next"):
        capture.family_of("llama")


def test_the_linear_type_of_a_multimodal_config_is_its_text_models():
    from types import SimpleNamespace as C

    assert capture.linear_type(C(model_type="qwen3_5", text_config=C(model_type="qwen3_5_text"))) == "qwen3_5_text"
    assert capture.linear_type(C(model_type="qwen3_next")) == "qwen3_next"
    assert capture.linear_type(C(model_type="llava", text_config=C(model_type="llama"))) == "llava"
    with pytest.raises(CapacityError, match=r"^model type 'qwen3_5' has no linear-attention layer.*qwen3_5_text"):
        capture.family_of("qwen3_5")  # its text model is, once the config says so


def test_minimax_lightning_attention_is_read_by_hooks_on_its_parts():
    """MiniMax has no kernel function: its capture comes from hooks on the layer's activation and norm. Its gates are
    the layer's exp(-slope_rate), one per head, at every token; its state is the cache's ``get_linear_cache``."""
    model = capture.tiny("minimax", seed=1)
    (layer,), output = capture.collect(model, torch.randint(0, 256, (1, T), generator=torch.Generator().manual_seed(2)))
    slope = model.model.layers[0].self_attn.slope_rate.reshape(-1)
    torch.testing.assert_close(layer.alpha, torch.exp(-slope)[:, None].expand(-1, T))
    assert layer.beta is None and layer.family == "decay"
    assert capture.rel_rms(capture.replay(layer)[1], output.cache.get_linear_cache(0)[0]) <= 1e-5


def test_a_transformers_without_the_family_is_one_line(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers, "Qwen3NextConfig", None)
    with pytest.raises(CapacityError, match=r"transformers .* has no Qwen3NextConfig .*5\.2 or later"):
        capture.tiny("qwen3_next")
