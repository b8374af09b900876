"""Key families with controlled orthogonality, and their orthogonality statistics.

Every family returns float32 keys ``[batch, n, d]`` with unit rows, built on the CPU in
float64 from an explicit seed (so the same seed gives the same keys on every device)
and then moved to ``device``.

>>> from lacapacity import keys
>>> K = keys.make("orthogonal", n=96, d=32, batch=2, seed=0)
>>> tuple(K.shape), K.dtype
((2, 96, 32), torch.float32)
>>> stats = keys.describe(K)       # an xarray.Dataset over the batch
>>> bool(abs(stats.frame_potential_ratio - 1).max() < 1e-5)    # a unit-norm tight frame meets T5
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
import xarray as xr

from lacapacity.base import _random, _validate
from lacapacity.base._types import Device, Seed
from lacapacity.base.registry import Registry
from lacapacity.errors import CapacityError, user_code
from lacapacity.theory import welch_bound

if TYPE_CHECKING:  # pragma: no cover
    from numpy.typing import NDArray

__all__ = ["make", "describe", "available", "family", "Family", "display_name", "display_names"]


@dataclass(frozen=True)
class Family:
    """A key family: how to draw it, which parameters it takes, and whether its rows are i.i.d.

    ``iid_rows`` is True when rows are drawn independently, so every prefix K[:, :m] is again a
    draw of the family with n = m (the probe may then read a whole error curve from one write
    pass). Structured families (orthogonal, simplex) are built for one n and their prefixes are not.
    ``display`` is the name figures give the family (None: its name). ``cost``, for a family whose draws are work
    themselves (learned keys optimise), estimates one draw's seconds on one CPU core, so that a sweep can say how long
    it will take before it starts.
    """

    name: str
    draw: Callable[..., torch.Tensor]  # (batch, n, d, generator, **params) -> float64 [batch, n, d]
    params: tuple[str, ...]
    iid_rows: bool
    description: str
    check: Callable[..., None] | None = None  # (d, **params): raise CapacityError for bad values, cheaply
    display: str | None = None  # the name figures give it; None: the name
    cost: Callable[..., float] | None = None  # (batch, n, d, **params): estimated seconds of one draw; None: little

    def validate(self, d: int, params: dict[str, object]) -> None:
        """Check the parameters at key dimension ``d`` without drawing a full set of keys (for sweeps, before work)."""
        unknown = sorted(set(params) - set(self.params))
        if unknown:
            allowed = ", ".join(self.params) if self.params else "none"
            raise CapacityError(
                f"key family {self.name!r} got unknown parameter(s) {', '.join(unknown)}; allowed: {allowed}"
            )
        if self.check is not None:
            with user_code(f"key family {self.name!r}", "in its check()"):
                self.check(d, **params)
        else:  # two keys at the real d check every value a draw checks
            with user_code(f"key family {self.name!r}", "in draw()"):
                self.draw(1, 2, d, _random.generator(0, "keys/validate"), **params)


def _unit_rows(x: torch.Tensor) -> torch.Tensor:
    unit: torch.Tensor = x / x.norm(dim=-1, keepdim=True)  # annotated: torch's operators are untyped
    return unit


def _haar(batch: int, d: int, g: torch.Generator) -> torch.Tensor:
    """Haar-random orthogonal matrices [batch, d, d] (QR of a Gaussian with the sign fix)."""
    z = _random.normal(batch, d, d, generator=g)
    q, r = torch.linalg.qr(z)
    rot: torch.Tensor = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    return rot


def _gaussian(batch: int, n: int, d: int, g: torch.Generator) -> torch.Tensor:
    return _unit_rows(_random.normal(batch, n, d, generator=g))


def _harmonic_frame(n: int, d: int, freqs: torch.Tensor) -> torch.Tensor:
    """Real harmonic frame [n, d] with orthonormal columns and equal row norms sqrt(d/n) (n > d).

    Columns: the constant 1/sqrt(n) when d is odd, then cos and sin at the distinct frequencies
    ``freqs`` (each in 1..floor((n-1)/2)), scaled by sqrt(2/n).
    """
    t = torch.arange(n, dtype=torch.float64).unsqueeze(1)  # [n, 1]
    angle = 2 * math.pi * t * freqs.to(torch.float64).unsqueeze(0) / n  # [n, p]
    cols = [torch.cos(angle), torch.sin(angle)]
    c = torch.stack(cols, dim=-1).reshape(n, -1) * math.sqrt(2.0 / n)  # [n, 2p]
    if d % 2:
        c = torch.cat([torch.full((n, 1), 1 / math.sqrt(n), dtype=torch.float64), c], dim=1)
    return c


def _orthogonal(batch: int, n: int, d: int, g: torch.Generator) -> torch.Tensor:
    if n <= d:
        z = _random.normal(batch, d, n, generator=g)
        q, r = torch.linalg.qr(z)  # q: [batch, d, n], orthonormal columns
        q = q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
        keys: torch.Tensor = q.transpose(1, 2).contiguous()  # [batch, n, d]
        return keys
    # n > d: a randomised unit-norm tight frame, K^T K = (n/d) I_d exactly (T5 equality).
    out = torch.empty(batch, n, d, dtype=torch.float64)
    rot = _haar(batch, d, g)
    top = (n - 1) // 2
    for b in range(batch):
        freqs = torch.randperm(top, generator=g)[: d // 2] + 1
        frame = _harmonic_frame(n, d, freqs) * math.sqrt(n / d)  # unit rows
        perm = torch.randperm(n, generator=g)
        out[b] = frame[perm] @ rot[b]
    return out


def _simplex(batch: int, n: int, d: int, g: torch.Generator) -> torch.Tensor:
    if n > d + 1:
        raise CapacityError(
            f"simplex keys exist for n <= d + 1 = {d + 1} (d + 1 equiangular vectors in R^d), got n={n}"
        )
    m = d + 1
    centred = torch.eye(m, dtype=torch.float64) - 1.0 / m  # rows: simplex vertices, in the plane sum(x) = 0
    basis, _ = torch.linalg.qr(centred[:, :d])  # [m, d], orthonormal basis of that plane
    verts = _unit_rows(centred @ basis)  # [m, d]; pairwise inner product -1/d
    out = torch.empty(batch, n, d, dtype=torch.float64)
    rot = _haar(batch, d, g)
    for b in range(batch):
        perm = torch.randperm(m, generator=g)[:n]
        out[b] = verts[perm] @ rot[b]
    return out


def _correlated(batch: int, n: int, d: int, g: torch.Generator, rho: float) -> torch.Tensor:
    rho = _validate.in_range("rho", rho, 0.0, 1.0, high_open=True)
    if d < 2:
        raise CapacityError("correlated keys need d >= 2 (a shared direction plus a private one)")
    u = _unit_rows(_random.normal(batch, 1, d, generator=g))  # [batch, 1, d]
    z = _random.normal(batch, n, d, generator=g)
    z = _unit_rows(z - (z * u).sum(-1, keepdim=True) * u)  # private parts, orthogonal to u
    # unit rows with k_i . k_j = rho + (1 - rho) z_i . z_j, whose mean over pairs is rho
    return math.sqrt(rho) * u + math.sqrt(1.0 - rho) * z


def _participation_ratio_exp(q: float, d: int) -> float:
    lam = q ** np.arange(d)
    return float(lam.sum() ** 2 / (lam**2).sum())


def _spectrum_for_rank(rank: float, d: int) -> np.ndarray:
    """Exponentially decaying spectrum q^j (j < d) whose participation ratio equals ``rank``."""
    if rank >= d:
        return np.ones(d)
    if rank <= 1:
        return np.eye(1, d)[0, :]
    from scipy.optimize import brentq  # only here: start-up stays light

    q = brentq(lambda q: _participation_ratio_exp(q, d) - rank, 1e-12, 1 - 1e-12, xtol=1e-14)
    spectrum: np.ndarray = q ** np.arange(d)
    return spectrum


def _anisotropic(
    batch: int, n: int, d: int, g: torch.Generator, rank: float | None = None, spectrum: object = None
) -> torch.Tensor:
    if (rank is None) == (spectrum is None):
        raise CapacityError(
            "anisotropic keys take exactly one of rank=<effective rank in [1, d]> or spectrum=<d variances>"
        )
    if rank is not None:
        lam = _spectrum_for_rank(_validate.in_range("rank", rank, 1.0, float(d)), d)
    else:
        want = f"spectrum must be {d} finite variances >= 0 (one per key dimension), not all zero"
        if isinstance(spectrum, (str, bytes, dict)) or (isinstance(spectrum, torch.Tensor) and spectrum.is_complex()):
            raise CapacityError(f"{want}; got {spectrum!r}")
        try:
            lam = np.asarray(spectrum.cpu() if isinstance(spectrum, torch.Tensor) else spectrum, dtype=np.float64)
        except (TypeError, ValueError, RuntimeError):
            raise CapacityError(f"{want}; got {spectrum!r}") from None
        if lam.shape != (d,) or not np.all(np.isfinite(lam)) or np.any(lam < 0) or not np.any(lam > 0):
            raise CapacityError(f"{want}; got shape {lam.shape}")
    scale = torch.from_numpy(np.sqrt(lam))  # [d]
    z = _random.normal(batch, n, d, generator=g) * scale
    rot = _haar(batch, d, g)
    return _unit_rows(z @ rot)


def _pretrained(batch: int, n: int, d: int, g: torch.Generator, **params: object) -> torch.Tensor:
    from lacapacity.inputs import pretrained

    return pretrained.draw(batch, n, d, g, **params)  # type: ignore[arg-type]  # the family's: draw checks them


def _pretrained_check(d: int, **params: object) -> None:
    from lacapacity.inputs import pretrained

    pretrained.check(d, **params)  # type: ignore[arg-type]  # the family's parameters, checked there


def _accept(name: str, found: object) -> Family:
    if not isinstance(found, Family):
        raise CapacityError(f"key family {name!r} must be a lacapacity.keys.Family, got {type(found).__name__}")
    return found


# the registry's order is the order of figure legends; plug-ins: entry point group lacapacity.keys, or module:attr
_FAMILIES: Registry[Family] = Registry("lacapacity.keys", "key family", path="module:attr", accept=_accept)
for _f in [
    Family(
        "gaussian",
        _gaussian,
        (),
        True,
        "unit rows uniform on the sphere (E (k_i.k_j)^2 = 1/d, T7)",
        display="random (Gaussian)",
    ),
    Family(
        "orthogonal",
        _orthogonal,
        (),
        False,
        "orthonormal rows for n <= d; a unit-norm tight frame for n > d (T5 equality)",
        display="tight frame (orthogonal)",
    ),
    Family(
        "simplex",
        _simplex,
        (),
        False,
        "vertices of the regular simplex: n <= d + 1 equiangular unit vectors (T6 equality at n = d + 1)",
        display="simplex (equiangular)",
    ),
    Family("correlated", _correlated, ("rho",), True, "unit rows with mean pairwise inner product rho, rho in [0, 1)"),
    Family(
        "anisotropic",
        _anisotropic,
        ("rank", "spectrum"),
        True,
        "Gaussian with a decaying covariance spectrum (effective rank or explicit variances), rows normalised",
    ),
    Family(
        "pretrained",
        _pretrained,
        ("layer", "head", "text"),
        True,
        "attention keys of all-MiniLM-L6-v2 (layer, head) on consecutive tokens of a text (lacapacity.inputs.pretrained; extra 'models')",
        _pretrained_check,
        display="pretrained (MiniLM)",
    ),
]:
    _FAMILIES.add(_f.name, _f)


def available() -> dict[str, str]:
    """The key families: name -> one-line description, the built-ins and those plug-in packages declare (entry point
    group ``lacapacity.keys``). ``family(name)`` gives the ``Family`` itself.

    >>> list(available())[:3]
    ['gaussian', 'orthogonal', 'simplex']
    """
    return {name: fam.description for name, fam in _FAMILIES.loaded().items()}


def family(name: str) -> Family:
    """The key family ``name``: built in, declared by an entry point (group ``lacapacity.keys``), or ``module:attr``."""
    return _FAMILIES.get(name)


def display_name(name: str) -> str:
    """How figures name the key family ``name`` (built in, a plug-in's, or ``module:attr``): its ``display``, else
    its name. A plug-in that cannot be loaded here shows its name.

    >>> display_name("orthogonal"), display_name("correlated")
    ('tight frame (orthogonal)', 'correlated')
    """
    try:
        found = family(name)
    except CapacityError:  # not loadable here: figures still draw, under its label
        return str(name)
    return found.display or found.name


def display_names() -> dict[str, str]:
    """Every built-in key family -> its display name, in the registry's order (the order of figure legends; plug-in
    families, not loaded for this, come after)."""
    return {name: f.display or name for name, f in _FAMILIES.own().items()}


def make(
    name: str, n: int, d: int, *, batch: int = 1, seed: Seed = 0, device: Device = None, **params: object
) -> torch.Tensor:
    """Draw keys of the family ``name``: float32 ``[batch, n, d]`` with unit rows, on ``device``.

    ``seed`` is an int, a CPU torch.Generator, or a sequence of ints (one batch item per seed:
    item b equals ``make(name, n, d, seed=seed[b])[0]``). ``params`` are the family's own
    (``rho`` for correlated; ``rank`` or ``spectrum`` for anisotropic; for learned ``variant``,
    ``values``, ``dv``, ``steps``, ``lr``, ``gain``, see ``lacapacity.learned.optimise``; for pretrained
    ``layer``, ``head``, ``text``, see ``lacapacity.inputs.pretrained``).

    >>> make("correlated", n=4, d=8, seed=1, rho=0.5).shape
    torch.Size([1, 4, 8])
    """
    fam = family(name)
    n = _validate.positive_int("n", n)
    d = _validate.positive_int("d", d)
    batch = _validate.positive_int("batch", batch)
    unknown = sorted(set(params) - set(fam.params))
    if unknown:
        allowed = ", ".join(fam.params) if fam.params else "none"
        raise CapacityError(f"key family {name!r} got unknown parameter(s) {', '.join(unknown)}; allowed: {allowed}")
    if name == "correlated" and "rho" not in params:
        raise CapacityError("key family 'correlated' needs rho in [0, 1)")
    dev = _validate.device(device)
    seeds = _random.seeds_for_batch(seed, batch)
    gens = [_random.generator(s, f"keys/{name}") for s in seeds]  # checks every seed before any work
    shape = (batch, n, d)
    # the draw holds about three float64 copies on the CPU at its peak; the result is float32 on dev
    _validate.check_alloc("keys.make", shape, torch.float64, "cpu", copies=3.0)
    if dev.type != "cpu":
        _validate.check_alloc("keys.make", shape, torch.float32, dev)
    try:
        with user_code(f"key family {name!r}", "in draw()", passthrough=_validate.is_alloc_failure):
            if len(seeds) == 1:
                out = fam.draw(batch, n, d, gens[0], **params)
            else:
                out = torch.cat([fam.draw(1, n, d, g, **params) for g in gens])
            if not isinstance(out, torch.Tensor) or tuple(out.shape) != (batch, n, d):
                got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
                raise CapacityError(f"key family {name!r}: draw() returned {got}, expected a tensor [batch, n, d]")
        return out.to(device=dev, dtype=torch.float32)
    except CapacityError:
        raise
    except Exception as exc:
        if _validate.is_alloc_failure(exc):
            raise _validate.alloc_error("keys.make", shape, torch.float64, dev, exc) from None
        raise


def statistics(K: torch.Tensor, *, block: int = 2048) -> dict[str, NDArray[np.float64]]:
    """``describe``'s four statistics of keys ``K`` ``[batch, n, d]`` (or ``[n, d]``) as float64 arrays ``[batch]``,
    without its Dataset: what a task's pass stores (``lacapacity.tasks.recall``)."""
    _validate.tensor("K", K, ndim=(2, 3))
    block = _validate.positive_int("block", block)
    if K.ndim == 2:
        K = K.unsqueeze(0)
    batch, n, d = K.shape
    k = K.to(torch.float64)
    norms = k.norm(dim=-1, keepdim=True)
    if bool((norms == 0).any()):
        raise CapacityError("describe needs nonzero key rows (a zero key has no direction)")
    k = k / norms
    frame = k.transpose(1, 2) @ k  # [batch, d, d]
    potential = (frame**2).sum((-2, -1))  # ||K^T K||_F^2 = ||G||_F^2
    if n > 1:
        mean_sq = (potential - n) / (n * (n - 1))
        max_coh = torch.zeros(batch, dtype=torch.float64, device=k.device)
        for start in range(0, n, block):  # Gram blocks, never the whole n x n at once
            g = (k[:, start : start + block] @ k.transpose(1, 2)).abs()  # [batch, blk, n]
            rows = torch.arange(start, start + g.shape[1], device=k.device)
            g[:, rows - start, rows] = 0.0
            max_coh = torch.maximum(max_coh, g.amax((-2, -1)))
    else:
        mean_sq = torch.full((batch,), float("nan"), dtype=torch.float64)
        max_coh = torch.full((batch,), float("nan"), dtype=torch.float64)
    ratio = potential / (n * n / d)
    eff_rank = n * n / potential
    names = ("mean_sq_coherence", "max_coherence", "frame_potential_ratio", "effective_rank")
    return {name: t.cpu().numpy() for name, t in zip(names, (mean_sq, max_coh, ratio, eff_rank))}


