"""Small real measurements in the result schema (docs/results-schema.md), and the README gallery.

The sweep runner (``capacity run``) writes the real study results; this module builds small
Datasets of the same shape from real probe runs on the CPU, for the plots' tests and for the
README gallery when no sweep result is at hand:

- ``grid(study, ...)``: a study over (variant, keys, [feature], d, load, seed) from
  ``capacity.probe.recall``, with the theory variables and, on request, the key statistics of
  ``capacity.keys.describe``;
- ``bill(...)``: measured state sizes and per-token decode times of softmax and linear memory;
- ``gallery(out_dir)``: the figures of docs/readme-plots.md (``python -m capacity.plots.examples``).

>>> ds = grid("capacity-vs-d", d=(8,), loads=(0.5, 1.0, 2.0), seeds=(0, 1), dv=16)
>>> dict(ds.sizes)
{'variant': 1, 'key_family': 2, 'd': 1, 'load': 3, 'seed': 2}
>>> [int(x) for x in ds.n.sel(d=8).values]
[4, 8, 16]
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
import xarray as xr
from PIL import Image

import capacity
from capacity import keys as key_families
from capacity import probe, theory, values, variants
from capacity.errors import CapacityError
from capacity.plots import names
from capacity.plots.closed_form import measure as measure_closed_form

__all__ = ["grid", "bill", "n_of", "gallery", "KVCache", "GALLERY", "STAT_VARS"]

STAT_VARS = ("mean_sq_coherence", "max_coherence", "frame_potential_ratio", "effective_rank")
DESCRIPTIONS = {
    "capacity-vs-d": "capacity against key dimension for linear and delta memories, random and tight-frame keys",
    "interference-bound": "measured crosstalk over the frame, Welch and rank bounds for every key family",
    "orthogonality": "retrieval error against key coherence and effective rank at fixed d",
    "variants": "error and recall curves of the memory variants side by side",
    "feature-maps": "linear attention through feature maps: error against n over the feature dimension",
    "bill": "state and cache size and per-token decode time, softmax against linear",
}


def n_of(load: float, d: int) -> int:
    """Pairs written at ``load`` for key dimension ``d``: max(1, round(load d)) (the schema's rule)."""
    return max(1, int(round(float(load) * int(d))))


def _number(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def _params(label: str) -> tuple[str, dict]:
    base, params = names.parse_label(label)
    return base, {k: _number(v) for k, v in params.items()}


def _variant(label: str):
    base, params = _params(label)
    return variants.get(base, **params)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-12)


# feature maps the examples apply to the keys before the linear write and read (rows normalised
# afterwards, as the keys are); the full set (dpfp, taylor2, performer) is capacity.features' job
FEATURE_MAPS = {
    "identity": lambda x: x,
    "relu": torch.relu,
    "elu1": lambda x: torch.nn.functional.elu(x) + 1.0,
}


def _feature_map(label: str):
    if label not in FEATURE_MAPS:
        raise CapacityError(f"unknown example feature map {label!r}; known: {', '.join(FEATURE_MAPS)}")
    phi = FEATURE_MAPS[label]
    return lambda K: _unit(phi(K))


def _measure(variant, key_label: str, d: int, loads, seeds, dv: int, *, feature=None, key_stats=False):
    """Probe one (variant, keys, d): returns {variable: [load, seed] array}, and the feature dimension."""
    base, params = _params(key_label)
    fam = key_families.families()[base]
    ns = [n_of(load, d) for load in loads]
    batch, seeds = len(seeds), [int(s) for s in seeds]
    out = {m: np.full((len(ns), batch), np.nan) for m in (*probe.METRICS, *(STAT_VARS if key_stats else ()))}
    draws = [(max(ns), sorted(set(ns)))] if fam.iid_rows else [(n, [n]) for n in sorted(set(ns))]
    feature_dim = d
    for n_max, checkpoints in draws:  # i.i.d. rows: one draw read at every n; structured keys: one draw per n
        K = key_families.make(base, n_max, d, batch=batch, seed=seeds, **params)  # [B, n, d]
        V = values.make("gaussian", n_max, dv, batch=batch, seed=seeds)  # [B, n, dv]
        phi = K if feature is None else feature(K)  # [B, n, D]
        feature_dim = phi.shape[-1]
        pr = probe.recall(variant, phi.contiguous(), V, checkpoints=checkpoints)
        for i, n in enumerate(ns):
            if n not in checkpoints:
                continue
            for m in probe.METRICS:
                out[m][i] = pr[m].sel(n=n).values
            if key_stats:
                stats = key_families.describe(K[:, :n])
                for m in STAT_VARS:
                    out[m][i] = stats[m].values
    return out, feature_dim


def _attrs(study: str, config: dict) -> dict:
    config = {"study": study, **config, "source": "capacity.plots.examples"}
    text = json.dumps(config, sort_keys=True, default=str)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent, timeout=5).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    import numpy
    import xarray

    return {
        "study": study,
        "description": DESCRIPTIONS.get(study, study),
        "config": text,
        "config_hash": hashlib.sha256(text.encode()).hexdigest(),
        "versions": json.dumps({"capacity": capacity.__version__, "python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__, "xarray": xarray.__version__}),
        "device": "cpu",
        "git_commit": commit,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _theory(n: np.ndarray, d: np.ndarray, dv: int) -> dict:
    """The schema's theory variables over (d, load) from the pair counts ``n`` [d, load]."""
    dd = np.broadcast_to(d[:, None], n.shape).astype(float)
    table = {
        "frame_bound": (theory.frame_bound(n, dd), "T5: max(n/d - 1, 0), the least mean error of any n unit keys (orthonormal values)"),
        "welch_bound": (theory.welch_bound(n, dd), "T6: sqrt((n - d) / (d (n - 1))), the least max coherence"),
        "random_keys_error": (theory.random_keys_error(n, dd), "T7: (n - 1)/d, the expected mean error of random unit keys"),
        "rank_bound": (theory.rank_bound(n, dd), "T8: max(1 - d/n, 0), the least mean error of any d x dv state with a linear read"),
        "optimal_gain_error": (theory.optimal_gain_error(n, dd), "T9: (n - 1)/(d + n - 1), random keys at the optimal read gain"),
        "argmax_recall_pred": (theory.argmax_recall(n, dd, dv), "T10: predicted argmax recall of random keys and values (Gaussian approximation)"),
    }
    return {k: (("d", "load"), np.asarray(v, dtype=float), {"description": desc}) for k, (v, desc) in table.items()}


def grid(study: str, *, variants=("linear",), keys=("gaussian", "orthogonal"), d=(16, 32, 64), loads=(0.125, 0.25, 0.5, 1, 2, 4, 8, 16), seeds=(0, 1, 2), dv: int = 64, features=None, key_stats=False) -> xr.Dataset:
    """A result Dataset of ``study`` over (variant, keys, [feature], d, load, seed) from real probe runs.

    Labels follow the schema: ``variants`` as ``name`` or ``name(param=value)`` (registry names),
    ``keys`` as ``family`` or ``family(param=value)``, ``features`` as feature-map labels (the
    keys pass through the map, and the linear read sees the features; adds the axis ``feature``
    and the coord ``feature_dim``). Values are Gaussian unit rows in R^dv; keys and values of
    seed s are the draws with seed s.
    """
    loads = [float(x) for x in loads]
    d = [int(x) for x in d]
    feats = list(features) if features else [None]
    shape = (len(variants), len(keys), len(feats), len(d), len(loads), len(seeds))
    data = {m: np.full(shape, np.nan) for m in (*probe.METRICS, *(STAT_VARS if key_stats else ()))}
    fdim = np.zeros((len(feats), len(d)), dtype=int)
    for a, vlabel in enumerate(variants):
        mem = _variant(vlabel)
        for b, klabel in enumerate(keys):
            for f, flabel in enumerate(feats):
                phi = None if flabel is None else _feature_map(flabel)
                for c, dd in enumerate(d):
                    got, fdim[f, c] = _measure(mem, klabel, dd, loads, seeds, dv, feature=phi, key_stats=key_stats)
                    for m, arr in got.items():
                        data[m][a, b, f, c] = arr
    dims = ("variant", "key_family", "feature", "d", "load", "seed")
    if features is None:
        dims = tuple(x for x in dims if x != "feature")
        data = {m: arr[:, :, 0] for m, arr in data.items()}
    stat_attrs = {m: key_families.describe(key_families.make("gaussian", 4, 4))[m].attrs for m in STAT_VARS}
    variables = {}
    for m, arr in data.items():
        if m in probe.METRICS:
            ln, units, desc = probe.METRICS[m]
            attrs = {"long_name": ln, "units": units, "description": desc}
        else:
            attrs = stat_attrs[m]
        variables[m] = (dims, arr, attrs)
    n = np.array([[n_of(load, dd) for load in loads] for dd in d])  # [d, load]
    variables.update(_theory(n, np.array(d), dv))
    coords = {
        "variant": ("variant", list(variants)),
        "key_family": ("key_family", list(keys)),
        "d": ("d", np.array(d), {"long_name": "key dimension", "units": "dimensions"}),
        "load": ("load", np.array(loads), {"long_name": "load n/d", "units": "pairs per dimension"}),
        "seed": ("seed", np.array(seeds, dtype=int)),
        "n": (("d", "load"), n, {"long_name": "pairs written", "units": "pairs"}),
        "dv": ((), int(dv), {"long_name": "value dimension", "units": "dimensions"}),
    }
    if features is not None:
        coords["feature"] = ("feature", list(features))
        coords["feature_dim"] = (("feature", "d"), fdim, {"long_name": "feature dimension", "units": "features"})
    config = {"variants": list(variants), "keys": list(keys), "features": features, "d": d, "loads": loads, "seeds": list(seeds), "dv": dv, "values": "gaussian"}
    return xr.Dataset(variables, coords=coords, attrs=_attrs(study, config))


class _Cache:
    """A KV cache: ``K`` ``[B, n, d]`` and ``V`` ``[B, n, dv]`` are views of buffers that grow by doubling."""

    def __init__(self, batch, d, dv, device):
        self._k = torch.zeros(batch, 16, d, device=device)
        self._v = torch.zeros(batch, 16, dv, device=device)
        self.K, self.V = self._k[:, :0], self._v[:, :0]

    def append(self, k, v):
        n, t = self.K.shape[1], k.shape[1]
        if n + t > self._k.shape[1]:  # amortised O(1) per token, as a serving cache would do
            size = max(2 * self._k.shape[1], n + t)
            self._k = torch.cat([self._k[:, :n], self._k.new_zeros(self._k.shape[0], size - n, self._k.shape[2])], 1)
            self._v = torch.cat([self._v[:, :n], self._v.new_zeros(self._v.shape[0], size - n, self._v.shape[2])], 1)
        self._k[:, n : n + t] = k
        self._v[:, n : n + t] = v
        self.K, self.V = self._k[:, : n + t], self._v[:, : n + t]
        return self


class KVCache:
    """Softmax attention's memory for the bill when the registry has no ``softmax`` variant yet.

    The state keeps every written pair (``state.K`` ``[B, n, d]``, ``state.V`` ``[B, n, dv]``); a
    write appends, a read is softmax(beta q K^T) V (DESIGN T13).
    """

    name = "softmax"

    def __init__(self, beta: float = 8.0):
        self.beta = float(beta)

    def init_state(self, batch, d, dv, *, device=None):
        return _Cache(batch, d, dv, device)

    def write(self, state, k, v):
        return state.append(k, v)

    def read(self, state, q):
        return torch.softmax(self.beta * q @ state.K.transpose(1, 2), dim=-1) @ state.V  # [B, m, dv]

    def state_numel(self, d, dv):
        raise CapacityError("a KV cache grows with n; count the tensors of its state instead")


def _numel(state) -> int:
    """Numbers held by a state: a tensor, or tensors inside tuples, lists, dicts or public attributes."""
    if isinstance(state, torch.Tensor):
        return state.numel()
    if isinstance(state, (tuple, list)):
        return sum(_numel(s) for s in state)
    if isinstance(state, dict):
        return sum(_numel(s) for s in state.values())
    if hasattr(state, "__dict__"):
        return sum(_numel(s) for name, s in vars(state).items() if not name.startswith("_") and isinstance(s, (torch.Tensor, tuple, list, dict)))
    return 0


def bill(*, d=(64,), n=(1, 4, 16, 64, 256, 1024, 4096), seeds=(0, 1, 2), repeats: int = 25, dv: int | None = None) -> xr.Dataset:
    """The bill study from measurements: numbers kept per head after n writes, and time per decoded token.

    For each variant (``softmax`` from the registry, else ``KVCache``; ``linear``), d and n: write
    n random pairs, count the numbers the state holds (per batch item), then time ``repeats``
    decode steps (write one pair, read one query) and keep the median, once per seed.
    """
    try:
        soft = variants.get("softmax")
    except CapacityError:
        soft = KVCache()
    mems = {"softmax": soft, "linear": variants.get("linear")}
    d = [int(x) for x in d]
    n = [int(x) for x in n]
    numel = np.zeros((len(mems), len(d), len(n)))
    secs = np.full((len(mems), len(d), len(n), len(seeds)), np.nan)
    for a, mem in enumerate(mems.values()):
        for c, dd in enumerate(d):
            vdim = dv or dd
            for i, nn in enumerate(n):
                for s, seed in enumerate(seeds):
                    K = key_families.make("gaussian", nn + repeats + 1, dd, seed=int(seed))  # [1, n + r + 1, d]
                    V = values.make("gaussian", nn + repeats + 1, vdim, seed=int(seed))
                    state = mem.write(mem.init_state(1, dd, vdim), K[:, :nn], V[:, :nn])
                    numel[a, c, i] = _numel(state)
                    times = []
                    for t in range(nn, nn + repeats):
                        start = time.perf_counter()
                        state = mem.write(state, K[:, t : t + 1], V[:, t : t + 1])
                        mem.read(state, K[:, t + 1 : t + 2])
                        times.append(time.perf_counter() - start)
                    secs[a, c, i, s] = float(np.median(times))
    dd = np.array(d, dtype=float)[:, None]
    nn = np.array(n, dtype=float)[None, :]
    vv = dd if dv is None else float(dv)
    t = theory.bill(nn, dd, vv)
    desc = {"softmax_cache": "T13: n (d + dv) numbers cached", "linear_state": "T13: d dv numbers", "softmax_decode_flops": "T13: 2 n (d + dv) FLOPs per token", "linear_decode_flops": "T13: 4 d dv FLOPs per token"}
    variables = {k: (("d", "n"), np.broadcast_to(np.asarray(t[k]), (len(d), len(n))).copy(), {"description": desc[k]}) for k in desc}
    variables["state_numel"] = (("variant", "d", "n"), numel, {"long_name": "numbers kept per head", "units": "floats", "description": "numbers held by the state after n writes, per batch item"})
    variables["decode_seconds"] = (
        ("variant", "d", "n", "seed"),
        secs,
        {"long_name": "decode time per token", "units": "s", "description": f"median over {repeats} decode steps (write one pair, read one query), CPU, {platform.processor() or platform.machine()}"},
    )
    coords = {"variant": ("variant", list(mems)), "d": ("d", np.array(d)), "n": ("n", np.array(n)), "seed": ("seed", np.array(seeds, dtype=int)), "dv": ((), int(dv) if dv else int(d[0]))}
    if dv is None and len(d) > 1:
        coords["dv"] = ("d", np.array(d))
    ds = xr.Dataset(variables, coords=coords, attrs=_attrs("bill", {"d": d, "n": n, "seeds": list(seeds), "repeats": repeats, "dv": dv, "softmax": type(soft).__name__}))
    ds.attrs["break_even_n"] = np.asarray(theory.break_even_n(np.array(d, dtype=float), np.asarray(ds["dv"].values, dtype=float)), dtype=float)
    return ds


# the figures docs/readme-plots.md shows
GALLERY = ("capacity-vs-d_capacity", "capacity-vs-d_error-vs-load", "closed-form_closed-form", "orthogonality_orthogonality", "variants_variants", "feature-maps_feature-maps", "bill_bill")


def gallery(out_dir="docs/figures", *, quick: bool = False) -> list[Path]:
    """Measure the example studies on the CPU and write their figures as PNG into ``out_dir``.

    ``quick`` shrinks every grid (for a smoke run); the README gallery uses the full one.
    """
    from capacity.plots import render

    out = Path(out_dir)
    d_grid = (16, 32) if quick else (16, 32, 64, 128)
    seeds = (0, 1) if quick else (0, 1, 2)
    loads = (0.25, 1, 4, 16) if quick else (0.125, 0.25, 0.5, 1, 2, 4, 8, 16)
    studies = [
        grid("capacity-vs-d", variants=("linear", "delta"), keys=("gaussian", "orthogonal"), d=d_grid, loads=loads, seeds=seeds, dv=64),
        grid(
            "orthogonality",
            keys=("gaussian", "correlated(rho=0.05)", "correlated(rho=0.2)", "correlated(rho=0.5)", "anisotropic(rank=4)", "anisotropic(rank=8)", "anisotropic(rank=16)"),
            d=(32,),
            loads=(0.5, 1, 2, 4),
            seeds=seeds,
            dv=64,
            key_stats=True,
        ),
        grid("variants", variants=("linear", "delta(beta=0.5)", "delta(beta=1)"), keys=("gaussian",), d=(32,) if quick else (32, 64), loads=loads, seeds=seeds, dv=64),
        grid("feature-maps", keys=("gaussian",), features=("identity", "relu", "elu1"), d=(16, 32) if quick else (16, 32, 64), loads=loads, seeds=seeds, dv=64),
        bill(d=(64,), n=(1, 8, 64, 512) if quick else (1, 4, 16, 64, 256, 1024, 4096), seeds=seeds),
        measure_closed_form(key_families.make("gaussian", 48, 16, batch=2, seed=[0, 1]), values.make("gaussian", 48, 32, batch=2, seed=[0, 1]), checkpoints=[2, 8, 16, 32, 48]),
    ]
    written = []
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for ds in studies:
            for path in render(ds, tmp):
                if path.suffix == ".png" and path.stem in GALLERY:  # 256 colours: a third of the bytes, the same picture
                    with Image.open(path) as img:
                        img.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out / path.name, optimize=True)
                    written.append(out / path.name)
    return written


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "docs/figures"
    for p in gallery(target, quick="--quick" in sys.argv):
        print(p, f"{p.stat().st_size / 1024:.0f} KiB")
