"""What each plot shows, read from a version's document: the numbers, or why there are none.

A plot never computes a figure of its own: every number it draws is taken from the
version's stored metrics (or its feature importances) as they are served, so a picture
cannot disagree with the JSON. This module reads those numbers into small typed shapes
and, where a plot does not apply to the version, says why in the user's terms (the note
training recorded, when there is one). It imports no plotting library: the version
resource lists its plots from here without paying for matplotlib.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ensembles.catalog import KINDS

VersionView = Mapping[str, Any]
"""A version as the API serves it (``GET /v1/models/{name}/versions/{ref}``), as JSON."""

MAX_FEATURES = 25  # bars of the feature-importance plot (the most important first)
MAX_SELECTION_BARS = 30  # members of the selection-weights panel
MAX_CLASSES = 20  # classes of a confusion matrix drawn one by one; the others summed as one
MAX_MATRIX_MEMBERS = 50  # members of the diversity heat map (as many as training stores)
BASES = ("holdout", "oob", "train")  # where a confusion matrix is taken from, in order
_CURVE_BASES = {"oob": "out of bag", "holdout": "hold-out rows", "train": "training rows"}


class PlotAbsentError(Exception):
    """The version has no data for this plot; the message says why, for the reader."""


@dataclass(frozen=True)
class Curve:
    """One score curve: ``y`` against ``x`` (``None`` where a point has no score)."""

    name: str
    x_label: str
    x: list[float]
    y_label: str
    y: list[float | None]


def panels(curves: list[Curve]) -> list[list[Curve]]:
    """Curves that share both axes' labels go on one panel; the others get their own."""
    groups: dict[tuple[str, str], list[Curve]] = {}
    for curve in curves:
        groups.setdefault((curve.x_label, curve.y_label), []).append(curve)
    return list(groups.values())


@dataclass(frozen=True)
class Curves:
    """Curves drawn together, a panel per pair of axis labels."""

    curves: list[Curve]

    def panels(self) -> list[list[Curve]]:
        return panels(self.curves)


@dataclass(frozen=True)
class Spread:
    """min / mean / max of the members' scores of a homogeneous ensemble."""

    n_members: int
    low: float
    mean: float
    high: float


@dataclass(frozen=True)
class MemberScores:
    """Each member's score beside the ensemble's, on the same rows (``basis``)."""

    metric: str
    basis: str
    ensemble: float | None
    named: list[tuple[str, float | None]]
    spread: Spread | None


@dataclass(frozen=True)
class Confusion:
    """Rows: true class; columns: predicted class; both in ``classes`` order. When the
    model has more than ``MAX_CLASSES`` classes, the last row and column sum the
    ``summed`` classes with the fewest rows (what a reader can take in, and bounded work)."""

    classes: list[str]
    matrix: list[list[int]]
    evaluated_on: str
    summed: int = 0

    @property
    def n_classes(self) -> int:
        return len(self.classes) - 1 + self.summed if self.summed else len(self.classes)


@dataclass(frozen=True)
class Pairs:
    """Actual and predicted targets of (a bounded sample of) the evaluated rows."""

    evaluated_on: str
    actual: list[float]
    predicted: list[float]
    n: int

    @property
    def residuals(self) -> list[float]:
        return [a - p for a, p in zip(self.actual, self.predicted, strict=True)]


@dataclass(frozen=True)
class Importances:
    """The most important features, most important first, and how many there are."""

    names: list[str]
    values: list[float]
    total: int


@dataclass(frozen=True)
class Bars:
    """Named values drawn as bars."""

    labels: list[str]
    values: list[float | None]
    y_label: str


@dataclass(frozen=True)
class Matrix:
    """A members x members matrix with its members' names, on its measure's fixed scale
    (``low``..``high``: a matrix of one value still reads as that value)."""

    name: str
    labels: list[str]
    values: list[list[float | None]]
    low: float = 0.0
    high: float = 1.0
    n_members: int = 0  # members measured; more than ``labels``: only the first are drawn


