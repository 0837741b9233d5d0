"""Fitting a resolved spec on a table, with progress, cancellation and honest metrics.

Synchronous and pure: the caller (a worker process in the service, or a task on a Dask
cluster) passes a progress callback, a cancel token and the :class:`MemberPool` where
members are fitted.  Forests and the bagging family are fitted in ONE call, their members
in parallel (:mod:`ensembles.parallel`: threads here, or the workers of a Dask cluster),
progress counted as members finish and a cancel aborting the fit at once; gradient
boosting reports each stage through its ``monitor`` hook.  Either way the model is the
very one a one-shot fit with scikit-learn gives, whatever the pool (members' seeds are
drawn before they are dispatched), which the tests check.

Voting and stacking members and the CV folds of stacking run in the pool too.  BLAS stays
single-threaded throughout, so the two levels do not fight over the cores (and on small
tables BLAS threads cost more than they give: logistic regression fits 2-3x faster).  The
stored model keeps ``n_jobs`` unset, so its predictions run in one thread, in order, bit
for bit repeatable.

Training does not compile: which engine serves the model is decided afterwards
(:func:`ensembles.inference.inference_verdict`), on the rows training used
(``FittedModel.train_rows``).

What the data or the spec makes impossible is a :class:`TrainingError` with a path into
the request: the hold-out split and the folds (:mod:`ensembles.splits`, which the service
also runs at submit time), and whatever scikit-learn refuses while fitting, scoring or
cross-validating (:mod:`ensembles.fit_errors`). An error raised by this library's own
code stays what it is: a bug.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd
from joblib import parallel_config
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ensembles import metrics
from ensembles.builders import (
    FeatureColumn,
    build_pipeline,
    known_categories,
    output_columns,
)
from ensembles.catalog import KINDS, Kind, kind_of
from ensembles.data import TrainingData
from ensembles.errors import TrainingCancelledError, TrainingError
from ensembles.fit_errors import scikit_learn_errors
from ensembles.kinds import OwnReport, adopt
from ensembles.members import members_of
from ensembles.parallel import MemberPool, members_in_parallel
from ensembles.reports import Curve, Metrics
from ensembles.science import bias_variance, measures
from ensembles.science.curves import curves_of
from ensembles.science.oof import FoldCollector
from ensembles.signature import ModelSignature, Voting
from ensembles.specs import EstimatorSpec, EvaluationSpec
from ensembles.splits import CV_FOLDS, HOLDOUT, cv_problems, cv_splitter, encode_classes, split_rows
from ensembles.tasks import Task

ProgressCallback = Callable[[int, int, str], None]


class CancelToken(Protocol):
    """Anything with ``is_set()``: threading.Event, multiprocessing.Event."""

    def is_set(self) -> bool: ...


@dataclass
class FittedModel:
    """A trained pipeline and everything the registry stores beside it."""

    pipeline: Pipeline
    signature: ModelSignature
    spec: EstimatorSpec
    metrics: Metrics
    feature_importances: dict[str, float] | None
    # The rows the model was fitted on (the training part of the split): what a compiled
    # engine is checked against before it may serve the model.
    train_rows: pd.DataFrame = field(repr=False)
    training: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Run:
    on_progress: ProgressCallback | None
    cancel: CancelToken | None
    pool: MemberPool

    def report(self, done: int, total: int, stage: str) -> None:
        if self.on_progress is not None:
            self.on_progress(done, total, stage)

    def check(self) -> None:
        if self.cancelled():
            raise TrainingCancelledError("training was cancelled")

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    @contextmanager
    def predicting(self) -> Iterator[None]:
        """Measuring after the fit: scikit-learn's predictions and the members' own on
        threads of this process (the pool's size; never shipped to a cluster), whatever
        the estimators' ``n_jobs``. The member backend keeps a failing member's frames, so
        a refusal at predict time (k above the rows a member saw) is still placed."""
        local = MemberPool.local(self.pool.threads)
        with (
            members_in_parallel(local, cancelled=self.cancelled),
            parallel_config(n_jobs=self.pool.threads),
        ):
            yield

    @contextmanager
    def parallel(self, members: int | None = None, stage: str = "fitting") -> Iterator[None]:
        """Fit inside with members on the pool; ``members``: how many, for progress."""

        def progress(done: int) -> None:
            assert members is not None
            self.report(done, members, stage)

        with members_in_parallel(
            self.pool, members=members, on_progress=progress, cancelled=self.cancelled
        ):
            yield


@dataclass(frozen=True)
class _Rows:
    """The training and hold-out parts of the table (None: nothing held out)."""

    X_train: pd.DataFrame
    y_train: NDArray[Any]
    X_hold: pd.DataFrame | None
    y_hold: NDArray[Any] | None
    positions: NDArray[np.intp]  # each training row's index in the uploaded table


@dataclass(frozen=True)
class _Fit:
    """The fitted pipeline and what measuring it needs."""

    spec: EstimatorSpec
    kind: Kind
    task: Task
    features: list[FeatureColumn]
    pipeline: Pipeline
    Xt: NDArray[Any]  # the training rows, preprocessed
    own: OwnReport | None  # the service's own algorithms: what they measured themselves
    classes: list[Any]

    @property
    def ensemble(self) -> BaseEstimator:
        return self.pipeline[-1]


@dataclass(frozen=True)
class _Scores:
    """What the fitted model scores on its rows, measured right after the fit."""

    on_train: metrics.Scores
    holdout: metrics.Scores | None
    oob: metrics.Scores | None
    members: list[dict[str, Any]]
    curve: dict[str, Any] | None
    extra: dict[str, Any]  # predicted_vs_actual (regression)
    Xbt: NDArray[Any]  # the rows scored (hold-out, else training), preprocessed


def train(
    data: TrainingData,
    spec: EstimatorSpec,
    evaluation: EvaluationSpec,
    random_state: int,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    pool: MemberPool | None = None,
) -> FittedModel:
    """Split, fit, measure.  ``spec`` must come from ``validation.resolve_ensemble``;
    members are fitted on ``pool`` (default: a thread per CPU of this process)."""
    run = _Run(on_progress, cancel, pool or MemberPool.local())
    started = time.perf_counter()
    notes: list[str] = []
    rows = _split(data, evaluation.holdout_fraction, random_state, notes)
    _check_evaluation(evaluation, rows, data.task)
    run.check()
    fit = _fit(data, spec, rows, random_state, run, notes)
    run.report(0, 1, "evaluating")
    with run.predicting():
        scores = _score(fit, rows, random_state, notes)
    run.check()
    cv, collector = _cv_scores(data, fit, rows, evaluation, random_state, run, notes)
    timings: dict[str, Any] = {}
    science = _science(fit, rows, scores, evaluation, collector, random_state, run, notes, timings)
    return FittedModel(
        pipeline=fit.pipeline,
        signature=_signature(fit),
        spec=spec,
        metrics=_metrics(fit, scores, cv, science, notes),
        feature_importances=feature_importances(fit.pipeline, fit.kind),
        train_rows=rows.X_train,
        training={
            "duration_s": round(time.perf_counter() - started, 3),
            "n_estimators": fitted_estimator_count(fit.ensemble),
            "n_train": len(rows.y_train),
            "n_holdout": 0 if rows.y_hold is None else len(rows.y_hold),
            "random_state": random_state,
            "task_inferred": data.task_inferred,
            **timings,
        },
    )


def _cv_scores(
    data: TrainingData,
    fit: _Fit,
    rows: _Rows,
    evaluation: EvaluationSpec,
    random_state: int,
    run: _Run,
    notes: list[str],
) -> tuple[metrics.Scores | None, FoldCollector | None]:
    """The mean scores of the folds, and their out-of-fold predictions where the science
    uses them (named members that all see the same rows)."""
    kind = fit.kind
    collector = (
        FoldCollector(len(rows.y_train), fit.task, fit.classes)
        if evaluation.cv_folds and kind.members == "named" and kind.member_rows == "same"
        else None
    )
    if not evaluation.cv_folds:
        notes.append("no cross-validation (cv_folds = 0)")
        return None, collector
    cv = _cross_validate(
        data,
        fit.spec,
        fit.features,
        rows.X_train,
        rows.y_train,
        evaluation,
        random_state,
        run,
        notes,
        collector,
    )
    return cv, collector


def _check_evaluation(evaluation: EvaluationSpec, rows: _Rows, task: Task) -> None:
    """Before the long fit: an evaluation these rows cannot give fails at once."""
    asked = evaluation.bias_variance
    if asked is not None and rows.X_hold is None:
        raise TrainingError(
            "the bias-variance decomposition needs hold-out rows",
            bias_variance.problems(evaluation, asked.rounds),
        )
    if evaluation.cv_folds:
        cv_rows = cv_problems(rows.y_train, task, evaluation.cv_folds)
        if cv_rows:
            raise TrainingError(
                f"cannot make {evaluation.cv_folds} cross-validation folds", cv_rows
            )


def _fit(
    data: TrainingData,
    spec: EstimatorSpec,
    rows: _Rows,
    random_state: int,
    run: _Run,
    notes: list[str],
) -> _Fit:
    """Build the pipeline and fit it on the training rows."""
    task: Task = data.task
    kind = KINDS[spec.kind]
    features = [FeatureColumn(f.name, f.dtype, f.n_missing > 0, f.n_unique) for f in data.features]
    pipeline = build_pipeline(spec, task, features, random_state)
    with scikit_learn_errors("fit this model", spec, task, ("ensemble",)):
        Xt = _fit_pipeline(pipeline, kind, rows.X_train, rows.y_train, run)
    own = adopt(pipeline)  # the service's own algorithms: their scikit-learn form
    notes += early_stop_notes(pipeline[-1])
    classes = list(pipeline.classes_) if task == "classification" else []
    return _Fit(spec, kind, task, features, pipeline, Xt, own, classes)


def _score(fit: _Fit, rows: _Rows, random_state: int, notes: list[str]) -> _Scores:
    """Scores on the training and hold-out rows, OOB, the members' own and the curve."""
    spec, task, classes, pipeline = fit.spec, fit.task, fit.classes, fit.pipeline
    holdout: metrics.Scores | None = None
    with scikit_learn_errors("score this model on its training rows", spec, task, ("ensemble",)):
        on_train = _evaluate(pipeline, rows.X_train, rows.y_train, task, classes)
    if rows.X_hold is not None and rows.y_hold is not None:
        with scikit_learn_errors("score this model on the hold-out rows", spec, task, HOLDOUT):
            holdout = _evaluate(pipeline, rows.X_hold, rows.y_hold, task, classes)
    else:
        notes.append("no hold-out set (holdout_fraction = 0)")
    basis, Xb, yb = (
        ("holdout", rows.X_hold, rows.y_hold)
        if rows.X_hold is not None
        else ("train", rows.X_train, rows.y_train)
    )
    assert Xb is not None and yb is not None
    kind, ensemble = fit.kind, fit.ensemble
    with scikit_learn_errors("measure this model's members", spec, task, ("ensemble",)):
        oob, oob_curve = _oob(fit, rows.y_train, notes)
        Xbt = np.asarray(pipeline[:-1].transform(Xb))
        members, member_note = metrics.member_scores(
            ensemble, Xbt, yb, task, classes, basis, walk=kind.members
        )
        if member_note and kind.members != "none":  # "none": members never score alone
            notes.append(member_note)
        curve = _curve(kind, ensemble, oob_curve, Xbt, yb, task, basis, notes)
        extra: dict[str, Any] = {}
        if task == "regression":
            predicted = np.asarray(pipeline.predict(Xb))
            extra["predicted_vs_actual"] = metrics.prediction_pairs(
                yb, predicted, basis, random_state
            )
    return _Scores(on_train, holdout, oob, members, curve, extra, Xbt)


def _oob(
    fit: _Fit, y_train: NDArray[Any], notes: list[str]
) -> tuple[metrics.Scores | None, list[dict[str, Any]]]:
    """The OOB scores and curve: the own algorithm's sums, else the members' OOB rows."""
    own, kind, task, classes = fit.own, fit.kind, fit.task, fit.classes
    if own is not None and own.oob_sums is not None and own.oob_counts is not None:
        oob = metrics.oob_from_sums(own.oob_sums, own.oob_counts, y_train, task, classes)
        reason = None if oob is not None else "no row was ever out of bag"
        oob_curve = metrics.thinned(own.oob_points)
    else:
        oob, reason, oob_curve = metrics.oob_scores(
            fit.ensemble, fit.Xt, y_train, task, classes, source=kind.oob
        )
    if reason and own is not None and own.oob_sums is None:
        reason = "its members are measured out of fold instead (metrics.selection)"
    if reason and kind.leaves_rows_out:  # else no fit of this kind has one
        notes.append(f"no OOB estimate: {reason}")
    return oob, oob_curve


def _science(
    fit: _Fit,
    rows: _Rows,
    scores: _Scores,
    evaluation: EvaluationSpec,
    collector: FoldCollector | None,
    random_state: int,
    run: _Run,
    notes: list[str],
    timings: dict[str, Any],
) -> dict[str, Any]:
    """Diversity, ambiguity, out-of-fold scores, hardest rows and, when asked, the
    bias-variance decomposition; their durations go into ``timings``."""
    run.report(0, 1, "measuring")
    started = time.perf_counter()
    task = fit.task
    with scikit_learn_errors("measure this model's members", fit.spec, task, ("ensemble",)):
        evidence = measures.Evidence(
            pipeline=fit.pipeline,
            kind=fit.kind,
            task=task,
            classes=fit.classes,
            Xt=fit.Xt,
            y_train=rows.y_train,
            train_positions=rows.positions,
            Xht=scores.Xbt if rows.X_hold is not None else None,
            y_hold=rows.y_hold,
            oob=scores.oob,
            cv_folds=collector.result(cv_splitter(task, evaluation, random_state))
            if collector
            else None,
            random_state=random_state,
        )
        science = measures.measure(evidence, notes)
    timings["science_s"] = round(time.perf_counter() - started, 3)
    asked = evaluation.bias_variance
    if asked is not None:
        assert rows.X_hold is not None and rows.y_hold is not None
        started = time.perf_counter()
        science["bias_variance"] = _bias_variance(
            fit.spec,
            task,
            fit.features,
            fit.classes,
            rows.X_train,
            rows.y_train,
            rows.X_hold,
            rows.y_hold,
            asked.rounds,
            random_state,
            run,
        )
        timings["bias_variance_s"] = round(time.perf_counter() - started, 3)
    return science


def _signature(fit: _Fit) -> ModelSignature:
    return ModelSignature(
        fit.task,
        fit.spec.kind,
        tuple(fit.features),
        _classes(fit.classes),
        _voting(fit.ensemble, fit.kind, fit.spec, fit.task),
        known_categories(fit.pipeline[0]),
    )


def _metrics(
    fit: _Fit,
    scores: _Scores,
    cv: metrics.Scores | None,
    science: dict[str, Any],
    notes: list[str],
) -> Metrics:
    own = fit.own
    return Metrics(
        oob=scores.oob,
        holdout=scores.holdout,
        cv=cv,
        train=scores.on_train,
        estimators=scores.members,
        curve=scores.curve,
        notes=notes + (own.notes if own is not None else []),
        **science,
        **scores.extra,
        # The service's own kinds measured their curves themselves (e(k), selection).
        **({"curves": curves_of(scores.curve, scores.oob)} | _own_metrics(own)),
    )


def _split(data: TrainingData, fraction: float, random_state: int, notes: list[str]) -> _Rows:
    """Training and hold-out rows, and each training row's index in the uploaded table."""
    if fraction <= 0:
        return _Rows(data.X, data.y, None, None, np.arange(len(data.y), dtype=np.intp))
    rows = split_rows(data.y, data.task, fraction, random_state)
    assert rows.holdout is not None
    if rows.note:
        notes.append(rows.note)
    y = np.asarray(data.y)
    return _Rows(
        data.X.iloc[rows.train],
        y[rows.train],
        data.X.iloc[rows.holdout],
        y[rows.holdout],
        rows.train,
    )


def _fit_pipeline(
    pipeline: Pipeline, kind: Kind, X: pd.DataFrame, y: NDArray[Any], run: _Run
) -> NDArray[Any]:
    """Fit preprocessing, then the ensemble with progress; returns the preprocessed rows."""
    run.report(0, 1, "preprocessing")
    Xt = np.asarray(pipeline[:-1].fit_transform(X, y))
    _fit_ensemble(pipeline[-1], kind, Xt, y, run)
    return Xt


def _fit_ensemble(
    ensemble: BaseEstimator, kind: Kind, Xt: NDArray[Any], y: NDArray[Any], run: _Run
) -> None:
    size = ensemble.get_params(deep=False).get(kind.size_param) if kind.size_param else None
    total = int(size or 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if kind.growth == "monitor":
            with run.parallel():
                _fit_boosting(ensemble, Xt, y, total, run)
        elif kind.growth == "members":
            _fit_members(ensemble, kind, Xt, y, total, run)
        elif kind.growth == "own":
            _fit_own(ensemble, Xt, y, run)
        else:
            run.report(0, 1, "fitting")
            with run.parallel():
                ensemble.fit(Xt, y)
            run.report(1, 1, "fitting")


def _fit_members(
    ensemble: BaseEstimator, kind: Kind, Xt: NDArray[Any], y: NDArray[Any], total: int, run: _Run
) -> None:
    """A forest or bagging ensemble in one fit, its members in parallel, counted as they
    finish.  Forests score their own OOB rows when they bootstrap; the bagging family's
    OOB figures come from ``metrics`` (which also draws its curve)."""
    own_oob = kind.oob == "forest" and bool(ensemble.get_params().get("bootstrap"))
    ensemble.set_params(oob_score=own_oob)
    run.report(0, total, "fitting")
    with run.parallel(members=total):
        ensemble.fit(Xt, y)
    run.report(total, total, "fitting")


def _fit_boosting(
    ensemble: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], total: int, run: _Run
) -> None:
    def monitor(i: int, _est: object, _locals: object) -> bool:
        run.report(i + 1, total, "fitting")
        return run.cancel is not None and run.cancel.is_set()

    ensemble.fit(Xt, y, monitor=monitor)
    run.check()


def _fit_own(ensemble: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], run: _Run) -> None:
    """The service's own algorithms report each member and stop when cancelled."""

    def monitor(done: int, total: int, stage: str) -> bool:
        run.report(done, total, stage)
        return run.cancel is not None and run.cancel.is_set()

    ensemble.fit(Xt, y, monitor=monitor)
    run.check()