def describe(K: torch.Tensor, *, block: int = 2048) -> xr.Dataset:
    """Orthogonality statistics of keys ``K`` ``[batch, n, d]`` (or ``[n, d]``), per batch item.

    Rows are normalised first, so the statistics describe directions. Returns an xarray.Dataset
    over ``batch`` with:

    - ``mean_sq_coherence``: mean over pairs i != j of (k_i . k_j)^2 (1/d for random keys, T7);
    - ``max_coherence``: max over pairs of |k_i . k_j|, next to ``welch_bound`` (T6), which it cannot beat;
    - ``frame_potential_ratio``: ||K^T K||_F^2 / (n^2 / d), >= 1 always, = 1 iff a tight frame (T5);
    - ``effective_rank``: participation ratio (tr K^T K)^2 / ||K^T K||_F^2 of the normalised keys.

    >>> ds = describe(make("simplex", n=9, d=8))
    >>> round(float(ds.max_coherence[0]), 6), round(float(ds.welch_bound), 6)
    (0.125, 0.125)
    """
    stats = statistics(K, block=block)  # checks K
    n, d = K.shape[-2:]
    batch = len(stats["mean_sq_coherence"])
    ds = xr.Dataset(
        {
            "mean_sq_coherence": (
                "batch",
                stats["mean_sq_coherence"],
                {
                    "long_name": "mean squared coherence",
                    "units": "1",
                    "description": "mean over pairs i != j of (k_i . k_j)^2; 1/d expected for random keys (T7)",
                },
            ),
            "max_coherence": (
                "batch",
                stats["max_coherence"],
                {
                    "long_name": "max coherence",
                    "units": "1",
                    "description": "max over pairs i != j of |k_i . k_j|; never below welch_bound (T6)",
                },
            ),
            "welch_bound": (
                (),
                float(welch_bound(n, d)),
                {
                    "long_name": "Welch bound",
                    "units": "1",
                    "description": "sqrt((n - d) / (d (n - 1))) for n > d, else 0 (T6)",
                },
            ),
            "frame_potential_ratio": (
                "batch",
                stats["frame_potential_ratio"],
                {
                    "long_name": "frame potential / (n^2/d)",
                    "units": "1",
                    "description": "||K^T K||_F^2 / (n^2 / d); 1 iff the keys form a tight frame (T5)",
                },
            ),
            "effective_rank": (
                "batch",
                stats["effective_rank"],
                {
                    "long_name": "effective rank",
                    "units": "dimensions",
                    "description": "participation ratio (tr K^T K)^2 / ||K^T K||_F^2 of the normalised keys",
                },
            ),
        },
        coords={"batch": np.arange(batch)},
        attrs={"n": n, "d": d},
    )
    return ds
