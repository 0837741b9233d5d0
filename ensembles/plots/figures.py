"""matplotlib figures from the numbers :mod:`ensembles.plots.data` read: one function a plot.

Figures are made with ``matplotlib.figure.Figure`` directly, never ``pyplot``: no GUI
backend, no global list of open figures, nothing left behind in a long-running server.
Each function draws exactly the numbers it is given (tests read them back from the
artists), labels both axes and says in its title which rows the figures come from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ensembles.plots import style
from ensembles.plots.data import (
    MAX_CLASSES,
    MORE_DIVERSE_WHEN_HIGH,
    Bars,
    Confusion,
    Curve,
    Curves,
    Diversity,
    Importances,
    Matrix,
    MemberScores,
    Pairs,
    Selection,
    panels,
)

if TYPE_CHECKING:  # matplotlib is imported when a figure is first drawn, not listed
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

MAX_LABEL_CHARS = 40  # of a tick label taken from the user's data
MAX_CELL_TEXT_MEMBERS = 8  # heat maps of at most this many members write each cell's value
_BASIS_WORDS = {
    "holdout": "hold-out rows",
    "oob": "out-of-bag rows",
    "train": "training rows",
    "oof": "out-of-fold predictions",
}


def short(label: str, limit: int = MAX_LABEL_CHARS) -> str:
    """A user's label cut to ``limit`` characters: one long name must not squeeze a plot."""
    return label if len(label) <= limit else label[: limit - 1] + "…"


def basis_words(basis: str) -> str:
    return _BASIS_WORDS.get(basis, basis or "evaluated rows")


def new_figure(height: float = style.HEIGHT_IN, width: float = style.WIDTH_IN) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=style.DPI, layout="constrained")


def _nan(values: Sequence[float | None]) -> list[float]:
    return [np.nan if v is None else float(v) for v in values]


def _draw_curves(ax: Axes, curves: Sequence[Curve]) -> None:
    for i, curve in enumerate(curves):
        ax.plot(
            curve.x,
            _nan(curve.y),
            label=curve.name,
            color=style.color(i),
            marker=style.marker(i) if len(curve.x) <= 60 else None,
            markersize=3.5,
            linestyle=style.linestyle(i),
            linewidth=1.6,
        )
    ax.set_xlabel(curves[0].x_label)
    ax.set_ylabel(curves[0].y_label)
    if len(curves) > 1:
        ax.legend(loc="best", frameon=False)


def _panel_title(panel: Sequence[Curve]) -> str:
    label = panel[0].y_label
    return label[:1].upper() + label[1:]


def oob_curve(curves: Curves) -> Figure:
    groups = curves.panels()
    fig = new_figure()
    axes = fig.subplots(1, len(groups), squeeze=False)[0]
    for ax, group in zip(axes, groups, strict=True):
        _draw_curves(ax, group)
        ax.set_title(_panel_title(group))
    return fig


def members(scores: MemberScores) -> Figure:
    """Members' scores as dots (a min-mean-max bar for a homogeneous ensemble), the
    ensemble's as a diamond of its own colour with a dashed line across: how much the
    ensemble gains over its members. The axis is zoomed onto the scores."""
    labels = [short(name) for name, _ in scores.named]
    rows = len(labels) + (1 if scores.spread else 0) + 1
    fig = new_figure(height=min(max(1.5 + 0.3 * rows, 2.6), 9.0))
    ax = fig.add_subplot()
    positions = list(range(rows))[::-1]
    y = iter(positions)
    if labels:
        ax.plot(
            _nan([v for _, v in scores.named]),
            [next(y) for _ in labels],
            "o",
            color=style.MEMBER,
            markersize=7,
            label="member",
        )
    if scores.spread is not None:
        s = scores.spread
        ax.errorbar(
            [s.mean],
            [next(y)],
            xerr=[[s.mean - s.low], [s.high - s.mean]],
            fmt="o",
            color=style.MEMBER,
            capsize=5,
            linewidth=2,
            markersize=7,
            label=f"members: min, mean, max of {s.n_members}",
        )
    ensemble = np.nan if scores.ensemble is None else scores.ensemble
    ax.plot([ensemble], [next(y)], "D", color=style.ENSEMBLE, markersize=9, label="ensemble")
    if scores.ensemble is not None:
        ax.axvline(scores.ensemble, color=style.ENSEMBLE, linestyle="--", linewidth=1.2)
    spread = [f"{scores.spread.n_members} members"] if scores.spread else []
    ax.set_yticks(positions, [*labels, *spread, "ensemble"])
    ax.set_ylim(-0.7, rows - 0.3)
    ax.set_xlabel(f"{scores.metric} on {basis_words(scores.basis)}")
    ax.set_title(f"Members against the ensemble{_gain(scores)}")
    ax.grid(axis="y", visible=False)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.28), ncols=3, frameon=False)
    return fig


