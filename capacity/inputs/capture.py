"""A real model as an input: the q, k, v, gates and beta of each linear-attention head, captured from one forward pass.

A hybrid model of ``transformers`` computes each linear-attention layer by one module-level kernel function
(``torch_chunk_gated_delta_rule`` in ``qwen3_next``, ``qwen3_5``, ``qwen3_5_moe`` and ``olmo_hybrid``;
``chunk_kimi_delta_attention`` in ``kimi_linear`` and ``bailing_hybrid``; ``mamba2_chunk_scan`` in ``nemotron_h``,
``bamba``, ``falcon_h1``, ``zamba2`` and ``granitemoehybrid``: ``FAMILIES``). ``capture`` replaces that function in the model's
module for the length of one forward pass by a wrapper that calls the original, unchanged, and hands what it received
and returned to a callback, one layer at a time: nothing of the model's code is copied, and memory holds one
layer's capture at a time (the callback keeps what it wants). MiniMax's lightning attention (``minimax``) computes its
recurrence inside the layer's ``forward``, with no function to wrap: forward hooks on the layer's own parts read
what the recurrence receives (its activation's output, split into q, k, v per head as the layer splits it) and
returns (the norm's input, the layer's returned state), again without copying its code. A multimodal model whose
language model is one of these (Qwen3.5, type ``qwen3_5``, runs a ``qwen3_5_text`` model) is captured through it
(``linear_type``).

What a ``Layer`` holds is the kernel's input in the toolkit's row convention (state ``S`` of ``[d, dv]`` per head, a
write ``S = ... + k^T v``, a read ``q S``), per head ``h`` of the state, in float32:

    family        memory (kernels mode)                 q, k                        alpha [H, T](, d)   beta     v
    gated_delta   S = alpha (I - b k^T k) S + b k^T v   l2-normalised as the kernel  exp(g)             beta     v
                  (q also times d^-1/2)                  does (``l2norm``, eps 1e-6)
    kda           S = (I - b k^T k) Diag(alpha) S + ...  as gated_delta               exp(g), per channel beta     v
    mamba2        S = alpha S + k^T v (mode decay)       q = C, k = B                 exp(A dt)          (none)   dt x
    decay         S = alpha S + k^T v (MiniMax)          as the layer splits them     exp(-slope_rate)   (none)   v

Grouped heads map as the model maps them: a key head ``j`` serves value heads ``j r .. j r + r - 1`` (``r`` value
heads per key head: ``repeat_interleave``, as the kernels do), and Mamba-2's B and C groups likewise. For
Mamba-2, ``dt = clamp(softplus(dt_raw + dt_bias), *dt_limit)`` as the scan computes it, and the layer's output
``out`` is the scan's output less its skip term ``D x``. ``out`` ``[H, T, dv]`` and ``state`` ``[H, d, dv]`` are
what the kernel itself returned (Mamba-2's ``[P, N]`` state transposed to the row convention); ``replay`` (in
``lacapacity.inputs.capture``) recomputes both from the captured inputs with the toolkit's own recurrences, every head
at once and a chunk of tokens at a time (held to ``lacapacity.kernels.reference``'s token-by-token oracle), which is
the proof that a capture is what the model computed: capture and replay of every head cost less than a second
forward pass (``benchmarks/model_capture.py``).

A gate of exactly 0 (``exp(g)`` underflows below float32's smallest number for a head that forgets everything at
once) is written as ``GATE_FLOOR``; a beta of exactly 0 as ``BETA_FLOOR`` and one of exactly 2 as ``BETA_CEIL`` (the
kernels take gates in (0, 1] and beta in (0, 2)): changes far below float32's resolution of the state.

``tiny(model_type)`` builds a small random model of a supported type from its config class (no download), for tests,
examples and the comparison with a trained model.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch

from lacapacity.errors import CapacityError
from lacapacity.kernels import reference

Family = Literal["gated_delta", "kda", "mamba2", "decay"]
INSTALL = "pip install 'linear-attention-capacity[models]'"
GATE_FLOOR = 1e-30
BETA_FLOOR = 1e-30
BETA_CEIL = 2.0 - 2.0**-22  # the largest float32 below 2 (OLMo-Hybrid's beta is 2 sigmoid(.), which can round to 2)
_L2_EPS = 1e-6  # the kernels' l2norm: x * rsqrt(sum x^2 + eps)


@dataclass(frozen=True)
class _Kernel:
    family: Family
    function: str  # the module-level function the layer calls; with hooked, the layer class whose parts are hooked
    hooked: bool = False


# model_type (config.model_type) -> the family of its linear layers and the kernel function its module calls
FAMILIES: dict[str, _Kernel] = {
    "qwen3_next": _Kernel("gated_delta", "torch_chunk_gated_delta_rule"),
    "qwen3_5_text": _Kernel("gated_delta", "torch_chunk_gated_delta_rule"),
    "qwen3_5_moe_text": _Kernel("gated_delta", "torch_chunk_gated_delta_rule"),
    "olmo_hybrid": _Kernel("gated_delta", "torch_chunk_gated_delta_rule"),
    "kimi_linear": _Kernel("kda", "chunk_kimi_delta_attention"),
    "bailing_hybrid": _Kernel("kda", "chunk_kimi_delta_attention"),
    "nemotron_h": _Kernel("mamba2", "mamba2_chunk_scan"),
    "bamba": _Kernel("mamba2", "mamba2_chunk_scan"),
    "falcon_h1": _Kernel("mamba2", "mamba2_chunk_scan"),
    "zamba2": _Kernel("mamba2", "mamba2_chunk_scan"),
    "granitemoehybrid": _Kernel("mamba2", "mamba2_chunk_scan"),
    "minimax": _Kernel("decay", "MiniMaxLightningAttention", hooked=True),
}


@dataclass(frozen=True)
class Layer:
    """One linear-attention layer's capture, float32 on the CPU, heads first.

    ``q``, ``k`` ``[H, T, d]``; ``v`` ``[H, T, dv]``; ``alpha`` ``[H, T]`` (``[H, T, d]`` for kda); ``beta``
    ``[H, T]`` or None (mamba2); ``out`` ``[H, T, dv]`` and ``state`` ``[H, d, dv]``: the kernel's own output and
    final state; ``dt`` ``[H, T]``: Mamba-2's step (already in ``v`` and ``alpha``), None otherwise; ``skip``
    ``[H, T, dv]``: Mamba-2's skip term ``D x``, which the kernel added to ``out`` (``out`` is without it), None
    otherwise. ``index`` is the layer's ``layer_idx`` in the model.
    """

    index: int
    family: Family
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    alpha: torch.Tensor
    beta: torch.Tensor | None
    out: torch.Tensor
    state: torch.Tensor
    dt: torch.Tensor | None = None
    skip: torch.Tensor | None = None

    @property
    def heads(self) -> int:
        return int(self.k.shape[0])

    @property
    def tokens(self) -> int:
        return int(self.k.shape[1])


def family_of(model_type: str) -> Family:
    """The family of a model type's linear layers; one line naming the supported types otherwise."""
    if model_type not in FAMILIES:
        known = ", ".join(f"{m} ({k.family})" for m, k in FAMILIES.items())
        raise CapacityError(
            f"model type {model_type!r} has no linear-attention layer this toolkit captures; supported: {known}"
        )
    return FAMILIES[model_type].family


