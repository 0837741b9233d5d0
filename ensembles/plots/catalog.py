"""The plots a version may have, in one table, and which of them this version has.

A plot is a name, a reader (:mod:`ensembles.plots.data`: the numbers from the version's
document, or why there are none) and a figure function (:mod:`ensembles.plots.figures`,
which imports matplotlib only when it draws). The version resource lists the names whose
reader finds data; the report page shows the others with the reader's reason, so an
absent plot is explained, never an empty frame.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar

from ensembles.errors import NotFoundError, Problem
from ensembles.plots import contributions, data, figures
from ensembles.plots.data import PlotAbsentError, VersionView

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Numbers = TypeVar("Numbers")


@dataclass(frozen=True)
class PlotKind(Generic[Numbers]):
    """One plot: its name in URLs, its heading, what it tells a reader, the reader of its
    numbers and the figure function that draws exactly those numbers."""

    name: str
    title: str
    caption: str
    read: Callable[[VersionView], Numbers]
    draw: Callable[[Numbers], Figure]


PLOTS: Final[dict[str, PlotKind[Any]]] = {
    p.name: p
    for p in (
        PlotKind(
            "oob_curve",
            "Score by ensemble size",
            "The out-of-bag (or staged, for boosting) score after each number of members: "
            "where it flattens, more members stop paying.",
            data.oob_curve,
            figures.oob_curve,
        ),
        PlotKind(
            "members",
            "Gain of the ensemble",
            "Each member's own score next to the ensemble's, on the same rows.",
            data.members,
            figures.members,
        ),
        PlotKind(
            "confusion_matrix",
            "Confusion matrix",
            "Rows of each true class by the class predicted.",
            data.confusion_matrix,
            figures.confusion_matrix,
        ),
        PlotKind(
            "predicted_vs_actual",
            "Predicted against actual",
            "Each evaluated row's prediction against its target; the dashed line is a "
            "perfect prediction.",
            data.predicted_vs_actual,
            figures.predicted_vs_actual,
        ),
        PlotKind(
            "residuals",
            "Residuals",
            "Actual minus predicted, against the prediction and as a histogram: a pattern "
            "or a skew is something the model missed.",
            data.residuals,
            figures.residuals,
        ),
        PlotKind(
            "feature_importances",
            "Feature importances",
            "Impurity-based importances summed back onto the table's columns.",
            data.feature_importances,
            figures.feature_importances,
        ),
        PlotKind(
            "contributions",
            "Contributions",
            "How far each column moves the predictions on average (mean |SHAP value| per "
            "class, on the hold-out rows): unlike the impurity importances beside it, "
            "measured on rows the model did not train on, in the units of its output, and "
            "for every kind, not only trees.",
            contributions.read,
            contributions.draw,
        ),
        PlotKind(
            "diversity",
            "Diversity of the members",
            "How differently the members err: an ensemble gains only where they disagree.",
            data.diversity,
            figures.diversity,
        ),
        PlotKind(
            "selection_curve",
            "Ensemble selection",
            "The selection metric as members are added greedily, and how often each was chosen.",
            data.selection_curve,
            figures.selection_curve,
        ),
    )
}


def absence(name: str, view: VersionView) -> str | None:
    """Why the version has no plot ``name`` (None: it has it)."""
    try:
        PLOTS[name].read(view)
    except PlotAbsentError as exc:
        return str(exc)
    return None


def plots_of(view: VersionView) -> list[str]:
    """The names of the plots the version has, in the report's order."""
    return [name for name in PLOTS if absence(name, view) is None]


def plot_data(name: str, view: VersionView) -> Any:
    """The numbers of plot ``name`` of the version; NotFoundError naming the plots it has
    when the name is unknown or the version has no such plot."""
    kind = PLOTS.get(name)
    reason = "no plot of that name" if kind is None else absence(name, view)
    if kind is None or reason is not None:
        has = plots_of(view)
        listed = ", ".join(has) or "none"
        what = f"version {view.get('version')} of model '{view.get('model')}'"
        raise NotFoundError(
            f"{what} has no plot '{name}' ({reason}); its plots: {listed}",
            [Problem(("path", "plot"), f"one of: {listed}")],
        )
    return kind.read(view)
