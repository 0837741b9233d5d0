"""Fitting a resolved spec on a table, with progress, cancellation and honest metrics.

Synchronous and pure: the caller (a worker process in the service) passes a progress
callback and a cancel token.  Forests and the bagging family grow in warm-start chunks and
gradient boosting reports each stage through its ``monitor`` hook; both give the very
model a one-shot fit gives (scikit-learn draws the same seeds either way), which the
tests check.

Fitting uses every core where the estimator allows it and it pays: estimators built with
``n_jobs`` unset run their members (trees, bagged estimators, voting and stacking members,
CV folds of stacking) on every core through joblib's threading backend, which changes no
result (members' seeds are drawn before they are dispatched).  Only from
``PARALLEL_MIN_CELLS`` preprocessed cells on: joblib's threads report back every 10 ms,
so on small tables (breast_cancer: 569 x 30) a chunk of trees fits faster in one thread
than the hand-offs take (measured: 100 trees in 10 chunks, 0.38 s threaded against 0.16 s),
while 20,000 x 20 fits twice as fast on 2 cores.  BLAS stays single-threaded throughout,
so the two levels do not fight over the cores (and on small tables BLAS threads cost more
than they give: logistic regression fits 2-3x faster).  The stored model keeps ``n_jobs``
unset, so its predictions run in one thread, in order, bit for bit repeatable.

Once fitted and measured, the model is compiled for serving where it can be
(:func:`ensembles.compiled.compile_model`: tree ensembles, and voting, stacking and bagging
ensembles with tree members): the verdict, engine or the reason for scikit-learn, and for
those composites each member's engine, is returned in ``FittedModel.inference`` for the
version's metadata.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import joblib
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
)
from sklearn.model_selection import KFold, StratifiedKFold, train_test_split
from sklearn.pipeline import Pipeline
from threadpoolctl import threadpool_limits

from ensembles import metrics
from ensembles.builders import FeatureColumn, build_pipeline, known_categories, output_columns
from ensembles.catalog import KINDS, Task
from ensembles.compiled import SKLEARN, compile_model
from ensembles.data import TrainingData
from ensembles.errors import TrainingCancelledError, TrainingError
from ensembles.members import has_members, members_of
from ensembles.signature import ModelSignature, Voting
from ensembles.specs import EstimatorSpec, EvaluationSpec

ProgressCallback = Callable[[int, int, str], None]
CHUNKS = 10
PARALLEL_MIN_CELLS = 50_000  # preprocessed rows x columns from which members fit in parallel


class CancelToken(Protocol):
    """Anything with ``is_set()``: threading.Event, multiprocessing.Event."""

    def is_set(self) -> bool: ...


@dataclass
class FittedModel:
    """A trained pipeline and everything the registry stores beside it."""

    pipeline: Pipeline
    signature: ModelSignature
    spec: EstimatorSpec
    metrics: dict[str, Any]
    feature_importances: dict[str, float] | None
    training: dict[str, Any] = field(default_factory=dict)
    # How the version is served: the compiled engine's fidelity verdict (engine, or the
    # reason scikit-learn serves it); None when not checked (``compile_inference=False``).
    inference: dict[str, Any] | None = None


@dataclass
class _Run:
    on_progress: ProgressCallback | None
    cancel: CancelToken | None

    def report(self, done: int, total: int, stage: str) -> None:
        if self.on_progress is not None:
            self.on_progress(done, total, stage)

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise TrainingCancelledError("training was cancelled")


def train(
    data: TrainingData,
    spec: EstimatorSpec,
    evaluation: EvaluationSpec,
    random_state: int,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    compile_inference: bool = True,
) -> FittedModel:
    """Split, fit, measure, compile.  ``spec`` must come from ``validation.resolve_ensemble``.

    ``compile_inference=False`` skips the compiled engine's fidelity check (``inference`` None).
    """
    run = _Run(on_progress, cancel)
    started = time.perf_counter()
    task: Task = data.task
    notes: list[str] = []
    features = [FeatureColumn(f.name, f.dtype, f.n_missing > 0, f.n_unique) for f in data.features]
    X_train, X_hold, y_train, y_hold = _split(
        data, evaluation.holdout_fraction, random_state, notes
    )
    run.check()
    pipeline = build_pipeline(spec, task, features, random_state)
    Xt = _fit_pipeline(pipeline, X_train, y_train, run)
    ensemble = pipeline[-1]
    classes = list(pipeline.classes_) if task == "classification" else []
    run.report(0, 1, "evaluating")
    result: dict[str, Any] = {"oob": None, "holdout": None, "cv": None}
    result["train"] = _evaluate(pipeline, X_train, y_train, task, classes)
    if X_hold is not None and y_hold is not None:
        result["holdout"] = _evaluate(pipeline, X_hold, y_hold, task, classes)
    else:
        notes.append("no hold-out set (holdout_fraction = 0)")
    oob, reason, oob_curve = metrics.oob_scores(ensemble, Xt, y_train, task, classes)
    result["oob"] = oob
    if reason:
        notes.append(f"no OOB estimate: {reason}")
    basis, Xb, yb = (
        ("holdout", X_hold, y_hold) if X_hold is not None else ("train", X_train, y_train)
    )
    assert Xb is not None and yb is not None
    Xbt = np.asarray(pipeline[:-1].transform(Xb))
    result["estimators"], member_note = metrics.member_scores(
        ensemble, Xbt, yb, task, classes, basis
    )
    if member_note:
        notes.append(member_note)
    result["curve"] = _curve(ensemble, oob_curve, Xbt, yb, task, basis, notes)
    run.check()
    if evaluation.cv_folds:
        result["cv"] = _cross_validate(
            data, spec, features, X_train, y_train, evaluation, random_state, run
        )
    else:
        notes.append("no cross-validation (cv_folds = 0)")
    result["notes"] = notes
    inference = (
        _inference(pipeline, task, X_train, random_state, run) if compile_inference else None
    )
    run.report(1, 1, "done")
    signature = ModelSignature(
        task,
        spec.kind,
        tuple(features),
        _classes(classes),
        _voting(ensemble, spec, task),
        known_categories(pipeline[0]),
    )
    return FittedModel(
        pipeline=pipeline,
        signature=signature,
        spec=spec,
        metrics=result,
        feature_importances=feature_importances(pipeline),
        training={
            "duration_s": round(time.perf_counter() - started, 3),
            "n_estimators": fitted_estimator_count(ensemble),
            "n_train": len(y_train),
            "n_holdout": 0 if y_hold is None else len(y_hold),
            "random_state": random_state,
            "task_inferred": data.task_inferred,
        },
        inference=inference,
    )


def _inference(
    pipeline: Pipeline, task: Task, X: pd.DataFrame, random_state: int, run: _Run
) -> dict[str, Any]:
    """The compiled engine's verdict on this model, as the version's metadata keeps it."""
    run.check()
    run.report(0, 1, "compiling")
    _, report = compile_model(pipeline, task, X, random_state)
    return {**report.as_dict(), "engine": report.engine or SKLEARN}


@contextmanager
def every_core(n_cells: int) -> Iterator[None]:
    """Members on every core (joblib threads) for tables of at least PARALLEL_MIN_CELLS
    cells, BLAS single-threaded inside them."""
    with threadpool_limits(limits=1, user_api="blas"):
        if n_cells < PARALLEL_MIN_CELLS:
            yield
            return
        with joblib.parallel_config(backend="threading", n_jobs=-1):
            yield


def _split(
    data: TrainingData, fraction: float, random_state: int, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame | None, NDArray[Any], NDArray[Any] | None]:
    if fraction <= 0:
        return data.X, None, data.y, None
    stratify = data.y if data.task == "classification" else None
    try:
        X_tr, X_ho, y_tr, y_ho = train_test_split(
            data.X, data.y, test_size=fraction, random_state=random_state, stratify=stratify
        )
    except ValueError as exc:
        if stratify is None:
            raise TrainingError(
                f"cannot hold out {fraction:.0%} of {len(data.y)} rows: {exc}"
            ) from None
        notes.append(f"hold-out split is not stratified: {exc}")
        X_tr, X_ho, y_tr, y_ho = train_test_split(
            data.X, data.y, test_size=fraction, random_state=random_state
        )
    return X_tr, X_ho, np.asarray(y_tr), np.asarray(y_ho)


def _fit_pipeline(pipeline: Pipeline, X: pd.DataFrame, y: NDArray[Any], run: _Run) -> NDArray[Any]:
    """Fit preprocessing, then the ensemble with progress; returns the preprocessed rows."""
    run.report(0, 1, "preprocessing")
    try:
        Xt = np.asarray(pipeline[:-1].fit_transform(X, y))
        with every_core(Xt.size):
            _fit_ensemble(pipeline[-1], Xt, y, run)
    except (TrainingCancelledError, MemoryError):
        raise
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise TrainingError(f"scikit-learn could not fit this model: {exc}") from exc
    return Xt


def _fit_ensemble(ensemble: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], run: _Run) -> None:
    params = ensemble.get_params(deep=False)
    total = int(params.get("n_estimators") or 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if isinstance(ensemble, GradientBoostingClassifier | GradientBoostingRegressor):
            _fit_boosting(ensemble, Xt, y, total, run)
        elif has_members(ensemble) and "warm_start" in params:
            _fit_in_chunks(ensemble, Xt, y, total, run)
        else:
            run.report(0, 1, "fitting")
            ensemble.fit(Xt, y)
            run.report(1, 1, "fitting")


def _fit_in_chunks(
    ensemble: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], total: int, run: _Run
) -> None:
    """Grow a forest or bagging ensemble chunk by chunk (same seeds as one fit)."""
    is_bagging = isinstance(ensemble, BaggingClassifier | BaggingRegressor)
    forest_oob = not is_bagging and bool(ensemble.get_params().get("bootstrap"))
    step = max(1, math.ceil(total / CHUNKS))
    seeds: list[NDArray[Any]] = []
    for size in [*range(step, total, step), total]:
        run.check()
        last = size == total
        # Bagging refuses oob_score with warm_start: its OOB is computed in metrics.
        ensemble.set_params(warm_start=True, n_estimators=size, oob_score=forest_oob and last)
        ensemble.fit(Xt, y)
        if is_bagging:
            seeds.append(ensemble._seeds)
        run.report(size, total, "fitting")
    if is_bagging:
        # A warm-started bagging keeps only the last chunk's member seeds, from which it
        # derives ``estimators_samples_``; the chunks drew consecutive values of one
        # stream, so their concatenation is exactly the one-shot fit's seed array.
        ensemble._seeds = np.concatenate(seeds)
    ensemble.set_params(warm_start=False)


def _fit_boosting(
    ensemble: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], total: int, run: _Run
) -> None:
    def monitor(i: int, _est: object, _locals: object) -> bool:
        run.report(i + 1, total, "fitting")
        return run.cancel is not None and run.cancel.is_set()

    ensemble.fit(Xt, y, monitor=monitor)
    run.check()


def _evaluate(
    pipeline: Pipeline, X: pd.DataFrame, y: NDArray[Any], task: Task, classes: list[Any]
) -> metrics.Scores:
    pred = pipeline.predict(X)
    proba = (
        pipeline.predict_proba(X)
        if task == "classification" and hasattr(pipeline, "predict_proba")
        else None
    )
    return metrics.score(task, y, np.asarray(pred), proba, classes)


def _curve(
    ensemble: BaseEstimator,
    oob_curve: list[dict[str, Any]],
    Xbt: NDArray[Any],
    yb: NDArray[Any],
    task: Task,
    basis: str,
    notes: list[str],
) -> dict[str, Any] | None:
    """OOB curve for the bagging family and forests, staged scores for boosting."""
    metric = metrics.primary_metric(task)
    if oob_curve:
        return {"basis": "oob", "metric": metric, "points": oob_curve}
    points = metrics.staged_curve(ensemble, Xbt, yb, task)
    if points:
        return {"basis": basis, "metric": metric, "points": points}
    notes.append("no score curve: the ensemble neither leaves rows out of bag nor boosts in stages")
    return None


def _cross_validate(
    data: TrainingData,
    spec: EstimatorSpec,
    features: list[FeatureColumn],
    X: pd.DataFrame,
    y: NDArray[Any],
    evaluation: EvaluationSpec,
    random_state: int,
    run: _Run,
) -> dict[str, Any]:
    k = evaluation.cv_folds
    splitter: StratifiedKFold | KFold = (
        StratifiedKFold(k, shuffle=True, random_state=random_state)
        if data.task == "classification"
        else KFold(k, shuffle=True, random_state=random_state)
    )
    folds = []
    try:
        splits = list(splitter.split(X, y))
    except ValueError as exc:
        raise TrainingError(f"cannot make {k} cross-validation folds: {exc}") from None
    for i, (tr, va) in enumerate(splits):
        run.check()
        run.report(i, k, "cross_validating")
        fold = build_pipeline(spec, data.task, features, random_state)
        with warnings.catch_warnings(), every_core(X.size):
            warnings.simplefilter("ignore", UserWarning)
            fold.fit(X.iloc[tr], y[tr])
        classes = list(fold.classes_) if data.task == "classification" else []
        scores = _evaluate(fold, X.iloc[va], y[va], data.task, classes)
        scores.pop("confusion_matrix", None)
        folds.append(scores)
    run.report(k, k, "cross_validating")
    return metrics.mean_scores(folds)


def feature_importances(pipeline: Pipeline) -> dict[str, float] | None:
    """Importances summed back onto the user's columns, where the estimator has them."""
    ensemble = pipeline[-1]
    raw = _raw_importances(ensemble)
    if raw is None:
        return None
    columns = output_columns(pipeline[0])
    if len(columns) != len(raw):
        return None
    out: dict[str, float] = {}
    for column, value in zip(columns, raw, strict=True):
        out[column] = out.get(column, 0.0) + float(value)
    total = sum(out.values())
    if total > 0:
        out = {k: v / total for k, v in out.items()}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _raw_importances(ensemble: BaseEstimator) -> NDArray[np.float64] | None:
    try:
        values = getattr(ensemble, "feature_importances_", None)
    except (AttributeError, ValueError):
        values = None
    if values is not None:
        return np.asarray(values, dtype=np.float64)
    if isinstance(ensemble, BaggingClassifier | BaggingRegressor):
        n = ensemble.n_features_in_
        total = np.zeros(n)
        for member in members_of(ensemble):
            member_values = getattr(member.estimator, "feature_importances_", None)
            if member_values is None:
                return None
            assert member.features is not None
            np.add.at(total, member.features, member_values)
        return total / max(len(ensemble.estimators_), 1)
    return None


def fitted_estimator_count(ensemble: BaseEstimator) -> int:
    for attr in ("n_estimators_", "n_iter_"):
        value = getattr(ensemble, attr, None)
        if isinstance(value, int | np.integer):
            return int(value)
    estimators = getattr(ensemble, "estimators_", None)
    return len(estimators) if estimators is not None else 1


def _classes(classes: list[Any]) -> tuple[Any, ...] | None:
    return tuple(c.item() if hasattr(c, "item") else c for c in classes) or None


def _voting(ensemble: BaseEstimator, spec: EstimatorSpec, task: Task) -> Voting | None:
    """How the fitted model combines its members by default (None: not a voting kind)."""
    if task != "classification" or not KINDS[spec.kind].votes:
        return None
    if spec.kind == "voting":
        return "soft" if spec.params.get("voting") == "soft" else "hard"
    members = members_of(ensemble)
    return "soft" if members and hasattr(members[0].estimator, "predict_proba") else "hard"
