"""Mixture of memories (MoM, Du et al., arXiv 2502.13685): a seeded router sends each token to k of M memories.

Row convention: keys k ``[B, t, d]``, values v ``[B, t, dv]``. The memories are M copies of one fixed-state matrix
memory (``memory``, a label: ``"linear"``, ``"gated_delta(alpha=0.9)"``, ...), each a ``[d, dv]`` state. The router
is a seeded gaussian matrix W ``[d, M]`` (the layer's learnt router, drawn here): token t scores the memories by
s = unit(k_t) W and is written, unscaled, to its ``top`` highest-scoring memories (only those see it: a memory's
gate or erase runs on its own tokens only). A read routes the query the same way and mixes the reads of its top
memories with the softmax of their scores:

    o = sum_{m in top(q)} softmax_m(s(q)) r_m(q)  (+ r_shared(q) with ``shared``)

``shared=True`` adds one more memory that every token is written to and every read adds (MoM's shared memory).
M = 1, top = 1 without a shared memory is the memory itself. The read weights depend on the query, so it is not
q W for one matrix: ``linear_read=False`` (T8 does not bind it; each memory is bound by it on its own tokens).

The state is float32 ``[B, M (+ 1), d, dv]``: (M + shared) times the memory's numbers. The memory must keep a
``[B, d, dv]`` tensor state with nothing drawn per token (the routed writes call it on each memory's tokens).
``tests/variants/test_mixture.py`` holds it to a float64 loop.

>>> import torch
>>> from lacapacity import variants, keys
>>> mem = variants.get("mom", memories=4, top=2, shared=True)
>>> K = keys.make("gaussian", n=10, d=8, seed=0); V = torch.randn(1, 10, 4)
>>> S = mem.write(mem.init_state(1, 8, 4), K, V)
>>> tuple(S.shape), mem.state_numel(8, 4)
((1, 5, 8, 4), 160)
"""

from __future__ import annotations

import torch

from lacapacity.base import _random, _validate
from lacapacity.base._types import Device
from lacapacity.errors import CapacityError
from lacapacity.variants._memory import unit
from lacapacity.variants.declares import Declares, declared


