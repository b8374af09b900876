"""trained: one-layer models trained on continuous MQAR beside the training-free ceilings of the same memory.

zoology's continuous MQAR (fixed unit embeddings of 512 tokens, n key-value pairs then every key queried) at d = 32,
4-64 pairs: for each memory, d, pairs and seed, one model per learning rate (0.003-1; learned q/k/v projections, the memory
as mixer, AdamW with cosine decay, 200 steps of 16 sequences), scored on 64 held-out sequences beside the probe
with random keys (identity projections) and with keys learned through the memory. Sized for a 2-core CPU; larger
through --set (steps=2000 d=64 n=4,16,64,128 ...).
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks.trained.task import Trained

STUDY = Study(
    name="trained",
    description="trained one-layer models on continuous MQAR vs the probe's ceilings (random and learned keys): linear, delta, gated delta, KDA",
    grid=Grid(
        variant=("linear", "delta", "gated_delta", "kda"),
        keys=("gaussian",),
        d=(32,),
        n=(4, 8, 16, 32, 64),
        seed=(0, 1),
    ),
    task=Trained(),
)