def _gain(scores: MemberScores) -> str:
    """``: +0.031 over the best member`` of named members (higher is better for accuracy
    and r2); over the mean member of a homogeneous ensemble, whose members are draws of
    one learner (its luckiest tree on a few hold-out rows says little)."""
    if scores.ensemble is None:
        return ""
    named = [v for _, v in scores.named if v is not None]
    if named:
        return f": {scores.ensemble - max(named):+.3f} over the best member"
    if scores.spread is not None:
        return f": {scores.ensemble - scores.spread.mean:+.3f} over the mean member"
    return ""


def confusion_matrix(confusion: Confusion) -> Figure:
    """At most ``MAX_CLASSES`` classes (the rest summed in the last row and column, and
    the title says so): the cost of drawing, and what a reader can take in, are bounded."""
    k = len(confusion.classes)
    side = min(max(3.0, 0.55 * k + 1.6), 9.0)
    fig = new_figure(height=side, width=side + 1.4)
    ax = fig.add_subplot()
    matrix = np.asarray(confusion.matrix, dtype=float)
    image = ax.imshow(matrix, cmap=style.HEATMAP, vmin=0)
    fig.colorbar(image, ax=ax, label="rows", shrink=0.8)
    threshold = matrix.max() / 2 if matrix.size else 0
    if k <= MAX_CLASSES:
        for (i, j), value in np.ndenumerate(matrix):
            ax.text(
                j,
                i,
                f"{int(value)}",
                ha="center",
                va="center",
                fontsize=9 if k <= 12 else 7,
                color="black" if value > threshold else "white",
            )
    labels = [short(c) for c in confusion.classes]
    ax.set_xticks(range(k), labels, rotation=45 if k > 4 else 0, ha="right")
    ax.set_yticks(range(k), labels)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    ax.grid(False)
    title = f"Confusion matrix ({basis_words(confusion.evaluated_on)})"
    if confusion.summed:
        title += (
            f"\nthe {k - 1} classes with the most rows of {confusion.n_classes:,}; "
            f"the other {confusion.summed:,} summed in the last row and column"
        )
    ax.set_title(title, fontsize=10 if confusion.summed else None)
    return fig


def _sample_note(pairs: Pairs) -> str:
    shown = len(pairs.actual)
    return f"{shown} of {pairs.n} " if shown < pairs.n else ""


def predicted_vs_actual(pairs: Pairs) -> Figure:
    fig = new_figure(height=4.2, width=5.0)
    ax = fig.add_subplot()
    ax.scatter(
        pairs.actual, pairs.predicted, s=14, alpha=0.75, color=style.MEMBER, edgecolors="none"
    )
    both = [*pairs.actual, *pairs.predicted]
    low, high = min(both), max(both)
    ax.plot([low, high], [low, high], color=style.ENSEMBLE, linestyle="--", label="perfect")
    ax.set_xlabel("actual target")
    ax.set_ylabel("predicted target")
    ax.legend(loc="upper left", frameon=False)
    ax.set_title(
        f"Predicted against actual ({_sample_note(pairs)}{basis_words(pairs.evaluated_on)})"
    )
    return fig