def _own_metrics(own: OwnReport | None) -> dict[str, Any]:
    """The curves and blocks (``stopping``, ``selection``) an own algorithm measured."""
    if own is None:
        return {}
    return {"curves": [Curve(**c) for c in own.curves], **own.metrics}


def _evaluate(
    pipeline: Pipeline, X: pd.DataFrame, y: NDArray[Any], task: Task, classes: list[Any]
) -> metrics.Scores:
    proba = (
        pipeline.predict_proba(X)
        if task == "classification" and hasattr(pipeline, "predict_proba")
        else None
    )
    ensemble = pipeline[-1]
    kind = kind_of(ensemble)
    if proba is not None and kind is not None and kind.labels == "argmax":
        # Their predict is exactly this (scikit-learn's own code): one pass over the members
        # instead of two, which on a large table is seconds of a forest's training.
        pred = ensemble.classes_.take(np.argmax(proba, axis=1), axis=0)
    else:
        pred = pipeline.predict(X)
    return metrics.score(task, y, np.asarray(pred), proba, classes)


def _curve(
    kind: Kind,
    ensemble: BaseEstimator,
    oob_curve: list[dict[str, Any]],
    Xbt: NDArray[Any],
    yb: NDArray[Any],
    task: Task,
    basis: str,
    notes: list[str],
) -> dict[str, Any] | None:
    """OOB curve for the bagging family, forests and pasting_votes, staged scores for
    boosting (an own algorithm's other curves are in ``metrics.curves``)."""
    metric = metrics.primary_metric(task)
    if kind.curve == "oob" and oob_curve:
        return {"basis": "oob", "metric": metric, "points": oob_curve}
    points = metrics.staged_curve(ensemble, Xbt, yb, task) if kind.curve == "stages" else []
    if points:
        return {"basis": basis, "metric": metric, "points": points}
    if kind.curve == "oob" and kind.leaves_rows_out:
        notes.append("no score curve: no row was left out of bag in this fit")
    return None  # a kind that never has one says nothing (the report names what is absent)


