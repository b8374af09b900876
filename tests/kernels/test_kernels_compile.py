"""The kernels compile for a Hopper GPU (sm_90) with no GPU present: Triton's ahead-of-time path.

The interpreter tests check the arithmetic; these check that the same functions lower through
Triton's compiler (TTIR -> PTX -> cubin with the bundled ptxas), that the block dot products
run on tensor cores (wgmma or mma instructions), that split chunks add with reductions in
memory, and that the recurrent state tile fits in registers (no local-memory spills) at d = 256.
"""

from __future__ import annotations

import inspect
import re

import pytest

triton = pytest.importorskip("triton")
pytest.importorskip("triton.backends.nvidia", reason="Triton's CUDA backend (with ptxas) is not installed")

from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from lacapacity.kernels import triton_update  # noqa: E402

HOPPER = GPUTarget("cuda", 90, 32)
ATOMIC_ADD = re.compile(r"\b(?:red|atom)\.global\.[\w.]*add")  # e.g. red.global.gpu.relaxed.add.f32


def compile_ptx(kernel, pointers: dict, constexprs: dict, num_warps: int, num_stages: int) -> str:
    """PTX of one specialisation of a kernel (pointer args typed, other runtime args i32)."""
    fn = kernel.compiled
    signature = {
        name: "constexpr" if name in constexprs else pointers.get(name, "i32")
        for name in inspect.signature(fn.fn).parameters
    }
    compiled = triton.compile(
        ASTSource(fn, signature, constexprs), target=HOPPER, options={"num_warps": num_warps, "num_stages": num_stages}
    )
    assert compiled.asm["cubin"], "no cubin"
    return compiled.asm["ptx"]


def compile_linear(d: int, dv: int, dtype: str, *, atomic: bool) -> str:
    cfg = triton_update.linear_config(d, dv)
    constexprs = dict(
        NORMALIZE=True,
        ATOMIC=atomic,
        IS16=dtype != "fp32",
        PRECISION=triton_update.FP32_DOT_PRECISION,
        BT=cfg["BT"],
        BK=cfg["BK"],
        BV=cfg["BV"],
    )
    return compile_ptx(
        triton_update._linear_kernel,
        {"S": "*fp32", "K": f"*{dtype}", "V": f"*{dtype}"},
        constexprs,
        cfg["num_warps"],
        cfg["num_stages"],
    )


def test_linear_bf16_normalised_split_chunk_uses_tensor_cores_and_reductions():
    ptx = compile_linear(100, 64, "bf16", atomic=True)
    assert "wgmma" in ptx or "mma.sync" in ptx, "tl.dot did not lower to tensor-core instructions"
    assert ATOMIC_ADD.search(ptx), "split chunks must add into the state atomically"


def test_linear_fp32_uses_tf32x3_tensor_cores():
    ptx = compile_linear(64, 64, "fp32", atomic=False)
    assert re.search(r"mma\S*\.tf32", ptx), "float32 dots should run as tf32x3 on tensor cores"
    assert not ATOMIC_ADD.search(ptx), "one program per state tile needs no atomics"


@pytest.mark.parametrize("mode", ["kda", "gated_delta"])
def test_recurrent_d256_state_tile_stays_in_registers(mode):
    cfg = triton_update.recurrent_config(256, 256)
    ptx = compile_ptx(
        triton_update._recurrent_kernel,
        {"S": "*fp32", "K": "*bf16", "V": "*bf16", "BETA": "*fp32", "GATE": "*fp32"},
        dict(
            NORMALIZE=True,
            SCALAR_GATE=mode == "gated_delta",
            CHANNEL_GATE=mode == "kda",
            DELTA=True,
            BK=cfg["BK"],
            BV=cfg["BV"],
        ),
        cfg["num_warps"],
        cfg["num_stages"],
    )
    assert "ld.local" not in ptx and "st.local" not in ptx, "the state tile spilled to local memory"
