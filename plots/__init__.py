"""Seaborn figures of study results, each with the closed form it tests drawn in (docs/theory.md).

``render(ds, out=folder)`` writes the figures that fit a results Dataset (chosen from its variables and
dimensions, see ``choose``) as PNG and PDF and returns their paths; ``capacity plot RESULTS`` does
the same from the command line. Each figure is also a function that takes a result Dataset and
returns a ``matplotlib.figure.Figure`` (Agg canvas, no display):

- ``capacity_vs_d``: capacity per criterion against d, with T5, T7 and T10;
- ``error_vs_load``: mean error against n/d, with T5, T7, T8 and a marker at n = d;
- ``orthogonality``: error against mean squared coherence and effective rank, with T4;
- ``variant_curves``: variants side by side (error and recall), with T5/T7/T8 and T10;
- ``feature_maps``: error against n / D and capacity against feature dimension D;
- ``bill``: cache numbers and decode cost against n for softmax and linear (T13);
- ``forgetting``: signal, error and recall against the age of a pair, with T21-T24 and the horizons;
- ``needle_figure``, ``needle_depth``: needle recall against haystack length, and by depth and length
  (``lacapacity.tasks.needle.probe``);
- ``closed_form``: measured against predicted reads (T2/T3/T4); its data from
  ``closed_form.measure(keys, values)``;
- ``precision_curves``: error and recall against n per state dtype and rounding, with T14-T19;
- ``heads_capacity``: capacity against the number of heads at a fixed d and a fixed state size, with T20.

>>> from lacapacity import plots
>>> sorted(plots.FIGURES)[:3]
['bill', 'capacity', 'closed-form']
"""

from lacapacity.plots.bill import bill
from lacapacity.plots.capacity_vs_d import capacity_vs_d
from lacapacity.plots.closed_form import closed_form
from lacapacity.plots.closed_form import measure as measure_closed_form
from lacapacity.plots.error_vs_load import error_vs_load
from lacapacity.plots.feature_maps import feature_maps
from lacapacity.plots.forgetting import forgetting
from lacapacity.plots.frontier import frontier
from lacapacity.plots.heads import heads_capacity
from lacapacity.plots.needle import needle_depth, needle_figure
from lacapacity.plots.orthogonality import orthogonality
from lacapacity.plots.precision import precision_curves
from lacapacity.plots.render import FIGURES, available, choose, figures, render, render_path
from lacapacity.plots.variants import variant_curves

__all__ = [
    "render",
    "render_path",
    "figures",
    "available",
    "FIGURES",
    "choose",
    "capacity_vs_d",
    "error_vs_load",
    "orthogonality",
    "variant_curves",
    "feature_maps",
    "frontier",
    "precision_curves",
    "heads_capacity",
    "bill",
    "closed_form",
    "measure_closed_form",
    "forgetting",
    "needle_figure",
    "needle_depth",
]
