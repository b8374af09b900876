"""The mqar task's own figure (the figures layer: ``lacapacity.plots.render`` finds ``FIGURES`` here, nothing of
the tasks layer imports this module). MQAR accuracy of memories without training: one colour per memory.

Left: accuracy against distinct keys written (pairs) with no overwrites, and the T10 prediction decoded over the
whole vocabulary (the function the task stores ``accuracy_pred`` by, ``MqarTask.closed_forms``:
``lacapacity.theory.vocab_argmax_recall``; ``theory.argmax_recall`` decodes over the n stored values only), drawn only
where it applies: the additive memory with random (Gaussian) keys. Right: accuracy against the fraction of keys
overwritten, at one pairs value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from lacapacity.base import _validate
from lacapacity.errors import CapacityError
from lacapacity.plots import _data, names, theme
from lacapacity.tasks.mqar.task import MqarTask

if TYPE_CHECKING:
    import xarray as xr
    from matplotlib.figure import Figure


ACCURACY = "MQAR accuracy (fraction)"
PAIRS = "distinct keys written (pairs)"
OVERWRITE = "keys overwritten (fraction)"


def mqar_figure(ds: xr.Dataset, *, pairs: int | None = None) -> Figure:
    """The MQAR figure of an ``mqar`` study's results (dims variant, key_family, d, n, overwrite, seed; variable
    accuracy; one key family and one d).

    ``pairs``: where the right panel cuts the grid (default the smallest n measured, where the memories still recall
    well without overwrites, so the panel shows what overwrites alone cost).
    """
    _data.require(
        ds,
        "MQAR",
        variables=("accuracy",),
        dims=("variant", "n", "overwrite"),
        allowed=("variant", "key_family", "d", "n", "overwrite", "seed"),
    )
    for dim in ("key_family", "d"):
        if ds.sizes.get(dim, 1) != 1:
            raise CapacityError(f"the MQAR figure draws one {dim}; select one first, e.g. ds.sel({dim}=...)")
    if "vocab" not in ds.attrs:
        raise CapacityError("missing attribute 'vocab'; the MQAR figure draws the results of an mqar study")
    keys = str(ds["key_family"].values.ravel()[0]).partition("(")[0] if "key_family" in ds.coords else "gaussian"
    d, dv, vocab = int(ds["d"].values.ravel()[0]), int(np.asarray(ds["dv"].values).ravel()[0]), int(ds.attrs["vocab"])
    ds = ds.squeeze([x for x in ("key_family", "d") if x in ds.dims]).rename(n="pairs")
    grid_pairs = [int(p) for p in ds["pairs"].values]
    cut = grid_pairs[0] if pairs is None else _validate.positive_int("pairs", pairs)
    if cut not in grid_pairs:
        raise CapacityError(f"pairs={pairs!r} was not measured; the Dataset has pairs {grid_pairs}")
    labels = [str(v) for v in ds["variant"].values]
    colors = theme.palette(labels)
    ows = [float(x) for x in ds["overwrite"].values]
    nseeds = ds.sizes.get("seed", 1)
    with theme.style():
        fig, axes = theme.figure(1, 2, sharey=True)
        left, right = axes[0]
        if 0.0 in ows:
            theme.curves(
                left,
                _data.tidy(ds["accuracy"].sel(overwrite=0.0), "accuracy"),
                x="pairs",
                y="accuracy",
                hue="variant",
                name=names.variant_name,
                colors=colors,
            )
            additive = [lab for lab in labels if _data.reads(ds, lab)[0]]  # T10 applies
            if additive and keys == "gaussian":
                x = np.unique(np.round(np.geomspace(min(grid_pairs), max(grid_pairs), 48)))
                theme.theory_line(
                    left,
                    x,
                    MqarTask.closed_forms["accuracy_pred"](x, d, dv, vocab),  # on a finer grid than the stored n
                    theorem="T10",
                    label=f"T10, argmax over {vocab} values (additive)",
                )
            left.set_title("no overwrites")
        else:
            left.set_title("no overwrites (not measured)")
        theme.log2_x(left)
        at = ds["accuracy"].sel(pairs=cut)
        theme.curves(
            right,
            _data.tidy(at, "accuracy"),
            x="overwrite",
            y="accuracy",
            hue="variant",
            name=names.variant_name,
            colors=colors,
        )
        right.set_title(f"{cut} pairs")
        for ax in (left, right):
            ax.set_ylim(-0.03, 1.03)
        left.set_xlabel(PAIRS)
        right.set_xlabel(OVERWRITE)
        left.set_ylabel(ACCURACY)
        right.set_ylabel("")
        theme.legend(fig, axes, title="memory / theory")
        theme.note(
            fig,
            theme.SEEDS_NOTE
            + f" ({nseeds} seed{'s' if nseeds != 1 else ''}; d = {d}, dv = {dv}, vocabulary {vocab}, keys: {names.keys_name(keys)}). "
            "Accuracy: argmax over the whole value vocabulary equals the key's latest value. "
            "Overwrites are written after all first writes. "
            "T10 here decodes over the vocabulary, not only the n stored values.",
        )
    return theme.finish(fig, "mqar")


FIGURES = {"mqar": mqar_figure}  # figure name -> function, for lacapacity.plots.render