def _cross_validate(
    data: TrainingData,
    spec: EstimatorSpec,
    features: list[FeatureColumn],
    X: pd.DataFrame,
    y: NDArray[Any],
    evaluation: EvaluationSpec,
    random_state: int,
    run: _Run,
    notes: list[str],
    collector: FoldCollector | None = None,
) -> dict[str, Any]:
    k = evaluation.cv_folds
    splitter = cv_splitter(data.task, evaluation, random_state)
    if data.task == "classification":
        labels, _, counts = encode_classes(y)
        for label, count in zip(labels, counts, strict=True):
            if count < k:
                notes.append(
                    f"class {label!r} has {count} training rows, fewer than cv_folds={k}: "
                    f"{k - count} of the folds score no row of it"
                )
    folds = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "least populated class": noted above
        splits = list(splitter.split(X, y))
    for i, (tr, va) in enumerate(splits):
        run.check()
        run.report(i, k, "cross_validating")
        fold = build_pipeline(spec, data.task, features, random_state)
        doing = f"cross-validate this model (fold {i + 1} of {k})"
        with scikit_learn_errors(doing, spec, data.task, CV_FOLDS):
            with warnings.catch_warnings(), run.parallel(stage="cross_validating"):
                warnings.simplefilter("ignore", UserWarning)
                fold.fit(X.iloc[tr], y[tr])
            classes = list(fold.classes_) if data.task == "classification" else []
            scores = _evaluate(fold, X.iloc[va], y[va], data.task, classes)
            if collector is not None:
                collector.add(fold, X.iloc[va], tr, va)
        scores.pop("confusion_matrix", None)
        folds.append(scores)
    run.report(k, k, "cross_validating")
    return metrics.mean_scores(folds)


