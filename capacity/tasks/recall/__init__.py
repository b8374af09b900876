"""The recall task: write the pairs of every seed in one batched pass, read every stored key back at each n."""
