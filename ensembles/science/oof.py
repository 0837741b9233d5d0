"""Out-of-fold scores: each member's and the ensemble's, from predictions on rows they
did not train on, so the gain of stacking or voting shows without a hold-out.

Stacking: scikit-learn fits its final estimator on its members' out-of-fold predictions
but keeps none of them, so they are made again here exactly as ``StackingClassifier.fit``
makes them (``cross_val_predict`` of a clone of each member, on the preprocessed training
rows, with ``check_cv(cv)`` — unshuffled (stratified) k-fold — and the member's
``stack_method_``); this doubles the cost of stacking's own cross-validation. The stacked
ensemble's out-of-fold prediction is then ``cross_val_predict`` of its final estimator on
those meta-features, over the same folds.

Voting with ``evaluation.cv_folds``: training's cross-validation already fits the whole
pipeline on each fold; :class:`FoldCollector` keeps, for each held-out fold, the
ensemble's and every member's predictions, at no extra fitting cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.model_selection import check_cv, cross_val_predict
from sklearn.pipeline import Pipeline

from ensembles import metrics
from ensembles.members import (
    Member,
    member_class_indices,
    member_probabilities,
    member_values,
    predicted_labels,
)
from ensembles.tasks import Task

Splits = list[tuple[NDArray[np.intp], NDArray[np.intp]]]


@dataclass
class OutOfFold:
    """Out-of-fold predictions of the ensemble and of each member, on the training rows."""

    task: Task
    classes: list[Any]
    folds: dict[str, Any]
    ensemble: NDArray[Any]  # labels or values
    ensemble_proba: NDArray[np.float64] | None
    members: dict[str, NDArray[Any]]  # class indices or values
    member_proba: dict[str, NDArray[np.float64] | None] = field(default_factory=dict)

    def report(self, y: NDArray[Any]) -> dict[str, Any]:
        """The ``metrics.oof`` block."""
        labels = np.asarray(self.classes, dtype=object)

        def scored(pred: NDArray[Any], proba: NDArray[np.float64] | None) -> metrics.Scores:
            out = metrics.score(self.task, y, pred, proba, self.classes or None)
            out.pop("confusion_matrix", None)
            return out

        members = {}
        for name, pred in self.members.items():
            shown = _like(y, labels[pred]) if self.task == "classification" else pred
            members[name] = scored(shown, self.member_proba.get(name))
        return {
            "folds": self.folds,
            "ensemble": scored(self.ensemble, self.ensemble_proba),
            "members": members,
        }


def _like(y: NDArray[Any], pred: NDArray[Any]) -> NDArray[Any]:
    return pred.astype(y.dtype) if y.dtype != object else pred


def describe_folds(cv: Any, splits: Splits) -> dict[str, Any]:
    return {
        "n_folds": len(splits),
        "splitter": type(cv).__name__,
        "shuffle": bool(getattr(cv, "shuffle", False)),
        "random_state": getattr(cv, "random_state", None)
        if getattr(cv, "shuffle", False)
        else None,
        "test_sizes": [len(test) for _, test in splits],
    }


def _labels_from(output: NDArray[Any], method: str) -> NDArray[np.int64]:
    """Class indices from a member's stack output (members are fitted on encoded labels)."""
    if method == "predict":
        return np.asarray(output, dtype=np.int64)
    if output.ndim == 1:  # binary decision_function
        return np.asarray(output > 0, dtype=np.int64)
    return np.asarray(np.argmax(output, axis=1), dtype=np.int64)


def meta_features(
    stacking: BaseEstimator, outputs: list[NDArray[Any]], Xt: NDArray[Any]
) -> NDArray[Any]:
    """The final estimator's input, as ``StackingClassifier`` builds it: 1-D outputs as
    columns, the first probability column dropped for two classes, ``passthrough`` columns
    last."""
    blocks = []
    n_classes = len(getattr(stacking, "classes_", []))
    for method, out in zip(stacking.stack_method_, outputs, strict=True):
        if out.ndim == 1:
            blocks.append(out.reshape(-1, 1))
        elif method == "predict_proba" and n_classes == 2:
            blocks.append(out[:, 1:])
        else:
            blocks.append(out)
    if stacking.passthrough:
        blocks.append(Xt)
    return np.hstack(blocks)


