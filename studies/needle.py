"""needle: a needle among 1K-16K haystack tokens, read after them, for the rules of the Gated DeltaNet paper's Table 2.

The settings come from the paper's 1.3B Gated DeltaNet (arXiv 2412.06464; NVlabs/GatedDeltaNet, lit_gpt/config.py
``GatedDeltaNet_1.3B``: hidden size 2400 and the layer's defaults expand_k = 0.75, expand_v = 1.5, 9 heads), not from
the results: key head dimension d = 2400 * 0.75 / 9 = 200, value head dimension dv = 400; beta = 0.5, the
sigmoid(0) that the model's beta = sigmoid(x W_b) starts from; every gate at the horizon of the 4096-token training
context (block_size = 4096): alpha = exp(-1/4096) = 0.999756 for gated_delta; for kda one gate per key channel
drawn per token uniformly in [exp(-2/4096), 1] (the same mean: a constant per-channel gate would make it gated_delta);
for mamba2 (A = 1, w_std = 1) the dt whose signal horizon (T24) is 4096 writes. softmax at its default scale sqrt(d). Haystacks: random
keys, the 24-token repeated sentence of S-NIAH-1 (its length under the model of the text haystack), and the text keys
of S-NIAH-2 (``lacapacity.tasks.needle.probe``); answers decoded among 9e6 values (a 7-digit number, S-NIAH-1/2) and 2^122 (a
random UUID, S-NIAH-3). docs/needle.md sets the measured recall beside the paper's table.
"""

from lacapacity.sweep.config import Grid, Study
from lacapacity.tasks import Needle

MAMBA2_DT = 1.4833e-4  # E exp(-dt) = exp(-1/4096) for dt = softplus(k . w + log(expm1(MAMBA2_DT))), |w| = sqrt(d)
GATE = 0.999756  # exp(-1/4096)
KDA_LOW = 0.999512  # exp(-2/4096): KDA's per-channel gates drawn per token in [KDA_LOW, 1], mean exp(-1/4096)

STUDY = Study(
    name="needle",
    description="needle recall against haystack length and depth: delta, mamba2, gated_delta, kda, linear, softmax (d = 200)",
    grid=Grid(
        variant=(
            "delta(beta=0.5)",
            f"mamba2(A=1.0, dt={MAMBA2_DT}, w_std=1.0)",
            f"gated_delta(alpha={GATE}, beta=0.5)",
            f"kda(alpha=('uniform', {KDA_LOW}, 1.0), beta=0.5)",
            "linear",
            "softmax",
        ),
        d=(200,),
        dv=(400,),
        n=(1024, 2048, 4096, 8192),
        seed=(0, 1),
    ),
    task=Needle(
        haystack=("random", "repeat", "text"),
        depth=(0.0, 0.25, 0.5, 0.75, 1.0),
        candidates=(9e6, 2.0**122),
    ),
)
