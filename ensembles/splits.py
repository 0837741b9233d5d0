"""The rows training fits and measures on: the hold-out split, the cross-validation folds
and the label encoding they both stratify on.

Pure functions of the labels, the fraction and the seed, so the submit-time checks
(:mod:`ensembles.row_checks`) and training (:mod:`ensembles.training`) make the very same
split: what is refused at submit is exactly what training would run into.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split

from ensembles.catalog import Task
from ensembles.errors import Location, Problem, TrainingError
from ensembles.specs import EvaluationSpec

HOLDOUT: Location = ("evaluation", "holdout_fraction")
CV_FOLDS: Location = ("evaluation", "cv_folds")


@dataclass(frozen=True)
class RowSplit:
    """Row positions of the training and hold-out parts (None: nothing held out)."""

    train: NDArray[np.intp]
    holdout: NDArray[np.intp] | None
    note: str | None = None


def split_rows(y: NDArray[Any], task: Task, fraction: float, random_state: int) -> RowSplit:
    """The hold-out split training makes, as row positions; TrainingError when no usable one.

    The very split of ``train_test_split`` on the table (it draws from the number of rows,
    the labels and the seed only), so the service checks it at submit time and the worker
    makes the same. Classification needs every class in the training part, so a class of
    one row, or fewer training rows than classes, is refused; stratification that fails
    only for want of hold-out rows falls back to a plain split, with a note.
    """
    n = len(y)
    everything = np.arange(n)
    if fraction <= 0:
        return RowSplit(everything, None)
    n_train = n - math.ceil(fraction * n)  # scikit-learn's own rounding
    problems: list[Problem] = []
    labels: list[Any] = []
    codes: NDArray[np.intp] | None = None
    counts: list[int] = []
    if task == "classification":
        labels, codes, counts = encode_classes(y)
        for label, count in zip(labels, counts, strict=True):
            if count < 2:
                problems.append(
                    Problem(
                        ("target",),
                        f"class {label!r} has 1 row; the stratified hold-out split needs at "
                        "least 2 rows of every class (one to train on, one to hold out): "
                        "add rows of it, remove it from the table, or set "
                        "evaluation.holdout_fraction to 0",
                    )
                )
    needed = max(len(labels), 1)
    if n_train < needed:
        what = f"{n_train} training row{'s' if n_train != 1 else ''}"
        if labels:
            what += f" for {len(labels)} classes (each needs one)"
        problems.append(
            Problem(
                HOLDOUT,
                f"holding out {fraction:g} of {n} rows leaves {what}: {_lower_holdout(n, needed)}",
            )
        )
    if problems:
        raise TrainingError(f"cannot hold out {fraction:g} of {n} rows", problems)
    note = None
    try:
        # Stratified on the class codes: the same split as on the labels (same order),
        # four times faster on a million string labels.
        train, hold = train_test_split(
            everything, test_size=fraction, random_state=random_state, stratify=codes
        )
    except ValueError as exc:  # stratified, too few hold-out rows for the classes
        note = f"hold-out split is not stratified: {exc}"
        train, hold = train_test_split(everything, test_size=fraction, random_state=random_state)
    if codes is not None:
        trained = np.bincount(codes[train], minlength=len(labels))
        missing = [
            Problem(
                HOLDOUT,
                f"the hold-out split leaves class {label!r} ({count} rows) without a training "
                "row: lower evaluation.holdout_fraction, or add rows of it",
            )
            for label, count, kept in zip(labels, counts, trained.tolist(), strict=True)
            if not kept
        ]
        if missing:
            raise TrainingError(f"cannot hold out {fraction:g} of {n} rows", missing)
    return RowSplit(np.asarray(train), np.asarray(hold), note)


def encode_classes(y: NDArray[Any]) -> tuple[list[Any], NDArray[np.intp], list[int]]:
    """The sorted classes (plain Python values), each row's class index and the rows per
    class: ``np.unique``'s answer, by hashing rather than sorting a million labels."""
    codes, found = pd.factorize(np.asarray(y), sort=True)
    counts = np.bincount(codes, minlength=len(found))
    labels = [v.item() if isinstance(v, np.generic) else v for v in found]
    return labels, codes.astype(np.intp), counts.tolist()


def _lower_holdout(n: int, needed: int) -> str:
    """Advice: the largest hold-out fraction (two decimals) that leaves ``needed`` rows."""
    fraction = math.floor((n - needed) * 100 / n) / 100
    while fraction > 0 and n - math.ceil(fraction * n) < needed:
        fraction = round(fraction - 0.01, 2)
    if fraction <= 0:
        return "set evaluation.holdout_fraction to 0, or add rows"
    return f"set evaluation.holdout_fraction to at most {fraction:g}, or add rows"


def cv_problems(y: NDArray[Any], task: Task, k: int) -> list[Problem]:
    """Why ``k``-fold cross-validation of these training rows would fail (none: it works).

    Classification folds are stratified: scikit-learn refuses only when every class has
    fewer than ``k`` rows, but a class of one training row also fails (the fold that
    scores it trains without it), so both are refused here.
    """
    if not k:
        return []
    n = len(y)
    if n < k:
        return [
            Problem(
                CV_FOLDS,
                f"cv_folds={k} needs at least {k} training rows; there are {n}: lower "
                "cv_folds (or set it to 0), lower evaluation.holdout_fraction, or add rows",
            )
        ]
    if task != "classification":
        return []
    labels, _, counts = encode_classes(y)
    problems = [
        Problem(
            CV_FOLDS,
            f"class {label!r} has 1 training row; cross-validation needs at least 2 rows of "
            "every class (each fold trains on the rows of the others): set cv_folds to 0, "
            "lower evaluation.holdout_fraction, or add rows of it",
        )
        for label, count in zip(labels, counts, strict=True)
        if count < 2
    ]
    most = max(counts)
    if not problems and most < k:
        problems.append(
            Problem(
                CV_FOLDS,
                f"every class has fewer than cv_folds={k} training rows (the largest has "
                f"{most}); stratified folds need more: set cv_folds to at most {most}",
            )
        )
    return problems


def cv_splitter(
    task: Task, evaluation: EvaluationSpec, random_state: int
) -> StratifiedKFold | KFold:
    """The folds of ``evaluation.cv_folds`` (shuffled with the request's seed)."""
    k = evaluation.cv_folds
    if task == "classification":
        return StratifiedKFold(k, shuffle=True, random_state=random_state)
    return KFold(k, shuffle=True, random_state=random_state)
