"""Continuous MQAR and a one-layer model whose mixer is a memory of the toolkit, trained with AdamW.

The task (zoology's continuous MQAR, HazyResearch/zoology ``zoology/data/stacked_mqar.py``): a vocabulary of
``vocabulary`` fixed random unit vectors in R^d (zoology's ``spherical`` embeddings: Gaussian rows scaled to unit
length), the first half key embeddings, the second half value embeddings. A sequence holds ``pairs`` key-value
pairs, distinct keys and distinct values drawn from the whole key and value halves, each pair token the
concatenation ``[e_key; e_value]`` in R^2d; then every key once more as a query token ``[e_key; 0]``, in a random
order. The answer to a query is its key's value, scored over all ``vocabulary / 2`` value embeddings.

The model (row vectors; M models trained at once, one per learning rate, each with its own weights):

    k = x_pair W_k,  v = x_pair W_v,  q = x_query W_q          W_* [M, 2d, d], no bias
    S = memory.write(init_state, k, v)                           the pairs, in order
    o = memory.read(S, q)                                        [M, B, pairs, d]
    logits = o E_value^T,  loss = cross-entropy(logits, answer)  over the value vocabulary

With the identity projections W_k = W_q = [I; 0] and W_v = [0; I] the model *is* the probe: the key embeddings
written with their value embeddings, read back at the keys and decoded by argmax over the value vocabulary
(``identity``). ``learned_keys`` reads with keys optimised through the same memory (``lacapacity.learned``).

Every draw comes from ``lacapacity.base._random.generator(seed, stream)``: the embeddings and the test sequences are
the same for every memory at one (seed, d, pairs), and so is the weights' start for every learning rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from lacapacity.base import _random
from lacapacity.errors import CapacityError, UserCodeError
from lacapacity.tasks import _resume, learned
from lacapacity.variants._guard import guard
from lacapacity.variants.declares import declared

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import NDArray

    from lacapacity.base._types import Device
    from lacapacity.variants import Variant


@dataclass
class Sequences:
    """A batch of continuous-MQAR sequences: ``pairs`` float32 ``[B, n, 2d]`` (``[e_key; e_value]``), ``queries``
    float32 ``[B, n, 2d]`` (``[e_key; 0]``), ``answers`` int64 ``[B, n]`` (the value index of each query's key),
    ``written`` int64 ``[B, n]`` (the value index of each pair, in written order)."""

    pairs: torch.Tensor
    queries: torch.Tensor
    answers: torch.Tensor
    written: torch.Tensor


def embeddings(vocabulary: int, d: int, seed: int, device: Device) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed embeddings: key and value halves, float32 ``[vocabulary / 2, d]`` each, unit rows (zoology's
    ``spherical`` initialisation: Gaussian rows divided by their norms)."""
    g = _random.generator(seed, f"trained/embeddings/d={d}")
    E = torch.randn(vocabulary, d, generator=g, dtype=torch.float32)
    E = E / E.norm(dim=1, keepdim=True)
    half = vocabulary // 2
    return E[:half].to(device), E[half:].to(device)


def sequences(keys: torch.Tensor, values: torch.Tensor, n: int, batch: int, g: torch.Generator) -> Sequences:
    """``batch`` sequences of ``n`` pairs: n distinct keys and n distinct values of the vocabulary per sequence,
    paired at random and written in a random order, then every key queried once in another random order."""
    half, d = keys.shape
    key_idx = torch.rand(batch, half, generator=g).argsort(dim=1)[:, :n]  # a uniform ordered subset per row
    val_idx = torch.rand(batch, half, generator=g).argsort(dim=1)[:, :n]
    order = torch.rand(batch, n, generator=g).argsort(dim=1)  # the query order
    key_idx, val_idx, order = (t.to(keys.device) for t in (key_idx, val_idx, order))
    ek, ev = keys[key_idx], values[val_idx]  # [B, n, d]
    pairs = torch.cat([ek, ev], dim=-1)
    qk = torch.take_along_dim(ek, order.unsqueeze(-1), dim=1)
    queries = torch.cat([qk, torch.zeros_like(qk)], dim=-1)
    return Sequences(pairs, queries, torch.take_along_dim(val_idx, order, dim=1), val_idx)


def identity(d: int, device: Device = None) -> dict[str, torch.Tensor]:
    """The identity projections ``[1, 2d, d]``: keys and queries are the key embeddings, values the value ones."""
    top = torch.cat([torch.eye(d), torch.zeros(d, d)])
    bottom = torch.cat([torch.zeros(d, d), torch.eye(d)])
    return {"q": top[None].to(device), "k": top[None].to(device), "v": bottom[None].to(device)}


def forward(memory: Variant, W: dict[str, torch.Tensor], seqs: Sequences) -> torch.Tensor:
    """The reads of M models at the query positions, float32 ``[M, B, n, d]``. ``W``: ``{"q", "k", "v"}`` each
    ``[M, 2d, d]``; the memory's batch axis carries M x B (model-major)."""
    M, B, n = W["k"].shape[0], seqs.pairs.shape[0], seqs.pairs.shape[1]
    d = W["k"].shape[2]
    proj: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = lambda x, w: torch.einsum(
        "bti,mid->mbtd", x, w
    ).reshape(M * B, n, d)
    k, v, q = proj(seqs.pairs, W["k"]), proj(seqs.pairs, W["v"]), proj(seqs.queries, W["q"])
    state = memory.write(memory.init_state(M * B, d, d, device=k.device), k, v)
    o = memory.read(state, q)
    if not isinstance(o, torch.Tensor) or tuple(o.shape) != (M * B, n, d):
        got = tuple(o.shape) if isinstance(o, torch.Tensor) else type(o).__name__
        raise CapacityError(f"the memory's read returned {got}, expected [batch, m, dv] = {(M * B, n, d)}")
    return o.float().reshape(M, B, n, d)


def score(o: torch.Tensor, values: torch.Tensor, answers: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per model: the mean cross-entropy over the value vocabulary and the top-1 accuracy, float32 ``[M]`` each.

    ``o`` ``[M, B, n, d]``, ``values`` ``[V, d]``, ``answers`` ``[B, n]``. A read that is not finite is wrong."""
    logits = o @ values.T  # [M, B, n, V]
    M = o.shape[0]
    target = answers.unsqueeze(0).expand(M, -1, -1)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 2), target.flatten(), reduction="none")
    loss = loss.reshape(M, -1).mean(1)
    right = (logits.argmax(-1) == target) & torch.isfinite(logits).all(-1)
    return loss, right.float().flatten(1).mean(1)


@dataclass
class Trained:
    """What ``train`` returns per learning rate: test ``accuracy`` and ``loss``, the last ``train_loss`` (the mean
    over the last tenth of the steps), float64 ``[M]``; ``weights``: the trained ``{"q", "k", "v"}``."""

    accuracy: NDArray[np.float64]
    loss: NDArray[np.float64]
    train_loss: NDArray[np.float64]
    weights: dict[str, torch.Tensor]


class AdamW:
    """AdamW (Loshchilov and Hutter; ``torch.optim.AdamW``'s update) over parameters with a leading model axis
    ``[M, ...]``, each model with its own learning rate: one vectorised update for all M (torch.optim would need a
    parameter group per model, and importing it loads torch's compiler, seconds per worker process).

    Per model m, at step t with learning rate lr_m * ``scale``: p <- p (1 - lr wd); m1 <- b1 m1 + (1 - b1) g;
    m2 <- b2 m2 + (1 - b2) g^2; p <- p - lr (m1 / (1 - b1^t)) / (sqrt(m2 / (1 - b2^t)) + eps)."""

    def __init__(
        self,
        params: list[torch.Tensor],
        lrs: Sequence[float],
        *,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        self.params, self.betas, self.eps, self.wd, self.t = params, betas, eps, weight_decay, 0
        self.lrs = torch.tensor([float(x) for x in lrs], dtype=torch.float32, device=params[0].device)
        self.m1 = [torch.zeros_like(p) for p in params]
        self.m2 = [torch.zeros_like(p) for p in params]

    def step(self, grads: Sequence[torch.Tensor], scale: float = 1.0) -> None:
        """One update with ``grads`` (one per parameter) at the learning rates times ``scale``."""
        self.t += 1
        b1, b2 = self.betas
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        with torch.no_grad():
            for p, g, m1, m2 in zip(self.params, grads, self.m1, self.m2):
                lr = (self.lrs * scale).reshape(-1, *([1] * (p.ndim - 1)))
                p.mul_(1 - lr * self.wd)
                m1.lerp_(g, 1 - b1)
                m2.mul_(b2).addcmul_(g, g, value=1 - b2)
                p.sub_(lr / c1 * m1 / ((m2 / c2).sqrt() + self.eps))


def _start(d: int, models: int, seed: int) -> dict[str, torch.Tensor]:
    """nn.Linear's initialisation U(-1/sqrt(2d), 1/sqrt(2d)), the same draw for every model (every lr)."""
    g = _random.generator(seed, f"trained/start/d={d}")
    bound = 1.0 / math.sqrt(2 * d)
    one = {w: (torch.rand(2 * d, d, generator=g) * 2 - 1) * bound for w in ("q", "k", "v")}
    return {w: x.expand(models, -1, -1).clone() for w, x in one.items()}


def train(
    memory: Variant,
    *,
    d: int,
    n: int,
    lrs: Sequence[float],
    vocabulary: int,
    steps: int,
    batch: int,
    test: int,
    weight_decay: float,
    betas: tuple[float, float],
    seed: int,
    device: Device,
    checkpoint: _resume.Checkpoint | None = None,
) -> Trained:
    """Train one model per learning rate in ``lrs`` (each its own AdamW parameter group, cosine decay to 0 over
    ``steps``) on fresh batches of ``batch`` sequences, and score each on ``test`` held-out sequences.

    ``checkpoint``: where the training is saved every ``_resume.SECONDS`` of steps and when it ends (the weights,
    AdamW's moments and step, the sequences' generator and torch's global random state, the training loss summed so
    far), and resumed from when it holds a save of the same settings: a resumed training's numbers are the bits of
    an uninterrupted one's."""
    keys, values = embeddings(vocabulary, d, seed, device)
    W = {w: x.to(device).requires_grad_(True) for w, x in _start(d, len(lrs), seed).items()}
    opt = AdamW(list(W.values()), lrs, betas=betas, weight_decay=weight_decay)
    g = _random.generator(seed, f"trained/train/d={d}/n={n}")
    tail = max(1, steps // 10)
    seen = torch.zeros(len(lrs), dtype=torch.float64)
    settings = {"d": d, "n": n, "lrs": [float(x) for x in lrs], "vocabulary": vocabulary, "steps": steps}
    settings.update({"batch": batch, "weight_decay": float(weight_decay), "betas": [float(b) for b in betas]})
    settings.update({"seed": seed, "device": str(device)})
    saved = None if checkpoint is None else checkpoint.load(settings)
    if saved is not None:
        with torch.no_grad():
            for x, y in zip([*W.values(), *opt.m1, *opt.m2], [*saved["W"], *saved["m1"], *saved["m2"]]):
                x.copy_(y)
        opt.t = int(saved["t"])
        g.set_state(saved["generator"])
        torch.set_rng_state(saved["rng"])
        seen = saved["seen"].clone()
    with torch.enable_grad():
        for step in range(0 if saved is None else int(saved["step"]), steps):
            seqs = sequences(keys, values, n, batch, g)
            loss, _ = score(forward(memory, W, seqs), values, seqs.answers)
            grads = torch.autograd.grad(loss.sum(), list(W.values()))  # each model: the gradient of its own loss
            opt.step(grads, 0.5 * (1.0 + math.cos(math.pi * step / steps)))
            if step >= steps - tail:
                seen += loss.detach().double().cpu()
            if checkpoint is not None and (checkpoint.due() or step + 1 == steps):
                state = {"step": step + 1, "W": [x.detach() for x in W.values()], "m1": opt.m1, "m2": opt.m2}
                state.update({"t": opt.t, "generator": g.get_state(), "rng": torch.get_rng_state(), "seen": seen})
                checkpoint.save(settings, state)
    W = {w: x.detach() for w, x in W.items()}
    acc, test_loss = evaluate(memory, W, keys, values, n=n, test=test, d=d, seed=seed)
    return Trained(acc, test_loss, (seen / tail).numpy(), W)


def test_set(keys: torch.Tensor, values: torch.Tensor, *, n: int, test: int, d: int, seed: int) -> Sequences:
    """The held-out sequences of (seed, d, n): the same for every memory and learning rate."""
    return sequences(keys, values, n, test, _random.generator(seed, f"trained/test/d={d}/n={n}"))


def evaluate(
    memory: Variant,
    W: dict[str, torch.Tensor],
    keys: torch.Tensor,
    values: torch.Tensor,
    *,
    n: int,
    test: int,
    d: int,
    seed: int,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Test accuracy and loss of the models ``W`` (``[M, 2d, d]`` each), float64 ``[M]`` each."""
    seqs = test_set(keys, values, n=n, test=test, d=d, seed=seed)
    with torch.no_grad():
        loss, acc = score(forward(memory, W, seqs), values, seqs.answers)
    return acc.double().cpu().numpy(), loss.double().cpu().numpy()


def ceiling_identity(
    memory: Variant, *, d: int, n: int, vocabulary: int, test: int, seed: int, device: Device
) -> float:
    """Test accuracy of the model with identity projections (the probe: random unit keys), on the test set."""
    keys, values = embeddings(vocabulary, d, seed, device)
    acc, _ = evaluate(memory, identity(d, device), keys, values, n=n, test=test, d=d, seed=seed)
    return float(acc[0])


def learned_keys(
    memory: Variant, *, d: int, n: int, vocabulary: int, test: int, steps: int, lr: float, seed: int, device: Device
) -> float:
    """Test accuracy with keys optimised through the memory (``lacapacity.learned``, the key family ``learned``):
    for each test sequence, n unit keys that read its value embeddings back best (mean squared error, Adam), then
    read at those keys and decoded over the value vocabulary as the model's reads are. On the CPU (learned keys
    optimise there)."""
    keys, values = embeddings(vocabulary, d, seed, "cpu")
    seqs = test_set(keys, values, n=n, test=test, d=d, seed=seed)
    V = seqs.pairs[..., d:]  # the value embeddings in written order [test, n, d]
    res = learned.optimise(n, d, variant=memory, values=V, steps=steps, lr=lr, batch=test, seed=seed)
    K = res.keys  # [test, n, d] unit rows, written with V in order
    with torch.no_grad():
        state = memory.write(memory.init_state(test, d, d), K, V)
        o = memory.read(state, K).float()  # read at every written key, in written order
        _, acc = score(o[None], values, seqs.written)
    return float(acc[0])


def differentiable(memory: Variant, label: str) -> None:
    """Refuse, in one line, a memory that cannot be trained through: one that declares ``differentiable=False`` at once;
    any other must pass gradients from its write and read to the keys and values (a tiny write and read,
    differentiated, proves it)."""
    if declared(memory).differentiable is False:
        raise CapacityError(
            f"the trained task trains through the memory's write and read, and {label} declares them not differentiable; use a memory with a torch write (the built-ins with backend='auto' or 'torch')"
        )
    k = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(0)).requires_grad_(True)
    v = torch.randn(1, 3, 4, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    why, mem = None, guard(memory)  # the user's code: a fault in it is one line naming it
    try:
        with torch.enable_grad():
            o = mem.read(mem.write(mem.init_state(1, 4, 4), k, v), k)
            grads = torch.autograd.grad(o.float().sum(), [k, v], allow_unused=True)
        if any(g is None or not torch.isfinite(g).all() or not g.abs().sum() > 0 for g in grads):
            why = "no gradient reaches its keys or values"
    except (RuntimeError, CapacityError) as exc:
        if isinstance(exc, UserCodeError) and not isinstance(exc.__cause__, RuntimeError):
            raise  # not autograd's complaint (a RuntimeError): the memory's own fault, named as such
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if why is not None:
        raise CapacityError(
            f"the trained task trains through the memory's write and read, and {label}'s are not differentiable ({why}); use a memory with a torch write (the built-ins with backend='auto' or 'torch')"
        )


_TIMED: dict[tuple[Any, ...], tuple[Variant, float]] = {}  # (id(memory), settings) -> (memory, seconds): kept alive


def timed_step(
    memory: Variant, *, d: int, n: int, lrs: Sequence[float], vocabulary: int, batch: int, seed: int = 0
) -> float:
    """Seconds of one training step (``len(lrs)`` models on ``batch`` sequences of ``n`` pairs at key dimension
    ``d``) on one CPU core of this machine, as loaded as it is now: ``train`` timed over two steps (the second
    without the first's start-up), once per memory and settings in a process. It runs the memory's code (under the
    guard): call it after the sizes are checked."""
    key = (id(memory), d, n, tuple(lrs), vocabulary, batch)
    if key not in _TIMED:
        import time

        run = guard(memory)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            common: dict[str, Any] = {"d": d, "n": n, "lrs": lrs, "vocabulary": vocabulary, "batch": batch, "test": 1}
            common.update({"weight_decay": 0.0, "betas": (0.9, 0.999), "seed": seed, "device": "cpu"})
            start = time.perf_counter()
            train(run, steps=1, **common)
            one = time.perf_counter() - start
            start = time.perf_counter()
            train(run, steps=2, **common)
            two = time.perf_counter() - start
        finally:
            torch.set_num_threads(threads)
        if len(_TIMED) > 256:
            _TIMED.clear()
        _TIMED[key] = (memory, max(two - one, one / 2, 0.0))
    return _TIMED[key][1]
