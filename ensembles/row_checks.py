"""Checking a resolved spec against the labels it will be trained on, before training.

The hold-out split and the cross-validation folds against the rows of each class, and
the rows each nested fit sees against what needs a number of them (``n_neighbors`` of
knn, ``max_samples`` drawn without replacement, stacking's ``cv``).  It refuses only
what would certainly fail; the rest is scikit-learn's to refuse at fit time, which
training reports as a problem too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.utils.validation import has_fit_parameter

from ensembles.builders import build_estimator
from ensembles.built_checks import built_members
from ensembles.catalog import KINDS
from ensembles.errors import Location, Problem, TrainingError
from ensembles.specs import EstimatorSpec, EvaluationSpec
from ensembles.splits import cv_problems, encode_classes, split_rows
from ensembles.tasks import Task


@dataclass(frozen=True)
class _Rows:
    """The rows one fit of an estimator sees, at most, and how they came about."""

    n: int
    counts: dict[Any, int] | None  # rows per class, at most (classification, when known)
    why: str
    weighted: bool = False  # rows reach it with weights (whose sum is not a row count)


def check_against_rows(
    spec: EstimatorSpec | None,
    evaluation: EvaluationSpec,
    y: NDArray[Any],
    task: Task,
    random_state: int,
) -> list[Problem]:
    """What training ``spec`` on labels ``y`` would certainly run into, before training.

    The hold-out split is the one training makes (same labels, same seed); ``spec`` must
    come from :func:`resolve_ensemble` (None: check the evaluation only).
    """
    n = len(y)
    fraction = evaluation.holdout_fraction
    problems: list[Problem] = []
    counts: dict[Any, int] | None = None
    try:
        split = split_rows(y, task, fraction, random_state)
    except TrainingError as exc:
        problems += exc.problems
        n_train = n - math.ceil(fraction * n) if fraction > 0 else n
    else:
        y_train = np.asarray(y)[split.train]
        n_train = len(y_train)
        problems += cv_problems(y_train, task, evaluation.cv_folds)
        counts = _class_counts(y_train) if task == "classification" else None
    if spec is None or n_train < 1:
        return problems
    held = f"the {n_train} training rows"
    if n_train < n:
        held += f" left after holding out {n - n_train} of {n}"
    fits = [_Rows(n_train, counts, held)]
    k = evaluation.cv_folds
    if k and n_train >= k:
        fold = n_train - n_train // k
        fold_counts = None if counts is None else {c: m - m // k for c, m in counts.items()}
        why = f"cross-validation (cv_folds={k}) trains each fold on at most {fold} of {held}"
        fits.append(_Rows(fold, fold_counts, why))
    built = build_estimator(spec, task, random_state=0)
    seen = {p.loc for p in problems}
    for rows in fits:
        for problem in _rows_problems(spec, built, task, ("ensemble",), rows):
            if problem.loc not in seen:
                seen.add(problem.loc)
                problems.append(problem)
    return problems


def _class_counts(y: NDArray[Any]) -> dict[Any, int]:
    labels, _, counts = encode_classes(y)
    return dict(zip(labels, counts, strict=True))


def _rows_problems(
    spec: EstimatorSpec, built: BaseEstimator, task: Task, loc: Location, rows: _Rows
) -> list[Problem]:
    kind = KINDS[spec.kind]
    members = built_members(spec, built)
    if kind.member_rows == "bites":
        return _bites(spec, task, loc, rows, members)
    if kind.rows_param is not None:
        return _rows_param(spec, kind.rows_param, loc, rows)
    if kind.member_rows == "drawn":
        return _drawn(spec, built, task, loc, rows, members)
    out: list[Problem] = []
    inner_rows = rows
    if kind.member_rows == "folds":
        out += _folds(spec, task, loc, rows)
        cv = int(spec.params["cv"])
        inner = rows.n - rows.n // cv
        inner_rows = _Rows(
            inner,
            None if rows.counts is None else {c: m - m // cv for c, m in rows.counts.items()},
            f"{rows.why}; {spec.kind}'s cv={cv} fits each member on at most {inner} of them",
            rows.weighted,
        )
    for slot_loc, member_spec, member in members:
        # AdaBoost's members see every row, reweighted; voting's and stacking's final
        # estimator see the rows the ensemble sees; stacking's members, its folds.
        member_rows = rows
        if kind.member_rows == "weighted":
            member_rows = replace(rows, weighted=True)
        elif kind.member_rows == "folds" and slot_loc[0] == "estimators":
            member_rows = inner_rows
        out += _rows_problems(member_spec, member, task, (*loc, *slot_loc), member_rows)
    return out


def _rows_param(spec: EstimatorSpec, name: str, loc: Location, rows: _Rows) -> list[Problem]:
    k = spec.params.get(name)
    if not isinstance(k, int) or k <= rows.n:
        return []
    return [
        Problem(
            (*loc, "params", name),
            f"{name}={k}, but this {spec.kind} is fitted on at most {rows.n} rows ({rows.why}): "
            f"set {name} to at most {rows.n}",
        )
    ]


def _bites(
    spec: EstimatorSpec,
    task: Task,
    loc: Location,
    rows: _Rows,
    members: list[tuple[Location, EstimatorSpec, BaseEstimator]],
) -> list[Problem]:
    """pasting_votes fits each member on a bite of ``bite_size`` rows, and needs rows
    outside every bite for its out-of-bag error: fewer rows than it is fitted on."""
    kind = KINDS[spec.kind]
    assert kind.rows_param is not None
    name = kind.rows_param
    bite = int(spec.params[name])
    if bite >= rows.n:
        most = rows.n - 1
        advice = f"set {name} to at most {most}" if most >= 1 else "train it on more rows"
        return [
            Problem(
                (*loc, "params", name),
                f"{name}={bite}, but this {spec.kind} is fitted on at most {rows.n} rows "
                f"({rows.why}); every bite must leave rows out of bag: {advice}",
            )
        ]
    ((slot_loc, member_spec, member),) = members
    why = f"{rows.why}; {spec.kind} fits each member on a bite of {bite} of them"
    return _rows_problems(member_spec, member, task, (*loc, *slot_loc), _Rows(bite, None, why))


def _drawn(
    spec: EstimatorSpec,
    built: BaseEstimator,
    task: Task,
    loc: Location,
    rows: _Rows,
    members: list[tuple[Location, EstimatorSpec, BaseEstimator]],
) -> list[Problem]:
    """The bagging family draws max_samples rows per member, or reweights every row for
    members that take weights."""
    ((slot_loc, member_spec, member),) = members
    max_samples = built.max_samples
    if isinstance(max_samples, int) and not built.bootstrap and max_samples > rows.n:
        return [
            Problem(
                (*loc, "params", "max_samples"),
                f"max_samples={max_samples}, but {spec.kind} draws rows without replacement "
                f"from at most {rows.n} ({rows.why}): set max_samples to at most {rows.n}, "
                "or to a fraction",
            )
        ]
    if has_fit_parameter(member, "sample_weight"):
        member_rows = replace(rows, weighted=True)
    elif isinstance(max_samples, float) and rows.weighted:
        return []  # drawn from the sum of the weights it is given: no row count to compare
    else:
        if max_samples is None:
            count = rows.n
        elif isinstance(max_samples, int):
            count = max_samples
        else:
            count = max(int(max_samples * rows.n), 1)
        why = f"{rows.why}; {spec.kind} draws {count} of them per member"
        member_rows = _Rows(count, None, why)
    return _rows_problems(member_spec, member, task, (*loc, *slot_loc), member_rows)


def _folds(spec: EstimatorSpec, task: Task, loc: Location, rows: _Rows) -> list[Problem]:
    """Out-of-fold predictions (stacking, ensemble selection): ``cv`` folds of the rows it
    is fitted on, stratified for classification (scikit-learn refuses when every class is
    smaller)."""
    cv = int(spec.params["cv"])
    where = (*loc, "params", "cv")
    if rows.n < cv:
        return [
            Problem(
                where,
                f"cv={cv}, but this {spec.kind} is fitted on at most {rows.n} rows ({rows.why}); "
                f"its out-of-fold predictions need at least cv rows: {_at_most(rows.n)}",
            )
        ]
    if task == "classification" and rows.counts:
        most = max(rows.counts.values())
        if most < cv:
            return [
                Problem(
                    where,
                    f"cv={cv}, but every class has fewer than {cv} rows where this {spec.kind} is "
                    f"fitted (the largest has at most {most}; {rows.why}); its stratified "
                    f"folds need more: {_at_most(most)}",
                )
            ]
    return []


def _at_most(n: int) -> str:
    return f"set cv to at most {n}" if n >= 2 else "train it on more rows"
