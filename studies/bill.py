"""bill: what softmax and linear attention keep and spend per head, measured, against T13.

After n writes: the numbers the state holds (softmax caches every pair, n (d + dv); linear
keeps d dv) and the measured time of one decode step (write one pair, read one query). The
cache break-even is at n = d dv / (d + dv) (d/2 when dv = d), the attr ``break_even_n``.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Bill

STUDY = Study(
    name="bill",
    description="measured state/cache size and per-token decode time after n writes, softmax vs linear (T13)",
    grid=Grid(
        variant=("softmax", "linear"),
        keys=("gaussian",),
        d=(64, 128),
        n=(16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192),
        seed=(0,),
    ),
    task=Bill(values="gaussian", repeats=20),
)
