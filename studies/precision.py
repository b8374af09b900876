"""precision: the state stored in bfloat16, float16 and float8: error and argmax recall against n (T14-T19).

The additive, decaying (RetNet), delta (DeltaNet) and gated delta memories at d = dv = 32 on random keys and values,
their state float32 or stored in bfloat16, float16 or float8_e4m3fn, rounded after every write (``step``: decode
with a low-precision state cache), at the end of every chunk of 64 tokens (``chunk=64``: chunked kernels; on a CPU
this stands in for flash-linear-attention's fused chunk kernels) or once before the reads (``final``). At each n a
fixed sample of 512 stored pairs is read back and decoded against all n (``queries``), so n reaches 65536 in a few
minutes on two CPU cores; ``--set n=...`` takes it further (docs/precision.md). The last 32 pairs written (as many as
the d x dv state holds exactly, T8) are read too, every one (``recent``): the figure draws the recall over them, so
that the decaying and gated memories, which forget the rest, can tell their formats apart.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="precision",
    description="state dtypes and rounding: error and argmax recall against n for linear, decay, delta, gated_delta (T14-T19)",
    grid=Grid(
        variant=("linear", "decay(alpha=0.99)", "delta(beta=1)", "gated_delta(alpha=0.99, beta=1)"),
        keys=("gaussian",),
        d=(32,),
        n=(16, 64, 256, 1024, 4096, 16384, 65536),
        seed=(0, 1),
        state_dtype=("float32", "bfloat16", "float16", "float8_e4m3fn"),
        rounding=("step", "chunk=64", "final"),
    ),
    task=Recall(values="gaussian", queries=512, recent=32),
)