def stacking_oof(
    stacking: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], task: Task
) -> OutOfFold:
    """Redo a fitted stacking's cross-validation on its training rows (see the module)."""
    classifier = is_classifier(stacking)
    classes = list(stacking.classes_) if classifier else []
    target = pd.Index(classes).get_indexer(y) if classifier else np.asarray(y, dtype=np.float64)
    cv = check_cv(stacking.cv, y=target, classifier=classifier)
    splits: Splits = list(cv.split(Xt, target))
    outputs: list[NDArray[Any]] = []
    members: dict[str, NDArray[Any]] = {}
    member_proba: dict[str, NDArray[np.float64] | None] = {}
    named = [(n, e) for n, e in stacking.estimators if e != "drop"]
    for (name, est), method in zip(named, stacking.stack_method_, strict=True):
        out = np.asarray(cross_val_predict(clone(est), Xt, target, cv=splits, method=method))
        outputs.append(out)
        if classifier:
            members[name] = _labels_from(out, method)
            member_proba[name] = out if method == "predict_proba" else None
        else:
            members[name] = out.astype(np.float64)
    meta = meta_features(stacking, outputs, Xt)
    final = clone(stacking.final_estimator_)
    pred = np.asarray(cross_val_predict(final, meta, target, cv=splits))
    proba = None
    if classifier and hasattr(final, "predict_proba"):
        proba = np.asarray(
            cross_val_predict(clone(final), meta, target, cv=splits, method="predict_proba")
        )
    ensemble = _like(y, np.asarray(classes, dtype=object)[pred]) if classifier else pred
    return OutOfFold(
        task, classes, describe_folds(cv, splits), ensemble, proba, members, member_proba
    )


class FoldCollector:
    """Collects out-of-fold predictions from the folds of training's cross-validation."""

    def __init__(self, n_rows: int, task: Task, classes: list[Any]) -> None:
        self.task, self.classes, self.n = task, classes, n_rows
        self.ensemble: NDArray[Any] | None = None
        self.proba: NDArray[np.float64] | None = None
        self.members: dict[str, NDArray[Any]] = {}
        self.member_proba: dict[str, NDArray[np.float64] | None] = {}
        self.splits: Splits = []
        self.cv: Any = None

    def add(self, fold: Pipeline, X_va: pd.DataFrame, train: Any, va: NDArray[np.intp]) -> None:
        """The predictions of the pipeline fitted on one fold, for its held-out rows."""
        self.splits.append((np.asarray(train), np.asarray(va)))
        pred = predicted_labels(fold, X_va)
        if self.ensemble is None:
            kept = pred.dtype if pred.dtype.kind in "biuf" else object
            self.ensemble = np.empty(self.n, dtype=kept)
        self.ensemble[va] = pred
        k = len(self.classes)
        if self.task == "classification" and hasattr(fold, "predict_proba"):
            if self.proba is None:
                self.proba = np.zeros((self.n, k))
            self.proba[va] = self._global(fold, np.asarray(fold.predict_proba(X_va)))
        Xt = np.asarray(fold[:-1].transform(X_va))
        for name, est in fold[-1].named_estimators_.items():
            if est == "drop":
                continue
            member = Member(name, est, None, None, 1.0)
            if self.task == "regression":
                out: NDArray[Any] = member_values(member, Xt)
                self.members.setdefault(name, np.zeros(self.n))[va] = out
                continue
            local = member_class_indices(member, Xt)
            to_global = pd.Index(self.classes).get_indexer(np.asarray(fold.classes_))
            self.members.setdefault(name, np.zeros(self.n, dtype=np.int64))[va] = to_global[local]
            if hasattr(est, "predict_proba"):
                fold_k = len(fold.classes_)
                p = self._global(fold, member_probabilities(member, Xt, fold_k))
                self.member_proba.setdefault(name, np.zeros((self.n, k)))
                target = self.member_proba[name]
                assert target is not None
                target[va] = p
            else:
                self.member_proba[name] = None

    def _global(self, fold: Pipeline, proba: NDArray[np.float64]) -> NDArray[np.float64]:
        """Probability columns in the model's class order (a fold may lack a class)."""
        columns = pd.Index(self.classes).get_indexer(np.asarray(fold.classes_))
        full = np.zeros((proba.shape[0], len(self.classes)))
        full[:, columns] = proba
        return full

    def result(self, cv: Any) -> OutOfFold | None:
        if self.ensemble is None:
            return None
        return OutOfFold(
            self.task,
            self.classes,
            describe_folds(cv, self.splits),
            self.ensemble,
            self.proba,
            self.members,
            self.member_proba,
        )
