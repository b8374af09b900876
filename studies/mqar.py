"""mqar: multi-query associative recall without training, with overwrites (zoology's MQAR, measured on the memory).

A vocabulary of 1024 key and value tokens (gaussian key embeddings, d = dv = 64); n distinct keys written with random
values, then a fraction of them written again with new values; every written key queried and decoded by argmax over
the whole value vocabulary against its latest value. Additive memories recall the stale value of an overwritten key;
the delta rule corrects it; softmax averages the two.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Mqar

STUDY = Study(
    name="mqar",
    description="MQAR accuracy against keys written and overwrite fraction: linear, delta, gated delta, softmax (d = 64)",
    grid=Grid(
        variant=(
            "linear",
            "delta(beta=1.0)",
            "delta(beta=0.5)",
            "gated_delta(alpha=0.95, beta=1.0)",
            "softmax(scale=16.0)",
        ),
        keys=("gaussian",),
        d=(64,),
        n=(16, 32, 64, 128, 256),
        seed=(0, 1, 2, 3),
    ),
    task=Mqar(vocab=1024, overwrite=(0.0, 0.25, 0.5)),
)