def _bias_variance(
    spec: EstimatorSpec,
    task: Task,
    features: list[FeatureColumn],
    classes: list[Any],
    X_train: pd.DataFrame,
    y_train: NDArray[Any],
    X_hold: pd.DataFrame,
    y_hold: NDArray[Any],
    rounds: int,
    random_state: int,
    run: _Run,
) -> dict[str, Any]:
    """Refit the ensemble and one member on bootstrap samples (progress and cancel per
    round); see :mod:`ensembles.science.bias_variance`."""

    def fit_predict(which: EstimatorSpec, rows: NDArray[np.intp], seed: int) -> NDArray[Any]:
        run.check()
        model = build_pipeline(which, task, features, seed)
        doing = "refit this model on a bootstrap sample for the bias-variance decomposition"
        with scikit_learn_errors(doing, spec, task, bias_variance.FIELD):
            with warnings.catch_warnings(), run.parallel(stage="bias_variance"):
                warnings.simplefilter("ignore", UserWarning)
                model.fit(X_train.iloc[rows], y_train[rows])
            return np.asarray(model.predict(X_hold))

    return bias_variance.decompose(
        spec,
        task,
        classes,
        len(y_train),
        y_hold,
        rounds,
        random_state,
        fit_predict,
        lambda done, total: run.report(done, total, "bias_variance"),
    )


