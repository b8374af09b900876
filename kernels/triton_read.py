"""Fused read/error kernel: per-query error of reads q S against targets, reads never stored.

One program takes a block of BM queries of one state: it loads the [BM, BK] query tile once
(all d columns, optionally L2-normalised in registers), then walks the value dim in blocks of
BV: r = q S[:, block] by ``tl.dot`` (float32 accumulator), and accumulates four per-query sums
||r - v||^2, <r, v>, ||r||^2, ||v||^2 in registers. Only three [B, m] float32 outputs are
written: sq_error, signal = <r, v>/||v||^2, cosine = <r, v>/(||r|| ||v||). The math is in
README.md beside this file. Called by ``capacity.kernels.read_error`` after input validation.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from capacity.kernels._launch import Kernel
from capacity.kernels.triton_update import FP32_DOT_PRECISION

__all__ = ["read_error", "read_config"]


# A Triton kernel body: Triton reads its annotations (tl.constexpr marks the compile-time flags) and types the other
# arguments from the launch, so those stay bare (an annotation there would change what Triton compiles)
def _read_error_body(  # type: ignore[no-untyped-def]
    S,
    Q,
    TG,
    ERR,
    SIG,
    COS,  # state [B, d, dv] float32; queries [B, m, d]; targets [B, m, dv]; outputs [B, m] float32
    M,
    D,
    DV,
    ss_b,
    ss_k,
    ss_v,
    sq_b,
    sq_m,
    sq_k,
    st_b,
    st_m,
    st_v,
    so_b,
    so_m,  # strides (the 3 outputs share theirs)
    NORMALIZE: tl.constexpr,
    PRECISION: tl.constexpr,
    BM: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    i_b = tl.program_id(0).to(tl.int64)
    i_m = tl.program_id(1)
    o_m = i_m * BM + tl.arange(0, BM)
    o_k = tl.arange(0, BK)
    m_m = o_m < M
    m_k = o_k < D
    q = tl.load(Q + i_b * sq_b + o_m[:, None] * sq_m + o_k[None, :] * sq_k, mask=m_m[:, None] & m_k[None, :], other=0.0)
    q = q.to(tl.float32)  # [BM, BK]
    if NORMALIZE:
        q = q / tl.maximum(tl.sqrt_rn(tl.sum(q * q, axis=1)), 1e-12)[:, None]
    err = tl.zeros([BM], dtype=tl.float32)  # ||r - v||^2
    rv = tl.zeros([BM], dtype=tl.float32)  # <r, v>
    rr = tl.zeros([BM], dtype=tl.float32)  # ||r||^2
    vv = tl.zeros([BM], dtype=tl.float32)  # ||v||^2
    p_s = S + i_b * ss_b + o_k[:, None] * ss_k
    p_t = TG + i_b * st_b + o_m[:, None] * st_m
    for v0 in range(0, DV, BV):
        o_v = v0 + tl.arange(0, BV)
        m_v = o_v < DV
        s = tl.load(p_s + o_v[None, :] * ss_v, mask=m_k[:, None] & m_v[None, :], other=0.0)  # [BK, BV]
        r = tl.dot(q, s, input_precision=PRECISION)  # [BM, BV] block of the reads, registers only
        tv = tl.load(p_t + o_v[None, :] * st_v, mask=m_m[:, None] & m_v[None, :], other=0.0).to(tl.float32)  # [BM, BV]
        diff = r - tv
        err += tl.sum(diff * diff, axis=1)
        rv += tl.sum(r * tv, axis=1)
        rr += tl.sum(r * r, axis=1)
        vv += tl.sum(tv * tv, axis=1)
    p_o = i_b * so_b + o_m * so_m
    tl.store(ERR + p_o, err, mask=m_m)
    tl.store(SIG + p_o, rv / tl.maximum(vv, 1e-30), mask=m_m)
    tl.store(COS + p_o, rv / tl.maximum(tl.sqrt_rn(rr) * tl.sqrt_rn(vv), 1e-30), mask=m_m)


_read_error_kernel = Kernel(
    _read_error_body, do_not_specialize=("M", "D", "DV")
)  # compiled on CUDA tensors, interpreted on CPU tensors


def read_config(d: int, dv: int) -> dict[str, int]:
    """Tile sizes: all d columns of a query block in one tile, the value dim in blocks of BV."""
    BK = max(16, triton.next_power_of_2(d))
    BM = 32 if BK <= 128 else 16
    BV = max(16, min(triton.next_power_of_2(dv), 64 if BK <= 128 else 32))
    return {"BM": BM, "BK": BK, "BV": BV, "num_warps": 4, "num_stages": 2}


def read_error(
    state: torch.Tensor,
    q: torch.Tensor,
    target: torch.Tensor,
    *,
    normalize: bool = True,
    out: tuple[torch.Tensor, ...] | None = None,
    config: dict[str, int] | None = None,
) -> dict[str, torch.Tensor]:
    """Per-query sq_error, signal and cosine (float32 [B, m] each) of the reads q S against target.

    Shapes: state float32 [B, d, dv]; q [B, m, d]; target [B, m, dv] (fp32, bf16 or fp16, any
    strides). ``out``: three float32 [B, m] tensors to write (sq_error, signal, cosine), of one
    stride layout; fresh ones when None. ``config`` overrides the tile heuristics.
    """
    B, d, dv = state.shape
    m = q.shape[1]
    if out is None:
        out = tuple(torch.empty(B, m, dtype=torch.float32, device=state.device) for _ in range(3))
    err, sig, cos = out
    if m > 0:
        cfg = {**read_config(d, dv), **(config or {})}
        _read_error_kernel(
            (B, triton.cdiv(m, cfg["BM"])),
            state.device,
            state,
            q,
            target,
            err,
            sig,
            cos,
            m,
            d,
            dv,
            *state.stride(),
            *q.stride(),
            *target.stride(),
            *err.stride(),
            NORMALIZE=bool(normalize),
            PRECISION=FP32_DOT_PRECISION,
            BM=cfg["BM"],
            BK=cfg["BK"],
            BV=cfg["BV"],
            num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"],
        )
    return {"sq_error": err, "signal": sig, "cosine": cos}
