"""model: the linear-attention heads of a transformers hybrid model on a text (docs/models.md).

A tiny random Qwen3-Next by default (``--set model=<local folder>`` for a trained one, ``--set text=<file>`` for
your text; the shipped text by default): per linear layer and head, the keys' geometry against T5-T8, recall of the
head's own pairs by age beside T22/T23 at its measured gates, how full its state is, the output error of its state
stored as bfloat16, float8, int8 and int4 (with and without error feedback), and the same keys and values written
into other memories with the head's own d x dv state.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks.model.task import Model

STUDY = Study(
    name="model",
    description="a hybrid model's linear heads on a text: key geometry, forgetting vs T22/T23, stored formats, other rules",
    grid=Grid(
        variant=("gated_delta", "linear", "delta", "kda", "gdn2"),
        keys=("gaussian",),
        d=(64,),
        n=(256,),
        seed=(0,),
    ),
    task=Model(),
)