def early_stop_notes(ensemble: BaseEstimator, prefix: str = "") -> list[str]:
    """Why a kind fitted fewer members than asked (its ``stop_note``), for the ensemble
    and for the named members of voting and stacking."""
    notes: list[str] = []
    kind = kind_of(ensemble)
    note = kind.stop_note(ensemble) if kind is not None and kind.stop_note else None
    if note:
        notes.append(prefix + note)
    for name, member in getattr(ensemble, "named_estimators_", {}).items():
        if isinstance(member, BaseEstimator):
            notes += early_stop_notes(member, f"{prefix}member '{name}': ")
    return notes


def feature_importances(pipeline: Pipeline, kind: Kind) -> dict[str, float] | None:
    """Importances summed back onto the user's columns, where the estimator has them."""
    ensemble = pipeline[-1]
    raw = _raw_importances(ensemble, kind)
    if raw is None or not np.all(np.isfinite(raw)):  # a target near float64's limit: NaN
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


def _raw_importances(ensemble: BaseEstimator, kind: Kind) -> NDArray[np.float64] | None:
    if kind.importances == "members_mean":  # each member on the columns it was fed
        return _members_importances(ensemble)
    if kind.importances == "none":
        return None
    try:
        values = getattr(ensemble, "feature_importances_", None)
    except (AttributeError, ValueError):
        values = None
    return None if values is None else np.asarray(values, dtype=np.float64)


