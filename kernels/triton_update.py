"""Fused Triton update of a device-resident float32 state from a chunk of tokens (in place).

One generic kernel body per family, its compile-time flags (``tl.constexpr``) choosing the mode:

- ``_linear_kernel`` (mode ``linear``): S += K^T V as block dot products over token tiles,
  ``tl.dot`` of a [BK, BT] K^T tile with a [BT, BV] V tile, accumulated in float32 registers;
  the chunk of T tokens can be split over programs that add their partial sums atomically.
- ``_recurrent_kernel`` (``decay``, ``gla``, ``delta``, ``gated_delta``, ``kda``): one program
  owns a [BK, BV] tile of one state (all d rows, BV columns) in registers for the whole chunk
  and loops over the tokens: gate, delta correction and rank-1 update fused per token.

Both fuse the optional L2 normalisation of the keys and read fp32/bf16/fp16 inputs through
any strides (accumulating in float32). The math and the tiling are in README.md beside this file.

Kernel objects come in pairs: ``triton.jit`` for CUDA tensors, and the same Python function
wrapped by Triton's interpreter for CPU tensors, so that ``backend="triton"`` runs on the CPU
without ``TRITON_INTERPRET=1`` having been set before import. This module is called by
``lacapacity.kernels.update`` after input validation; it does not validate again.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from lacapacity.kernels._launch import Kernel

FP32_DOT_PRECISION = "tf32x3"  # float32 tl.dot on tensor cores to about float32 accuracy


# A Triton kernel body: Triton reads its annotations (tl.constexpr marks the compile-time flags) and types the other
# arguments from the launch, so those stay bare (an annotation there would change what Triton compiles)
def _linear_body(  # type: ignore[no-untyped-def]
    S,
    K,
    V,  # state [B, d, dv] float32; keys [B, T, d]; values [B, T, dv]
    T,
    D,
    DV,
    CHUNK,  # tokens, dims, tokens per split
    ss_b,
    ss_k,
    ss_v,
    sk_b,
    sk_t,
    sk_k,
    sv_b,
    sv_t,
    sv_v,  # strides
    NORMALIZE: tl.constexpr,
    ATOMIC: tl.constexpr,
    IS16: tl.constexpr,
    PRECISION: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    i_b = tl.program_id(0).to(tl.int64)
    i_v = tl.program_id(1)
    i_s = tl.program_id(2)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < D
    m_v = o_v < DV
    k_base = K + i_b * sk_b
    v_base = V + i_b * sv_b
    t_start = i_s * CHUNK
    t_end = tl.minimum(t_start + CHUNK, T)
    acc = tl.zeros([BK, BV], dtype=tl.float32)  # partial sum_t k_t^T v_t of this split
    for t0 in range(
        0, CHUNK, BT
    ):  # bounds are plain arguments (Triton 3.6's interpreter needs that); the mask ends the last split
        o_t = t_start + t0 + tl.arange(0, BT)
        m_t = o_t < t_end
        kt = tl.load(
            k_base + o_t[:, None] * sk_t + o_k[None, :] * sk_k, mask=m_t[:, None] & m_k[None, :], other=0.0
        )  # [BT, BK]
        vt = tl.load(
            v_base + o_t[:, None] * sv_t + o_v[None, :] * sv_v, mask=m_t[:, None] & m_v[None, :], other=0.0
        )  # [BT, BV]
        if NORMALIZE:
            kf = kt.to(tl.float32)
            norm = tl.sqrt_rn(tl.sum(kf * kf, axis=1))  # [BT]
            kf = kf / tl.maximum(norm, 1e-12)[:, None]
            if IS16:  # unit keys as hi + lo in the input dtype: two exact-product tensor-core dots
                hi = kf.to(kt.dtype)
                lo = (kf - hi.to(tl.float32)).to(kt.dtype)
                acc = tl.dot(tl.trans(hi), vt, acc)
                acc = tl.dot(tl.trans(lo), vt, acc)
            else:
                acc = tl.dot(tl.trans(kf), vt, acc, input_precision=PRECISION)
        else:
            if IS16:
                acc = tl.dot(tl.trans(kt), vt, acc)
            else:
                acc = tl.dot(tl.trans(kt), vt, acc, input_precision=PRECISION)
    p_s = S + i_b * ss_b + o_k[:, None] * ss_k + o_v[None, :] * ss_v
    m_s = m_k[:, None] & m_v[None, :]
    if ATOMIC:  # several splits of the chunk add into the same state tile
        tl.atomic_add(p_s, acc, mask=m_s, sem="relaxed")
    else:
        s0 = tl.load(p_s, mask=m_s, other=0.0)
        tl.store(p_s, s0 + acc, mask=m_s)


# A Triton kernel body: Triton reads its annotations (tl.constexpr marks the compile-time flags) and types the other
# arguments from the launch, so those stay bare (an annotation there would change what Triton compiles)
def _recurrent_body(  # type: ignore[no-untyped-def]
    S,
    K,
    V,
    BETA,
    GATE,  # state [B, d, dv] float32; keys [B, T, d]; values [B, T, dv]; beta [B, T]; gate [B, T] or [B, T, d]
    T,
    D,
    DV,
    ss_b,
    ss_k,
    ss_v,
    sk_b,
    sk_t,
    sk_k,
    sv_b,
    sv_t,
    sv_v,
    sb_b,
    sb_t,
    sg_b,
    sg_t,
    sg_k,  # strides
    NORMALIZE: tl.constexpr,
    SCALAR_GATE: tl.constexpr,
    CHANNEL_GATE: tl.constexpr,
    DELTA: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    i_b = tl.program_id(0).to(tl.int64)
    i_v = tl.program_id(1)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k = o_k < D
    m_v = o_v < DV
    m_s = m_k[:, None] & m_v[None, :]
    p_s = S + i_b * ss_b + o_k[:, None] * ss_k + o_v[None, :] * ss_v
    h = tl.load(p_s, mask=m_s, other=0.0)  # [BK, BV] state tile, kept in registers over the chunk
    p_k = K + i_b * sk_b + o_k * sk_k  # [BK] pointers to token t's key, advanced by sk_t per token
    p_v = V + i_b * sv_b + o_v * sv_v  # [BV]
    p_b = BETA + i_b * sb_b
    p_a = GATE + i_b * sg_b  # scalar gate a_t (SCALAR_GATE)
    p_g = GATE + i_b * sg_b + o_k * sg_k  # [BK] channel gate alpha_t (CHANNEL_GATE)
    for _ in range(0, T):
        kt = tl.load(p_k, mask=m_k, other=0.0).to(tl.float32)  # [BK]
        vt = tl.load(p_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
        if NORMALIZE:
            kt = kt / tl.maximum(tl.sqrt_rn(tl.sum(kt * kt, axis=0)), 1e-12)
        if SCALAR_GATE:  # S <- a_t S
            h = h * tl.load(p_a)
            p_a += sg_t
        if CHANNEL_GATE:  # S <- Diag(alpha_t) S: row i scaled by alpha_t[i]
            h = h * tl.load(p_g, mask=m_k, other=1.0)[:, None]
            p_g += sg_t
        if DELTA:  # S <- S + b_t k_t^T (v_t - k_t S)
            u = tl.load(p_b) * (vt - tl.sum(kt[:, None] * h, axis=0))  # [BV]
            p_b += sb_t
        else:  # S <- S + k_t^T v_t
            u = vt
        h += kt[:, None] * u[None, :]
        p_k += sk_t
        p_v += sv_t
    tl.store(p_s, h, mask=m_s)


_linear_kernel = Kernel(
    _linear_body, do_not_specialize=("T", "D", "DV", "CHUNK")
)  # compiled on CUDA, interpreted on CPU
_recurrent_kernel = Kernel(_recurrent_body, do_not_specialize=("T", "D", "DV"))


def _pow2(n: int, low: int) -> int:
    p: int = triton.next_power_of_2(n)  # triton is untyped
    return max(low, p)


def linear_config(d: int, dv: int) -> dict[str, int]:
    """Tile sizes and launch settings of the additive kernel for key dim d and value dim dv.

    The whole key dim sits in one tile (BK >= d, the key norm needs the full row); BV is chosen
    so that the float32 accumulator BK x BV holds at most 8192 entries; tl.dot needs tiles >= 16.
    """
    BK = _pow2(d, 16)
    BV = max(16, min(_pow2(dv, 16), 8192 // BK, 128))
    BT = 32 if BK >= 128 else 64
    return {"BT": BT, "BK": BK, "BV": BV, "num_warps": 4 if BK * BV <= 4096 else 8, "num_stages": 2}


def recurrent_config(d: int, dv: int) -> dict[str, int]:
    """Tile sizes of the recurrent kernel: all d rows in one tile, a narrow block of BV columns.

    Narrow column blocks (as in flash-linear-attention's fused recurrent kernels) keep the
    [BK, BV] tile in the registers of one warp and give many programs per state.
    """
    BK = _pow2(d, 16)
    BV = min(_pow2(dv, 8), 8 if BK >= 128 else 16)
    return {"BK": BK, "BV": BV, "num_warps": 1, "num_stages": 2}


def _splits(B: int, NV: int, T: int, BT: int, device: torch.device) -> int:
    """How many programs share one state tile's chunk: enough programs to fill the device."""
    if device.type == "cuda":
        target = 4 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 4  # the interpreter: a small split keeps the atomic path exercised on the CPU
    want = -(-target // (B * NV))
    most = max(1, -(-T // (4 * BT)))  # at least 4 token tiles per program
    return max(1, min(want, most, 65535))


def update(
    state: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    mode: str,
    beta: torch.Tensor | None = None,
    gate: torch.Tensor | None = None,
    normalize: bool = True,
    config: dict[str, int] | None = None,
    splits: int | None = None,
) -> torch.Tensor:
    """Write tokens into ``state`` in place with the fused kernel and return ``state``.

    Shapes: state float32 [B, d, dv]; k [B, T, d]; v [B, T, dv] (fp32, bf16 or fp16, any
    strides); beta float32 [B, T] or None; gate float32 [B, T] (decay, gated_delta) or
    [B, T, d] (gla, kda) or None, any strides (0 for broadcast). Inputs are taken as checked
    by ``lacapacity.kernels.update``. ``config`` and ``splits`` override the launch heuristics
    (used by tests and the benchmark).
    """
    B, d, dv = state.shape
    T = k.shape[1]
    if T == 0:
        return state
    if mode == "linear":
        cfg = {**linear_config(d, dv), **(config or {})}
        NV = triton.cdiv(dv, cfg["BV"])
        ns = splits or _splits(B, NV, T, cfg["BT"], state.device)
        chunk = triton.cdiv(triton.cdiv(T, ns), cfg["BT"]) * cfg["BT"]
        ns = triton.cdiv(T, chunk)  # no empty split
        _linear_kernel(
            (B, NV, ns),
            state.device,
            state,
            k,
            v,
            T,
            d,
            dv,
            chunk,
            *state.stride(),
            *k.stride(),
            *v.stride(),
            NORMALIZE=bool(normalize),
            ATOMIC=ns > 1,
            IS16=k.dtype != torch.float32,
            PRECISION=FP32_DOT_PRECISION,
            BT=cfg["BT"],
            BK=cfg["BK"],
            BV=cfg["BV"],
            num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"],
        )
        return state
    cfg = {**recurrent_config(d, dv), **(config or {})}
    NV = triton.cdiv(dv, cfg["BV"])
    scalar_gate = mode in ("decay", "gated_delta")
    channel_gate = mode in ("gla", "kda")
    is_delta = mode in ("delta", "gated_delta", "kda")
    dummy = state  # stands in for an absent beta or gate; never read (its flag is off)
    b = beta if beta is not None else dummy
    g = gate if gate is not None else dummy
    b_strides = (b.stride(0), b.stride(1)) if beta is not None else (0, 0)
    g_strides: tuple[int, ...]
    if channel_gate:
        g_strides = tuple(g.stride())
    elif scalar_gate:
        g_strides = (g.stride(0), g.stride(1), 0)
    else:
        g_strides = (0, 0, 0)
    _recurrent_kernel(
        (B, NV),
        state.device,
        state,
        k,
        v,
        b,
        g,
        T,
        d,
        dv,
        *state.stride(),
        *k.stride(),
        *v.stride(),
        *b_strides,
        *g_strides,
        NORMALIZE=bool(normalize),
        SCALAR_GATE=scalar_gate,
        CHANNEL_GATE=channel_gate,
        DELTA=is_delta,
        BK=cfg["BK"],
        BV=cfg["BV"],
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )
    return state