class MixtureOfMemories:
    """M copies of ``memory``, each token written to its ``top`` of them by a seeded router; ``shared`` adds one
    memory every token is written to. State float32 ``[B, M (+ 1), d, dv]``."""

    name = "mom"

    def __init__(
        self, *, memories: int = 4, top: int = 2, memory: str = "linear", shared: bool = False, seed: int = 0
    ) -> None:
        self.memories = _validate.positive_int("mom: memories", memories)
        self.top = _validate.positive_int("mom: top", top)
        if self.top > self.memories:
            raise CapacityError(f"mom: top must be at most memories = {self.memories}, got {top!r}")
        if not isinstance(shared, bool):
            raise CapacityError(f"mom: shared must be True or False, got {shared!r}")
        self.seed = _random.check_seed("mom: seed", seed)
        if not isinstance(memory, str):
            raise CapacityError(f"mom: memory is a memory's label (e.g. 'gated_delta(alpha=0.9)'), got {memory!r}")
        from lacapacity.variants import label, resolve  # the registry imports this module

        inner = resolve(memory)
        probe = inner.init_state(1, 2, 1)
        if not isinstance(probe, torch.Tensor):
            raise CapacityError(
                f"mom: the memory must keep one [B, d, dv] tensor state with nothing drawn per token; "
                f"{label(inner)!r} keeps a {type(probe).__name__}"
            )
        self.inner, self.memory, self.shared = inner, label(inner), shared
        self._w: dict[int, torch.Tensor] = {}

    @property
    def declares(self) -> Declares:
        """Not a linear read (the mixing weights depend on the query: T8 does not bind the whole), neither T2 nor
        T12; M (+ 1 shared) copies of the memory's d x dv states."""
        inner = declared(self.inner)
        return Declares(
            linear_read=False,
            additive=False,
            delta_rule=False,
            differentiable=inner.differentiable,
            states=self._slots() * inner.states,
        )

    @property
    def params(self) -> dict[str, object]:
        """The parameters; ``variants.get("mom", **self.params)`` rebuilds the memory."""
        return {
            "memories": self.memories,
            "top": self.top,
            "memory": self.memory,
            "shared": self.shared,
            "seed": self.seed,
        }

    def __repr__(self) -> str:
        return "variants.get('mom'" + "".join(f", {k}={v!r}" for k, v in self.params.items()) + ")"

    def router(self, d: int) -> torch.Tensor:
        """The router W: a seeded gaussian float64 ``[d, M]`` (the same for every batch item)."""
        if d not in self._w:
            g = _random.generator(self.seed, "variants/mom/router")
            self._w[d] = _random.normal(d, self.memories, generator=g)
        return self._w[d]

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The top memories of each row of x ``[B, t, d]`` and their weights: int64 ``[B, t, top]`` (highest score
        first) and float32 ``[B, t, top]`` (softmax of the scores over the top ones), scored in float64."""
        s = unit(x.double()) @ self.router(x.shape[2]).to(x.device)  # [B, t, M]
        score, idx = torch.topk(s, self.top, dim=-1)
        return idx, torch.softmax(score, dim=-1).float()

    def _slots(self) -> int:
        return self.memories + int(self.shared)

    def state_numel(self, d: int, dv: int) -> int:
        return self._slots() * int(self.inner.state_numel(int(d), int(dv)))

    def init_state(self, batch: int, d: int, dv: int, *, device: Device = None) -> torch.Tensor:
        one: torch.Tensor = self.inner.init_state(batch, d, dv, device=device)  # [B, d, dv] (checked in __init__)
        return one[:, None].repeat(1, self._slots(), 1, 1)

    def _state(self, state: object) -> torch.Tensor:
        if not isinstance(state, torch.Tensor) or state.ndim != 4 or state.shape[1] != self._slots():
            raise CapacityError(
                f"mom: the state must be the [B, {self._slots()}, d, dv] tensor from init_state(), got "
                f"{type(state).__name__} {list(getattr(state, 'shape', []))}"
            )
        return state

    def write(self, state: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Write each token to its top memories (and the shared one). Shapes: k ``[B, t, d]``, v ``[B, t, dv]``."""
        S = self._state(state)
        B, _, d, dv = S.shape
        k, v = _validate.pairs("mom", k, v, batch=B, d=d, dv=dv, held=f"state [B, M, d, dv] = {list(S.shape)}", state=S)
        idx, _ = self.route(k)  # [B, t, top]
        out = S.clone()
        for b in range(B):
            for m in range(self.memories):
                mine = (idx[b] == m).any(-1).nonzero()[:, 0]  # the tokens routed to memory m, in order
                if mine.numel():
                    out[b, m] = self.inner.write(S[b : b + 1, m], k[b : b + 1, mine], v[b : b + 1, mine])[0]
        if self.shared:
            out[:, -1] = self.inner.write(S[:, -1], k, v)
        return out

    def read(self, state: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The query's top memories mixed by its router weights (+ the shared one). q ``[B, m, d]`` -> ``[B, m, dv]``."""
        S = self._state(state)
        q = _validate.queries("mom", q, batch=S.shape[0], d=S.shape[2], held=f"state {list(S.shape)}", state=S).float()
        idx, weight = self.route(q)  # [B, m, top]
        reads = torch.stack([self.inner.read(S[:, j], q) for j in range(self._slots())], dim=2)  # [B, m, slots, dv]
        picked = torch.gather(reads, 2, idx[..., None].expand(*idx.shape, reads.shape[-1]))  # [B, m, top, dv]
        out = (weight[..., None] * picked).sum(2)
        return out + reads[:, :, -1] if self.shared else out