def _members_importances(ensemble: BaseEstimator) -> NDArray[np.float64] | None:
    total = np.zeros(ensemble.n_features_in_)
    for member in members_of(ensemble):
        member_values = getattr(member.estimator, "feature_importances_", None)
        if member_values is None:
            return None
        if member.features is None:  # pasting_votes: every column
            total += member_values
        else:
            np.add.at(total, member.features, member_values)
    return total / max(len(ensemble.estimators_), 1)


def fitted_estimator_count(ensemble: BaseEstimator) -> int:
    for attr in ("n_estimators_", "n_iter_"):
        value = getattr(ensemble, attr, None)
        if isinstance(value, int | np.integer):
            return int(value)
    estimators = getattr(ensemble, "estimators_", None)
    return len(estimators) if estimators is not None else 1


def _classes(classes: list[Any]) -> tuple[Any, ...] | None:
    return tuple(c.item() if hasattr(c, "item") else c for c in classes) or None


def _voting(ensemble: BaseEstimator, kind: Kind, spec: EstimatorSpec, task: Task) -> Voting | None:
    """How the fitted model combines its members by default (None: not a voting kind)."""
    if task != "classification" or not kind.votes:
        return None
    if kind.voting_param is not None:
        return "soft" if spec.params.get(kind.voting_param) == "soft" else "hard"
    fitted = getattr(ensemble, "voting", None)  # a VotingClassifier an own kind became
    if fitted in ("hard", "soft"):
        return "soft" if fitted == "soft" else "hard"
    members = members_of(ensemble)
    return "soft" if members and hasattr(members[0].estimator, "predict_proba") else "hard"
