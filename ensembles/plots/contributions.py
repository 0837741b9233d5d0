"""The ``contributions`` plot: mean |contribution| of each input column, per class, from
``metrics.explanations`` (its reader, without matplotlib, and its figure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ensembles.plots import style
from ensembles.plots.data import MAX_FEATURES, PlotAbsentError, VersionView
from ensembles.plots.figures import basis_words, new_figure, short

if TYPE_CHECKING:
    from matplotlib.figure import Figure


@dataclass(frozen=True)
class Contributions:
    """``values[o][f]``: mean |contribution| of feature f to output o (a class or the
    value), the features in decreasing order of their total, at most MAX_FEATURES."""

    features: list[str]
    outputs: list[str]
    values: list[list[float]]
    total: int
    evaluated_on: str
    rows: int
    space: str
    method: str


def read(view: VersionView) -> Contributions:
    metrics = view.get("metrics")
    stored = metrics.get("explanations") if isinstance(metrics, Mapping) else None
    mean_abs = stored.get("mean_abs") if isinstance(stored, Mapping) else None
    if not isinstance(stored, Mapping) or not isinstance(mean_abs, Mapping) or not mean_abs:
        raise PlotAbsentError(
            "this version has no metrics.explanations (trained before explanations, or "
            "without the optional 'explain' extra): train it again to see them"
        )
    outputs = [str(o) for o in mean_abs]
    columns = list(next(iter(mean_abs.values())))
    totals = {c: sum(float(mean_abs[o][c]) for o in mean_abs) for c in columns}
    ranked = sorted(columns, key=lambda c: -totals[c])[:MAX_FEATURES]
    return Contributions(
        features=ranked,
        outputs=outputs,
        values=[[float(mean_abs[o][c]) for c in ranked] for o in mean_abs],
        total=len(columns),
        evaluated_on=str(stored.get("evaluated_on") or "holdout"),
        rows=int(stored.get("rows") or 0),
        space=str(stored.get("space") or ""),
        method=str(stored.get("method") or ""),
    )


def draw(contributions: Contributions) -> Figure:
    """One horizontal bar per column, a segment per class: the bar's length is how much
    the column moves the output on average, whatever the direction."""
    n = len(contributions.features)
    fig = new_figure(height=min(max(1.4 + 0.26 * n, 2.4), 9.0))
    ax = fig.add_subplot()
    positions = list(range(n))[::-1]
    left = [0.0] * n
    for i, (output, values) in enumerate(
        zip(contributions.outputs, contributions.values, strict=True)
    ):
        ax.barh(positions, values, left=left, color=style.color(i), height=0.7, label=short(output))
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.set_yticks(positions, [short(name) for name in contributions.features])
    ax.set_xlabel(f"mean |contribution| ({contributions.space} space, {contributions.method})")
    ax.grid(axis="y", visible=False)
    if len(contributions.outputs) > 1:
        ax.legend(loc="lower right", fontsize="small")
    shown = "" if n == contributions.total else f"top {n} of {contributions.total}, "
    where = f"{contributions.rows} {basis_words(contributions.evaluated_on)}"
    ax.set_title(f"Contributions ({shown}{where})")
    return fig
