"""The versions of one model side by side: their scores in a table's rows and one plot.

The comparison a user makes before moving an alias: is version 7 better than the one
``production`` points at, on the same kind of rows? Every figure is a version's stored
metric; versions trained on another table are marked, since their scores do not compare.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure

from ensembles.plots import style
from ensembles.plots.data import VersionView, primary_metric
from ensembles.plots.figures import basis_words, new_figure

COMPARED_BASES = ("holdout", "cv", "oob", "train")
LOWER_IS_BETTER = frozenset({"rmse", "mae", "log_loss", "loss"})
CLASSIFICATION_METRICS = (
    "accuracy",
    "balanced_accuracy",
    "f1_macro",
    "f1_weighted",
    "log_loss",
    "roc_auc",
)
REGRESSION_METRICS = ("r2", "rmse", "mae")


def metric_names(task: str) -> tuple[str, ...]:
    return CLASSIFICATION_METRICS if task == "classification" else REGRESSION_METRICS


def value(view: VersionView, basis: str, metric: str) -> float | None:
    """A version's stored ``metrics[basis][metric]`` (None where it has none)."""
    scores = (view.get("metrics") or {}).get(basis)
    if not isinstance(scores, Mapping):
        return None
    found = scores.get(metric)
    return float(found) if isinstance(found, int | float) and not isinstance(found, bool) else None


@dataclass(frozen=True)
class Row:
    """One metric on one kind of rows, across versions, and which version does best."""

    basis: str
    metric: str
    values: list[float | None]
    best: frozenset[int]  # the versions (indexes into values) with the best value

    @property
    def label(self) -> str:
        return f"{basis_words(self.basis)}: {self.metric}"


def rows(views: Sequence[VersionView]) -> list[Row]:
    """Every metric any of the versions has, by basis, with the best version of each."""
    task = str(views[0].get("task")) if views else "classification"
    out = []
    for basis in COMPARED_BASES:
        for metric in metric_names(task):
            values = [value(v, basis, metric) for v in views]
            if all(v is None for v in values):
                continue
            out.append(Row(basis, metric, values, _best(values, metric)))
    return out


def _best(values: list[float | None], metric: str) -> frozenset[int]:
    """The versions with the best value; none when fewer than two have one or all tie."""
    present = [v for v in values if v is not None]
    if len(present) < 2 or len(set(present)) == 1:
        return frozenset()
    best = (min if metric in LOWER_IS_BETTER else max)(present)
    return frozenset(i for i, v in enumerate(values) if v == best)


def comparison(views: Sequence[VersionView]) -> Figure:
    """The primary metric of each version on each kind of rows, versions in number order,
    each alias written over the version it points at."""
    ordered = sorted(views, key=lambda v: int(v["version"]))
    metric = primary_metric(ordered[0]) if ordered else "score"
    fig = new_figure(height=3.4)
    ax = fig.add_subplot()
    positions = list(range(len(ordered)))
    drawn = 0
    for i, basis in enumerate(COMPARED_BASES):
        values = [value(v, basis, metric) for v in ordered]
        if all(v is None for v in values):
            continue
        ax.plot(
            positions,
            [float("nan") if v is None else v for v in values],
            label=basis_words(basis),
            color=style.color(i),
            marker=style.marker(i),
            linestyle=style.linestyle(i),
            linewidth=1.4,
        )
        drawn += 1
    for x, view in zip(positions, ordered, strict=True):
        aliases = list(view.get("aliases") or [])
        if aliases:
            ax.annotate(
                ", ".join(aliases),
                (x, 1.0),
                xycoords=("data", "axes fraction"),
                ha="center",
                va="bottom",
                fontsize=8,
                color=style.NEUTRAL,
            )
    ax.set_xticks(positions, [f"v{v['version']}" for v in ordered])
    ax.set_xlabel("version")
    ax.set_ylabel(metric)
    if drawn:
        ax.legend(loc="best", frameon=False)
    ax.set_title(f"{metric} by version", pad=14)
    return fig


def other_tables(views: Sequence[VersionView], reference: VersionView) -> list[int]:
    """Versions trained on another table than ``reference`` (their scores do not compare)."""
    sha = _sha(reference)
    return [int(v["version"]) for v in views if _sha(v) != sha]


def _sha(view: VersionView) -> Any:
    dataset = view.get("dataset") or {}
    return dataset.get("sha256") if isinstance(dataset, Mapping) else None