@dataclass(frozen=True)
class Diversity:
    """How differently the members err: pairwise means (classification) or the ambiguity
    decomposition (regression), and a members x members matrix where stored."""

    evaluated_on: str
    bars: Bars
    matrix: Matrix | None


@dataclass(frozen=True)
class Selection:
    """Ensemble selection: the selection curve(s) and each member's selection count."""

    curves: list[Curve]
    weights: Bars | None


# ----------------------------------------------------------------------------- readers


def _metrics(view: VersionView) -> Mapping[str, Any]:
    metrics = view.get("metrics") or {}
    return metrics if isinstance(metrics, Mapping) else {}


def _notes(view: VersionView) -> list[str]:
    return [str(n) for n in _metrics(view).get("notes") or []]


def _note_about(view: VersionView, *words: str) -> str | None:
    """The first training note that mentions one of ``words`` (the recorded reason)."""
    for note in _notes(view):
        if any(word in note.lower() for word in words):
            return note
    return None


def _never(view: VersionView, measure: str) -> str | None:
    """Why no fit of the version's kind has ``measure``, in plain words (training writes
    no note for those: a note says what was skipped for this model only)."""
    kind = KINDS.get(str(view.get("kind")))
    if kind is None:
        return None
    name = kind.name
    if measure == "curve" and (
        kind.curve == "none" or (kind.curve == "oob" and not kind.leaves_rows_out)
    ):
        return "no score curve: the ensemble neither leaves rows out of bag nor boosts in stages"
    if measure == "members" and kind.members == "none":
        return f"a {name} model's members are not predictors of their own (boosting stages)"
    if measure == "diversity" and kind.members == "none":
        what = "diversity" if view.get("task") == "classification" else "ambiguity"
        return f"no {what}: a {name} model's members do not predict the target on their own"
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


def primary_metric(view: VersionView) -> str:
    return "accuracy" if view.get("task") == "classification" else "r2"


def _is_selection(curve: Curve) -> bool:
    return "selection" in curve.name.lower()


def curves_of(view: VersionView) -> list[Curve]:
    """Every score curve of the version: ``metrics.curves`` (v1.1) when present, else the
    single ``metrics.curve`` of older versions, both in one shape."""
    metrics = _metrics(view)
    listed = metrics.get("curves")
    if isinstance(listed, list) and listed:
        return [
            Curve(
                name=str(c.get("name", "curve")),
                x_label=str(c.get("x_label") or "members"),
                x=[float(v) for v in c.get("x") or []],
                y_label=str(c.get("y_label") or "score"),
                y=[_number(v) for v in c.get("y") or []],
            )
            for c in listed
            if isinstance(c, Mapping) and c.get("x")
        ]
    old = metrics.get("curve")
    if not isinstance(old, Mapping) or not old.get("points"):
        return []
    basis = str(old.get("basis") or "holdout")
    metric = str(old.get("metric") or primary_metric(view))
    points = old["points"]
    return [  # named and labelled as metrics.curves names and labels the same curve
        Curve(
            name=f"{basis}_{metric}",
            x_label="members",
            x=[float(p["n_estimators"]) for p in points],
            y_label=f"{metric} ({_CURVE_BASES.get(basis, basis)})",
            y=[_number(p.get("score")) for p in points],
        )
    ]


def oob_curve(view: VersionView) -> Curves:
    curves = [c for c in curves_of(view) if not _is_selection(c)]
    if curves:
        return Curves(curves)
    raise PlotAbsentError(
        _note_about(view, "curve")
        or _never(view, "curve")
        or f"this version ({view.get('kind')}) stores no score curve against the number of members"
    )