def residuals(pairs: Pairs) -> Figure:
    fig = new_figure()
    scatter, histogram = fig.subplots(1, 2, width_ratios=[2, 1])
    values = pairs.residuals
    scatter.scatter(
        pairs.predicted, values, s=14, alpha=0.75, color=style.MEMBER, edgecolors="none"
    )
    scatter.axhline(0, color=style.ENSEMBLE, linestyle="--")
    scatter.set_xlabel("predicted target")
    scatter.set_ylabel("residual (actual - predicted)")
    scatter.set_title(f"Residuals ({_sample_note(pairs)}{basis_words(pairs.evaluated_on)})")
    histogram.hist(values, bins=min(30, max(5, len(values) // 5)), color=style.MEMBER)
    histogram.set_xlabel("residual")
    histogram.set_ylabel("rows")
    histogram.set_title("Distribution")
    return fig


def feature_importances(importances: Importances) -> Figure:
    n = len(importances.names)
    fig = new_figure(height=min(max(1.4 + 0.26 * n, 2.4), 9.0))
    ax = fig.add_subplot()
    positions = list(range(n))[::-1]
    ax.barh(positions, importances.values, color=style.MEMBER, height=0.7)
    ax.set_yticks(positions, [short(name) for name in importances.names])
    ax.set_xlabel("importance (share of the total, summed over encoded columns)")
    ax.grid(axis="y", visible=False)
    shown = f"top {n} of {importances.total}" if n < importances.total else f"{n} features"
    ax.set_title(f"Feature importances ({shown})")
    return fig


def _bars(ax: Axes, bars: Bars, colors: Sequence[str] | None = None) -> None:
    positions = list(range(len(bars.labels)))
    ax.bar(
        positions,
        _nan(bars.values),
        color=list(colors) if colors else [style.color(i) for i in positions],
        width=0.65,
    )
    labels = [short(label) for label in bars.labels]
    ax.set_xticks(positions, labels, rotation=30 if len(bars.labels) > 3 else 0, ha="right")
    ax.set_ylabel(bars.y_label)
    ax.axhline(0, color=style.NEUTRAL, linewidth=0.8)
    ax.grid(axis="x", visible=False)


def _heatmap(fig: Figure, ax: Axes, matrix: Matrix) -> None:
    """The matrix on its measure's fixed scale (members who always agree read as 0, not
    as a flat colour of an arbitrary scale), each cell's value written in it when few."""
    values = np.asarray(_nan([v for row in matrix.values for v in row]), dtype=float)
    k = len(matrix.labels)
    grid = values.reshape(k, k)
    image = ax.imshow(grid, cmap=style.HEATMAP, vmin=matrix.low, vmax=matrix.high)
    measure = matrix.name.replace("_", " ")
    fig.colorbar(image, ax=ax, label=measure, shrink=0.8)
    if k <= MAX_CELL_TEXT_MEMBERS:
        middle = (matrix.low + matrix.high) / 2
        for (i, j), value in np.ndenumerate(grid):
            ax.text(
                j,
                i,
                "n/a" if np.isnan(value) else f"{value:.2f}",
                ha="center",
                va="center",
                fontsize=9 if k <= 5 else 7,
                color="black" if value > middle else "white",
            )
    step = max(1, k // 12)
    ticks = list(range(0, k, step))
    ax.set_xticks(ticks, [short(matrix.labels[i]) for i in ticks], rotation=90)
    ax.set_yticks(ticks, [short(matrix.labels[i]) for i in ticks])
    ax.set_xlabel("member")
    ax.set_ylabel("member")
    ax.grid(False)
    shown = f" (first {k} of {matrix.n_members} members)" if matrix.n_members > k else ""
    ax.set_title(f"Pairwise {measure}{shown}")


def _directed_bars(ax: Axes, bars: Bars) -> None:
    """Pairwise measures point both ways (a high disagreement: diverse members; a high
    Q, correlation, kappa or double fault: alike ones): each bar's colour and hatch say
    which, and so does the legend."""
    from matplotlib.patches import Patch

    diverse = [MORE_DIVERSE_WHEN_HIGH.get(label) for label in bars.labels]
    colors = [style.MEMBER if d else style.ENSEMBLE for d in diverse]
    _bars(ax, bars, colors)
    for patch, d in zip(ax.patches, diverse, strict=False):
        patch.set_hatch("" if d else "//")
    legend = [
        Patch(facecolor=style.MEMBER, label="higher: members more diverse"),
        Patch(facecolor=style.ENSEMBLE, hatch="//", label="higher: members more alike"),
    ]
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.32), frameon=False)


def diversity(found: Diversity) -> Figure:
    fig = new_figure(height=style.HEIGHT_IN + 0.6)
    if found.matrix is not None:
        bars_ax, matrix_ax = fig.subplots(1, 2)
        _heatmap(fig, matrix_ax, found.matrix)
    else:
        bars_ax = fig.add_subplot()
    if any(label in MORE_DIVERSE_WHEN_HIGH for label in found.bars.labels):
        _directed_bars(bars_ax, found.bars)
    else:
        _bars(bars_ax, found.bars)
    bars_ax.set_title(f"Diversity ({basis_words(found.evaluated_on)})")
    return fig


def selection_curve(selection: Selection) -> Figure:
    """The selection curve(s) (one panel per pair of axes: steps of each bag, then the
    score by number of bags) and the times each member was selected."""
    fig = new_figure()
    groups = panels(selection.curves)
    count = len(groups) + int(selection.weights is not None)
    axes = fig.subplots(1, count, squeeze=False)[0]
    for ax, group in zip(axes, groups, strict=False):
        _draw_curves(ax, group)
        ax.set_title(f"Greedy selection by {group[0].x_label}")
    if selection.weights is not None:
        ax = axes[-1]
        _bars(ax, selection.weights, [style.MEMBER] * len(selection.weights.labels))
        ax.set_title("Selected members")
    return fig
