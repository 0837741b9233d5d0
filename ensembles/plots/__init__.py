"""Plots of a version, drawn from its stored metrics only (no HTTP; matplotlib, SVG or PNG).

- :mod:`ensembles.plots.data` reads each plot's numbers from the version's document, or
  says why the version has none (no matplotlib);
- :mod:`ensembles.plots.catalog` is the one table of plots (name -> reader and figure
  function) and tells which a version has;
- :mod:`ensembles.plots.figures` draws them, :mod:`ensembles.plots.style` is how they look;
- :mod:`ensembles.plots.render` turns a figure into SVG or PNG bytes;
- :mod:`ensembles.plots.versions` compares the versions of a model.

Listing plots costs no matplotlib: :mod:`~ensembles.plots.figures` imports it when it draws.
"""

from ensembles.plots.catalog import PLOTS, PlotKind, absence, plot_data, plots_of
from ensembles.plots.data import PlotAbsentError, VersionView

__all__ = [
    "PLOTS",
    "PlotAbsentError",
    "PlotKind",
    "VersionView",
    "absence",
    "plot_data",
    "plots_of",
]