def members(view: VersionView) -> MemberScores:
    metrics = _metrics(view)
    entries = [e for e in metrics.get("estimators") or [] if isinstance(e, Mapping)]
    metric = primary_metric(view)
    named: list[tuple[str, float | None]] = []
    spread: Spread | None = None
    basis = ""
    for entry in entries:
        found = [k for k, v in entry.items() if k not in ("name", "n_members") and _scores(v)]
        if not found:
            continue
        basis = found[0]
        value = entry[basis].get(metric)
        if isinstance(value, Mapping):  # min / mean / max over homogeneous members
            if any(_number(value.get(k)) is None for k in ("min", "mean", "max")):
                continue  # not finite: scores of a target near float64's limit overflow
            spread = Spread(
                int(entry.get("n_members") or 0),
                float(value["min"]),
                float(value["mean"]),
                float(value["max"]),
            )
        else:
            named.append((str(entry.get("name")), _number(value)))
    if not named and spread is None:
        raise PlotAbsentError(
            _note_about(view, "predictors of their own", "member score")
            or _never(view, "members")
            or "this version stores no score of its members beside the ensemble's"
        )
    ensemble_scores = metrics.get(basis)
    ensemble = (
        _number(ensemble_scores.get(metric)) if isinstance(ensemble_scores, Mapping) else None
    )
    return MemberScores(metric, basis, ensemble, named, spread)


def _scores(value: Any) -> bool:
    return isinstance(value, Mapping)


def confusion_matrix(view: VersionView) -> Confusion:
    if view.get("task") != "classification":
        raise PlotAbsentError(
            "a regression model has no confusion matrix: see predicted_vs_actual and residuals"
        )
    metrics = _metrics(view)
    classes = [str(c) for c in view.get("classes") or []]
    for basis in BASES:
        scores = metrics.get(basis)
        if isinstance(scores, Mapping) and scores.get("confusion_matrix"):
            return _top_classes(classes, scores["confusion_matrix"], basis)
    raise PlotAbsentError("this version stores no confusion matrix")


def _top_classes(classes: list[str], stored: Any, basis: str) -> Confusion:
    """The matrix as stored, or its ``MAX_CLASSES - 1`` classes with the most true rows (in
    the classes' order) and one last class summing all the others."""
    grid = np.asarray(stored, dtype=np.int64)
    k = grid.shape[0]
    if len(classes) != k:
        classes = [str(i) for i in range(k)]
    if k <= MAX_CLASSES:
        return Confusion(classes, grid.tolist(), basis)
    kept = np.sort(np.argsort(-grid.sum(axis=1), kind="stable")[: MAX_CLASSES - 1])
    rest = np.setdiff1d(np.arange(k), kept)
    top = np.zeros((len(kept) + 1, len(kept) + 1), dtype=np.int64)
    top[:-1, :-1] = grid[np.ix_(kept, kept)]
    top[:-1, -1] = grid[np.ix_(kept, rest)].sum(axis=1)
    top[-1, :-1] = grid[np.ix_(rest, kept)].sum(axis=0)
    top[-1, -1] = grid[np.ix_(rest, rest)].sum()
    labels = [classes[i] for i in kept] + [f"{len(rest):,} other classes"]
    return Confusion(labels, top.tolist(), basis, summed=len(rest))


def _pairs(view: VersionView) -> Pairs:
    if view.get("task") != "regression":
        raise PlotAbsentError(
            "a classification model has no predicted-vs-actual values: see confusion_matrix"
        )
    stored = _metrics(view).get("predicted_vs_actual")
    if not isinstance(stored, Mapping) or not stored.get("actual"):
        raise PlotAbsentError(
            "this version was trained before predicted and actual values were stored "
            "with its metrics: train it again to see them"
        )
    return Pairs(
        evaluated_on=str(stored.get("evaluated_on") or "holdout"),
        actual=[float(v) for v in stored["actual"]],
        predicted=[float(v) for v in stored["predicted"]],
        n=int(stored.get("n") or len(stored["actual"])),
    )


def predicted_vs_actual(view: VersionView) -> Pairs:
    return _pairs(view)


def residuals(view: VersionView) -> Pairs:
    return _pairs(view)


def feature_importances(view: VersionView) -> Importances:
    stored = view.get("feature_importances")
    if not isinstance(stored, Mapping) or not stored:
        raise PlotAbsentError(
            f"a {view.get('kind')} ensemble of these members measures no feature importances "
            "(only tree-based members do)"
        )
    ranked = sorted(stored.items(), key=lambda kv: -float(kv[1]))[:MAX_FEATURES]
    return Importances([k for k, _ in ranked], [float(v) for _, v in ranked], len(stored))