def linear_type(config: Any) -> str:
    """The model type whose linear layers a ``transformers`` config's model runs: its own ``model_type``, or, for a
    multimodal config whose own type is not captured, its ``text_config``'s where that one is (a Qwen3.5 checkpoint,
    type ``qwen3_5``, runs a ``qwen3_5_text`` language model: ``AutoModelForCausalLM`` loads that model from it)."""
    own = str(getattr(config, "model_type", ""))
    text = getattr(config, "text_config", None)
    inner = str(getattr(text, "model_type", "")) if text is not None else ""
    return inner if own not in FAMILIES and inner in FAMILIES else own


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(dim=-1, keepdim=True) + _L2_EPS)


def _heads_first(x: torch.Tensor) -> torch.Tensor:
    """``[1, T, H, ...]`` -> float32 ``[H, T, ...]`` (batch 1)."""
    return x[0].transpose(0, 1).float().contiguous()


def _grouped(x: torch.Tensor, heads: int) -> torch.Tensor:
    """Key heads ``[h, T, d]`` -> one per value head ``[heads, T, d]``: key head j serves value heads j r .. j r + r - 1."""
    return x.repeat_interleave(heads // x.shape[0], dim=0)


def _delta_layer(index: int, family: Family, args: dict[str, Any], result: Any) -> Layer:
    q, k, v = (_heads_first(args[n]) for n in ("query", "key", "value"))
    g, beta = _heads_first(args["g"]), _heads_first(args["beta"])
    H = v.shape[0]
    q, k = _grouped(q, H), _grouped(k, H)
    if args.get("use_qk_l2norm_in_kernel", False):
        q, k = _l2norm(q), _l2norm(k)
    q = q * q.shape[-1] ** -0.5
    out, state = result
    if state is None:
        raise CapacityError(f"layer {index}: the kernel returned no final state (run the model with use_cache=True)")
    return Layer(
        index=index,
        family=family,
        q=q,
        k=k,
        v=v,
        alpha=g.exp().clamp_min(GATE_FLOOR),
        beta=beta.clamp(BETA_FLOOR, BETA_CEIL),
        out=_heads_first(out),
        state=state[0].float(),
    )


def _mamba2_layer(index: int, args: dict[str, Any], result: Any) -> Layer:
    x = args["hidden_states"]  # [1, T, H, P]
    H = x.shape[2]
    dt = args["dt"]
    if args.get("dt_bias") is not None:
        dt = dt + args["dt_bias"].to(dt.dtype)
    if args.get("dt_softplus", False):
        dt = torch.nn.functional.softplus(dt)
    low, high = args.get("dt_limit", (0.0, float("inf")))
    dt = torch.clamp(dt, min=low, max=high).float()[0].transpose(0, 1)  # [H, T]
    A = args["A"].float()  # [H], negative
    out, state = result
    x = _heads_first(x)  # [H, T, P]
    D = args.get("D")
    out = _heads_first(out)
    skip = None if D is None else D.float()[:, None, None] * x
    if skip is not None:
        out = out - skip
    return Layer(
        index=index,
        family="mamba2",
        q=_grouped(_heads_first(args["C"]), H),
        k=_grouped(_heads_first(args["B"]), H),
        v=dt[..., None] * x,
        alpha=torch.exp(A[:, None] * dt).clamp_min(GATE_FLOOR),
        beta=None,
        out=out,
        state=state[0].float().transpose(-1, -2).contiguous(),  # [H, P, N] -> [H, N, P]
        dt=dt,
        skip=skip,
    )


def _lightning_layer(mod: torch.nn.Module, qkv: torch.Tensor, out: torch.Tensor, state: torch.Tensor) -> Layer:
    """MiniMax's lightning attention from what its parts saw: ``qkv`` the activation's output ``[1, T, H 3 dh]`` (each
    head's q, k, v side by side, as the layer splits it), ``out`` the recurrence's output, the norm's input
    ``[1, T, H dh]``, ``state`` the layer's returned ``K^T V`` ``[1, H, dh, dh]``; the gate ``exp(-slope_rate)`` per
    head (a buffer), the same at every token."""
    H, dh = int(mod.num_attention_heads), int(mod.head_dim)  # type: ignore[arg-type]  # ints on the layer
    T = qkv.shape[1]
    q, k, v = (_heads_first(x) for x in torch.split(qkv.reshape(1, T, H, 3 * dh), dh, dim=3))
    slope = mod.slope_rate.float().reshape(H)  # type: ignore[operator]  # a [H, 1, 1] buffer
    return Layer(
        index=int(mod.layer_idx),  # type: ignore[arg-type]
        family="decay",
        q=q,
        k=k,
        v=v,
        alpha=torch.exp(-slope)[:, None].expand(H, T).clamp_min(GATE_FLOOR).contiguous(),
        beta=None,
        out=_heads_first(out.reshape(1, T, H, dh)),
        state=state[0].float(),
    )


@contextlib.contextmanager
def _hooked(model: torch.nn.Module, cls: type, on_layer: Callable[[Layer], None]) -> Iterator[list[int]]:
    """A layer that computes its recurrence inside its own ``forward`` (MiniMax's lightning attention): forward hooks on
    its parts read what the recurrence receives (the activation's output) and returns (the norm's input, the layer's
    second output), and hand the layer to ``on_layer`` as it returns; yields the layers seen."""
    seen: list[int] = []
    handles = []
    for mod in model.modules():
        if not isinstance(mod, cls):
            continue
        parts: dict[str, torch.Tensor] = {}

        def act(_m: torch.nn.Module, _a: object, out: torch.Tensor, parts: dict[str, torch.Tensor] = parts) -> None:
            parts["qkv"] = out

        def norm(_m: torch.nn.Module, args: tuple[torch.Tensor, ...], parts: dict[str, torch.Tensor] = parts) -> None:
            parts["out"] = args[0]

        def done(m: torch.nn.Module, _a: object, result: Any, parts: dict[str, torch.Tensor] = parts) -> None:
            if result[1] is None:
                raise CapacityError(f"layer {m.layer_idx}: the layer returned no final state")
            layer = _lightning_layer(m, parts.pop("qkv"), parts.pop("out"), result[1])
            seen.append(layer.index)
            on_layer(layer)

        handles += [
            mod.act_fn.register_forward_hook(act),  # type: ignore[union-attr]  # the layer's own modules
            mod.norm.register_forward_pre_hook(norm),  # type: ignore[union-attr]
            mod.register_forward_hook(done),
        ]
    try:
        yield seen
    finally:
        for h in handles:
            h.remove()


_ARGS = {
    "gated_delta": ("query", "key", "value", "g", "beta"),
    "kda": ("query", "key", "value", "g", "beta"),
    "mamba2": ("hidden_states", "dt", "A", "B", "C", "chunk_size"),
}


def _require_transformers() -> None:
    if importlib.util.find_spec("transformers") is None:
        raise CapacityError(f"capturing a model's heads needs transformers: {INSTALL}")


@contextlib.contextmanager
def _wrapped(model: torch.nn.Module, on_layer: Callable[[Layer], None]) -> Iterator[list[int]]:
    """Within the block, the model's kernel function hands each call to ``on_layer``; yields the layers seen."""
    model_type = linear_type(model.config)
    kernel = FAMILIES.get(model_type)
    if kernel is None:
        family_of(model_type)  # raises the one line
        raise AssertionError  # unreachable: family_of raised
    module = sys.modules[type(model).__module__]
    original = getattr(module, kernel.function, None)
    if kernel.hooked and isinstance(original, type):
        with _hooked(model, original, on_layer) as hooked:
            yield hooked
        return
    if original is None or kernel.hooked:
        raise CapacityError(
            f"{type(model).__module__} has no {kernel.function}: this transformers version is not one the capture knows"
        )
    current: list[int] = []
    seen: list[int] = []

    def pre_hook(mod: torch.nn.Module, _args: object) -> None:
        current.append(int(mod.layer_idx))  # type: ignore[arg-type]  # an int on every mixer module

    def post_hook(mod: torch.nn.Module, _args: object, _out: object) -> None:
        current.pop()

    def wrapper(*args: Any, **kw: Any) -> Any:
        result = original(*args, **kw)
        named = dict(zip(_ARGS[kernel.family], args, strict=False)) | kw
        if not current:
            raise CapacityError(f"{kernel.function} was called outside a layer of the model")
        index = current[-1]
        if kernel.family == "mamba2":
            layer = _mamba2_layer(index, named, result)
        else:
            layer = _delta_layer(index, kernel.family, named, result)
        seen.append(index)
        on_layer(layer)
        return result

    handles = []
    for mod in model.modules():
        if isinstance(getattr(mod, "layer_idx", None), int) and mod is not model:
            handles.append(mod.register_forward_pre_hook(pre_hook))
            handles.append(mod.register_forward_hook(post_hook))
    setattr(module, kernel.function, wrapper)
    try:
        yield seen
    finally:
        setattr(module, kernel.function, original)
        for h in handles:
            h.remove()


def capture(model: torch.nn.Module, ids: torch.Tensor, on_layer: Callable[[Layer], None]) -> Any:
    """Run ``model`` once on token ids ``[1, T]`` (eval mode, no gradient, with its cache) and hand each linear
    layer's ``Layer`` to ``on_layer`` as the layer runs; returns the model's output (its ``past_key_values`` hold the
    cached recurrent states). One line if the model type has no captured family or no linear layer ran."""
    _require_transformers()
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise CapacityError(f"capture takes the token ids of one text, shape [1, T]; got {tuple(ids.shape)}")
    was_training = model.training
    model.eval()
    try:
        with _wrapped(model, on_layer) as seen, torch.no_grad():
            output = model(input_ids=ids, use_cache=True)
    finally:
        model.train(was_training)
    if not seen:
        raise CapacityError(f"{type(model).__name__}: no linear-attention layer ran on this text")
    return output


def collect(model: torch.nn.Module, ids: torch.Tensor) -> tuple[list[Layer], Any]:
    """Every linear layer's capture in the order the layers ran, and the model's output (memory: all layers)."""
    layers: list[Layer] = []
    output = capture(model, ids, layers.append)
    return layers, output


def proof(layer: Layer, replayed: tuple[torch.Tensor, torch.Tensor] | None = None) -> float:
    """The largest relative RMS error of ``replay(layer)`` against what the kernel returned: its outputs (with
    Mamba-2's skip term added back to both, so that a scan output far smaller than the skip is not judged by the
    skip's rounding) and its final state. ``replayed``: ``replay(layer)`` where it was computed already."""
    out, S = replay(layer) if replayed is None else replayed
    if layer.skip is not None:
        out, ref = out + layer.skip, layer.out + layer.skip
    else:
        ref = layer.out
    return max(rel_rms(out, ref), rel_rms(S, layer.state))


def rel_rms(x: torch.Tensor, ref: torch.Tensor) -> float:
    """||x - ref|| / ||ref|| over all entries, in float64 (0 when both are 0)."""
    num = float((x.double() - ref.double()).norm())
    den = float(ref.double().norm())
    return num / den if den > 0 else num


_MODE = {"gated_delta": "gated_delta", "kda": "kda", "mamba2": "decay", "decay": "decay"}


CHUNK = 64  # tokens per step of the chunked replay
CHANNEL_CHUNK = 16  # for kda, whose per-channel decays make a [H, C, C, d] tensor per chunk (work ~ T C d)


def _decays(logs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One chunk's log-gates ``[H, C]`` or ``[H, C, d]`` (float64, so that a cumulative sum of large negative logs keeps
    its differences) -> float32 ``decay`` ``[H, C, C(, d)]`` (gamma_t / gamma_j for j <= t, 0 above), ``now``
    (gamma_t) and ``end`` (gamma_C / gamma_j), ``[H, C(, d)]``, gamma the cumulative product of the chunk's gates."""
    lg = logs.cumsum(dim=1)
    C = lg.shape[1]
    upper = torch.ones(C, C, dtype=torch.bool).triu(1)
    diff = lg[:, :, None] - lg[:, None, :]
    diff = diff.float().masked_fill(upper[:, :, None] if lg.ndim == 3 else upper, float("-inf"))
    return diff.exp(), lg.exp().float(), (lg[:, -1:] - lg).exp().float()


def _chunk(
    S: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, logs: torch.Tensor, beta: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk of C tokens, every head at once: the outputs ``[H, C, dv]`` and the state after it ``[H, d, dv]``.

    Each token writes ``S_t = Diag(a_t) S_{t-1} + k_t^T w_t`` (a scalar gate, or one per key channel) with ``w_t = v_t``
    (decay) or ``w_t = b_t (v_t - k_t Diag(a_t) S_{t-1})`` (the delta rules), so within the chunk
    ``S_t = Diag(gamma_t) S_0 + sum_{j <= t} Diag(gamma_t / gamma_j) k_j^T w_j``: the delta rules' w solve one unit
    lower-triangular system, and ``q_t S_t`` and the chunk's last state follow by products.
    """
    decay, now, end = _decays(logs)
    if logs.ndim == 3:  # one gate per key channel (kda): sum over channels c of x_tc k_jc gamma_tc / gamma_jc
        kd = k[:, None] * decay  # [H, C, C, d]
        qk = (q[:, :, None] * kd).sum(-1)
        kk = (k[:, :, None] * kd).sum(-1) if beta is not None else None
        q_now, k_now, k_end, total = q * now, k * now, k * end, now[:, -1, :, None]
    else:
        qk = (q @ k.transpose(1, 2)) * decay
        kk = (k @ k.transpose(1, 2)) * decay if beta is not None else None
        q_now, k_now, k_end = q * now[..., None], k * now[..., None], k * end[..., None]
        total = now[:, -1, None, None]
    if beta is None:
        w = v
    else:
        b = beta[..., None]
        A = torch.eye(k.shape[1]) + (b * kk).tril(-1)  # type: ignore[operator]  # kk is computed where beta is given
        w = torch.linalg.solve_triangular(A, b * (v - k_now @ S), upper=False, unitriangular=True)
    return q_now @ S + qk @ w, total * S + k_end.transpose(1, 2) @ w


def replay(
    layer: Layer,
    *,
    state: torch.Tensor | None = None,
    write: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The layer's outputs ``[H, T, dv]`` and final state ``[H, d, dv]`` recomputed from its captured inputs by the
    recurrence of its family, in float32, every head at once: the output of token t is ``q_t S_t`` after token t is
    written.

    Without ``write``, chunk by chunk (``CHUNK`` tokens, ``CHANNEL_CHUNK`` for kda: the recurrence unrolled over the chunk, see ``_chunk``);
    with ``write(S, t)``, token by token by ``lacapacity.kernels.reference`` (the one-token oracle that
    ``kernels.update`` and the Triton kernels are held to), ``write`` applied to the state after token t is written
    and returning the state the next token sees (how a server's rounding of the state enters). Both give the same
    numbers to float32's rounding (tests/inputs/test_capture.py).

    ``state``: the initial state (zeros by default).
    """
    H, T, d = layer.k.shape
    dv = layer.v.shape[-1]
    S = torch.zeros(H, d, dv) if state is None else state.clone().float()
    out = torch.empty(H, T, dv)
    if write is None:
        logs = layer.alpha.double().log()
        step = CHANNEL_CHUNK if logs.ndim == 3 else CHUNK
        for t0 in range(0, T, step):
            sl = slice(t0, t0 + step)
            beta = None if layer.beta is None else layer.beta[:, sl]
            out[:, sl], S = _chunk(S, layer.q[:, sl], layer.k[:, sl], layer.v[:, sl], logs[:, sl], beta)
        return out, S
    mode = _MODE[layer.family]
    for t in range(T):
        S = reference.recurrence(
            layer.k[:, t : t + 1],
            layer.v[:, t : t + 1],
            mode=mode,
            beta=None if layer.beta is None else layer.beta[:, t : t + 1],
            gate=layer.alpha[:, t : t + 1],
            initial_state=S,
            normalize=False,
        )
        S = write(S, t)
        out[:, t] = (layer.q[:, t : t + 1] @ S)[:, 0]
    return out, S


def tiny(
    model_type: str, *, hidden: int = 32, layers: int = 2, heads: int = 2, head_dim: int = 8, seed: int = 0
) -> torch.nn.Module:
    """A random causal LM of ``model_type`` from its config class, float32, eval mode: ``layers`` layers (the first
    linear, the second full attention, alternating), hidden size ``hidden``, ``heads`` linear key heads of dimension
    ``head_dim`` (Gated DeltaNet: twice as many value heads, so grouped heads are exercised; Mamba-2: ``2 heads``
    heads in ``heads`` groups; KDA: one value head per key head; MiniMax: ``heads`` heads, blocks of 16 tokens),
    vocabulary of 256 (bytes). Every type of ``FAMILIES`` has one (Falcon-H1 and Zamba2 run Mamba-2 in every layer)."""
    _require_transformers()
    family_of(model_type)
    import transformers

    torch.manual_seed(seed)
    kinds = ["linear_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    common: dict[str, Any] = {
        "vocab_size": 256,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "pad_token_id": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }
    linear = {  # Gated DeltaNet's heads: twice as many value heads as key heads
        "linear_num_key_heads": heads,
        "linear_num_value_heads": 2 * heads,
        "linear_key_head_dim": head_dim,
        "linear_value_head_dim": head_dim,
        "head_dim": hidden // 2,
        "layer_types": kinds,
    }
    moe = {
        "num_experts": 2,
        "num_experts_per_tok": 1,
        "moe_intermediate_size": hidden,
        "shared_expert_intermediate_size": hidden,
    }
    mla = {  # Kimi Linear's and Ling's full attention, and one head per value head in their KDA layers
        "num_key_value_heads": 2,
        "kv_lora_rank": 8,
        "qk_rope_head_dim": 8,
        "v_head_dim": 8,
        "qk_nope_head_dim": 8,
        "layer_types": kinds,
        "mlp_layer_types": ["dense"] * layers,
    }
    mamba = {  # Mamba-2's heads: twice as many heads as B and C groups
        "mamba_n_heads": 2 * heads,
        "mamba_d_head": 2 * head_dim,
        "mamba_n_groups": heads,
        "mamba_d_state": head_dim,
        "mamba_chunk_size": 16,
    }
    mixers = ["mamba" if k == "linear_attention" else "attention" for k in kinds]
    # model type -> (config class, causal LM class, settings beyond ``common``)
    table: dict[str, tuple[str, str, dict[str, Any]]] = {
        "qwen3_next": ("Qwen3NextConfig", "Qwen3NextForCausalLM", linear | moe),
        "qwen3_5_text": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", linear),
        "qwen3_5_moe_text": ("Qwen3_5MoeTextConfig", "Qwen3_5MoeForCausalLM", linear | moe),
        "olmo_hybrid": ("OlmoHybridConfig", "OlmoHybridForCausalLM", linear | {"head_dim": None}),
        "kimi_linear": (
            "KimiLinearConfig",
            "KimiLinearForCausalLM",
            mla | {"linear_head_dim": head_dim, "linear_num_heads": heads},
        ),
        "bailing_hybrid": (
            "BailingHybridConfig",
            "BailingHybridForCausalLM",
            mla
            | {
                "head_dim": head_dim,
                "num_local_experts": 2,
                "num_experts_per_tok": 1,
                "moe_intermediate_size": hidden,
                "layer_group_size": 2,
                "num_mtp_layers": 0,
            },
        ),
        "minimax": (
            "MiniMaxConfig",
            "MiniMaxForCausalLM",
            {
                "num_attention_heads": heads,
                "head_dim": head_dim,
                "num_local_experts": 2,
                "num_experts_per_tok": 1,
                "layer_types": kinds,
                "block_size": 16,
            },
        ),
        "nemotron_h": (
            "NemotronHConfig",
            "NemotronHForCausalLM",
            {
                "head_dim": hidden // 2,
                "layers_block_type": kinds,
                "mamba_num_heads": 2 * heads,
                "mamba_head_dim": head_dim,
                "ssm_state_size": head_dim,
                "n_groups": heads,
                "chunk_size": 16,
            },
        ),
        "bamba": (
            "BambaConfig",
            "BambaForCausalLM",
            mamba | {"attn_layer_indices": [i for i, k in enumerate(kinds) if k == "full_attention"]},
        ),
        # every layer runs attention and Mamba-2 side by side
        "falcon_h1": ("FalconH1Config", "FalconH1ForCausalLM", mamba | {"mamba_d_ssm": 4 * heads * head_dim}),
        "granitemoehybrid": (
            "GraniteMoeHybridConfig",
            "GraniteMoeHybridForCausalLM",
            mamba
            | {
                "layer_types": mixers,
                "num_local_experts": 2,
                "num_experts_per_tok": 1,
                "shared_intermediate_size": hidden,
            },
        ),
        # Mamba-2 in every layer, the shared attention block beside it in "hybrid" ones
        "zamba2": (
            "Zamba2Config",
            "Zamba2ForCausalLM",
            {
                "layers_block_type": [m if m == "mamba" else "hybrid" for m in mixers],
                "mamba_d_state": head_dim,
                "mamba_ngroups": heads,
                "n_mamba_heads": 2 * heads,
                "chunk_size": 16,
                "use_mamba_kernels": False,
            },
        ),
    }
    config_name, model_name, settings = table[model_type]
    config_class = getattr(transformers, config_name, None)
    if config_class is None:
        raise CapacityError(
            f"transformers {transformers.__version__} has no {config_name} (model type {model_type!r}): install a release that has it (5.2 or later)"
        )
    settings = {k: v for k, v in settings.items() if v is not None}
    config = config_class(**(common | settings))
    cls = getattr(transformers, model_name)
    model: torch.nn.Module = cls(config).float().eval()
    return model