_PAIRWISE = ("disagreement", "q_statistic", "correlation", "double_fault", "kappa")
MORE_DIVERSE_WHEN_HIGH: dict[str, bool] = {
    "disagreement": True,  # the share of rows where exactly one of the two is right
    "q_statistic": False,  # Yule's Q, correlation, kappa: how alike the two members are
    "correlation": False,
    "kappa": False,
    "double_fault": False,  # the share of rows both get wrong
}
SCALES: dict[str, tuple[float, float]] = {
    "disagreement": (0.0, 1.0),
    "double_fault": (0.0, 1.0),
    "q_statistic": (-1.0, 1.0),
    "correlation": (-1.0, 1.0),
    "kappa": (-1.0, 1.0),
}
_AMBIGUITY = ("ensemble_mse", "mean_member_mse", "ambiguity")


def diversity(view: VersionView) -> Diversity:
    metrics = _metrics(view)
    stored = metrics.get("diversity")
    if isinstance(stored, Mapping) and isinstance(stored.get("pairwise"), Mapping):
        pairwise = stored["pairwise"]
        names = [k for k in _PAIRWISE if k in pairwise]
        bars = Bars(names, [_number(pairwise[k]) for k in names], "mean over member pairs")
        return Diversity(str(stored.get("evaluated_on") or ""), bars, _matrix(stored))
    ambiguity = metrics.get("ambiguity")
    if isinstance(ambiguity, Mapping) and "ambiguity" in ambiguity:
        names = [k for k in _AMBIGUITY if k in ambiguity]
        bars = Bars(names, [_number(ambiguity[k]) for k in names], "mean squared error")
        return Diversity(str(ambiguity.get("evaluated_on") or ""), bars, None)
    raise PlotAbsentError(
        _note_about(view, "diversity", "ambiguity")
        or _never(view, "diversity")
        or "no diversity: this version stores no diversity measures of its members"
    )


def _matrix(stored: Mapping[str, Any]) -> Matrix | None:
    """The disagreement matrix (else the first stored one), with its members' names."""
    matrices = stored.get("matrices")
    if not isinstance(matrices, Mapping):
        return None
    square = {k: v for k, v in matrices.items() if _is_square(v)}
    if not square:
        return None
    name = "disagreement" if "disagreement" in square else next(iter(square))
    n = len(square[name])
    shown = min(n, MAX_MATRIX_MEMBERS)
    values = [[_number(v) for v in row[:shown]] for row in square[name][:shown]]
    labels = matrices.get("members") or stored.get("members")
    if not isinstance(labels, Sequence) or len(labels) != n:
        labels = [str(i + 1) for i in range(n)]
    low, high = SCALES.get(name, (0.0, 1.0))
    return Matrix(name, [str(label) for label in labels[:shown]], values, low, high, n)


def _is_square(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(row, list) and len(row) == len(value) for row in value)
    )


def selection_curve(view: VersionView) -> Selection:
    curves = [c for c in curves_of(view) if _is_selection(c)]
    stored = _metrics(view).get("selection")
    weights: Bars | None = None
    if isinstance(stored, Mapping) and isinstance(stored.get("weights"), Mapping):
        ranked = sorted(stored["weights"].items(), key=lambda kv: -float(kv[1]))
        ranked = ranked[:MAX_SELECTION_BARS]
        weights = Bars([k for k, _ in ranked], [float(v) for _, v in ranked], "times selected")
    if curves or weights is not None:
        return Selection(curves, weights)
    kind = KINDS.get(str(view.get("kind")))
    if kind is None or "selection_curve" not in kind.own_plots:
        having = ", ".join(k.name for k in KINDS.values() if "selection_curve" in k.own_plots)
        raise PlotAbsentError(f"only {having} versions have a selection curve")
    raise PlotAbsentError(
        _note_about(view, "selection") or "this version stores no selection curve"
    )
