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

Measuring the fitted model is :mod:`ensembles.evaluation`; its importances
:mod:`ensembles.importances`.

Training does not compile: which engine serves the model is decided by the job
(:func:`ensembles.inference.inference_verdict`), on the rows training used
(``FittedModel.train_rows``); a job starts it beside the measuring through ``on_fitted``
(:mod:`ensembles.engine_verdict`), and train() waits for it before it changes the
pipeline (the threads it is stored with).

What the data or the spec makes impossible is a :class:`TrainingError` with a path into
the request: the hold-out split and the folds (:mod:`ensembles.splits`, which the service
also runs at submit time), and whatever scikit-learn refuses while fitting, scoring or
cross-validating (:mod:`ensembles.fit_errors`). An error raised by this library's own
code stays what it is: a bug.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ensembles import forest_oob, metrics
from ensembles.builders import (
    FeatureColumn,
    build_pipeline,
    known_categories,
)
from ensembles.catalog import KINDS, Kind, kind_of
from ensembles.data import TrainingData
from ensembles.errors import TrainingError
from ensembles.evaluation import (
    Fit,
    Rows,
    Scores,
    cv_scores,
    measure_science,
    score_fit,
    scored_rows,
    walks_ahead,
)
from ensembles.explain.summary import explanation_summary, holds_the_gil
from ensembles.fit_errors import scikit_learn_errors
from ensembles.importances import feature_importances, fitted_estimator_count
from ensembles.kinds import OwnReport, adopt
from ensembles.kinds.boosting_library import Keep
from ensembles.member_pass import Ahead
from ensembles.members import members_of
from ensembles.parallel import MemberPool
from ensembles.reports import Curve, Metrics
from ensembles.science import bias_variance
from ensembles.science.curves import curves_of
from ensembles.signature import ModelSignature, Voting
from ensembles.specs import EstimatorSpec, EvaluationSpec
from ensembles.splits import HOLDOUT, cv_problems, split_rows
from ensembles.tasks import Task

# CancelToken and ProgressCallback: part of this module's signature, re-exported.
from ensembles.training_run import CancelToken as CancelToken
from ensembles.training_run import ProgressCallback as ProgressCallback
from ensembles.training_run import Run

# Work on the fitted model that needs no figure (the service's engine verdict), started
# as soon as the pipeline is fitted, with it and its training rows, to run beside the
# measuring (a boosting library fitted in rounds: as its fit returns, beside the reading
# and checking of the answers it kept, ``Keep.fitted``); what it returns is called once
# the figures are measured, before train() changes the pipeline (its threads): it must
# return only when the work no longer reads the pipeline, or raise
# (TrainingCancelledError when cancelled while waiting).
OnFitted = Callable[[Pipeline, pd.DataFrame], Callable[[], None]]
# Called as the explanation summary begins (or, when the measuring before it fails, as
# train() gives up): work beside the measuring may hold what is best run beside the
# summary until then (the engine verdict's GTIL answers, beside shap's TreeSHAP).
OnExplaining = Callable[[], None]
# Called as the figures begin (after the summary when a forest is explained first; or,
# when the summary or the figures fail, as train() gives up): the engine verdict's
# scikit-learn side, which needs the GIL for every tree, waits for it instead of taking
# turns with shap's TreeSHAP.
OnMeasuring = Callable[[], None]
# Called once the fit has returned with the answers it kept on the training rows
# (``FitAnswers.train``: a boosting library's ``predict_proba`` or ``predict`` on them, in
# their order), or None: the engine check need not ask the library for them again.
OnAnswers = Callable[[NDArray[np.float64] | None], None]


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


def train(
    data: TrainingData,
    spec: EstimatorSpec,
    evaluation: EvaluationSpec,
    random_state: int,
    *,
    on_progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    pool: MemberPool | None = None,
    on_fitted: OnFitted | None = None,
    on_explaining: OnExplaining | None = None,
    on_answers: OnAnswers | None = None,
    on_measuring: OnMeasuring | None = None,
) -> FittedModel:
    """Split, fit, measure.  ``spec`` must come from ``validation.resolve_ensemble``;
    members are fitted on ``pool`` (default: a thread per CPU of this process);
    ``on_fitted``: work beside the measuring (see :data:`OnFitted`); ``on_explaining``:
    see :data:`OnExplaining`; ``on_answers``: see :data:`OnAnswers`; ``on_measuring``:
    see :data:`OnMeasuring`."""
    run = Run(on_progress, cancel, pool or MemberPool.local())
    started = time.perf_counter()
    notes: list[str] = []
    rows = _split(data, evaluation.holdout_fraction, random_state, notes)
    _check_evaluation(evaluation, rows, data.task)
    run.check()
    explaining = on_explaining or (lambda: None)
    measuring = on_measuring or (lambda: None)
    early: list[Callable[[], None]] = []  # on_fitted's wait, when the fit started it

    def final(pipeline: Pipeline) -> None:
        if on_fitted is not None and not early:
            early.append(on_fitted(pipeline, rows.X_train))

    try:
        fit = _fit(data, spec, rows, random_state, run, notes, final)
    except BaseException:
        if early:
            explaining()  # started, and nothing waits for a summary that will not run
        raise
    if on_answers is not None:
        kept = None if fit.rounds is None else fit.rounds.answers
        on_answers(None if kept is None else kept.train)
    beside = early[0] if early else None
    if beside is None and on_fitted is not None:
        beside = on_fitted(fit.pipeline, rows.X_train)
    timings: dict[str, Any] = {}
    run.report(0, 1, "evaluating")
    ahead = walks_ahead(fit, rows) if holds_the_gil(fit.pipeline) else None
    try:
        if ahead is None:
            measuring()
            scores, cv, science = _measure(
                fit, rows, data, evaluation, random_state, run, notes, timings
            )
            explaining()
            explanations, seconds = _explained(fit, rows, scores.Xbt, run, notes)
        else:
            # A forest whose summary is shap's TreeSHAP (the GIL held on one core for
            # seconds) is explained first: beside it only native work runs, so its trees'
            # leaves are walked then for the figures' pass (``ahead``,
            # :mod:`ensembles.leaf_walks`) and GTIL answers the check, whose scikit-learn
            # side waits for the figures (``measuring``).  The same figures, and the
            # summary's notes after the figures', as the other way round.
            explaining()
            summary_notes: list[str] = []
            explanations, seconds = _explained(
                fit, rows, scored_rows(fit, rows), run, summary_notes
            )
            measuring()
            run.check()
            scores, cv, science = _measure(
                fit, rows, data, evaluation, random_state, run, notes, timings, ahead
            )
            timings["walked_ahead"] = ahead.walks.given
            notes += summary_notes
        science["explanations"] = explanations
        timings["explanations_s"] = seconds
    except BaseException:
        explaining()  # nothing waits for a summary (or figures) that will not run
        measuring()
        raise
    finally:
        if ahead is not None:
            ahead.stop()
    if beside is not None:  # it reads the fitted estimator, which the next lines change
        beside()
    if fit.kind.threads_param is not None:  # measured with the job's threads; stored with one
        fit.ensemble.set_params(**{fit.kind.threads_param: 1})
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


def _measure(
    fit: Fit,
    rows: Rows,
    data: TrainingData,
    evaluation: EvaluationSpec,
    random_state: int,
    run: Run,
    notes: list[str],
    timings: dict[str, Any],
    ahead: Ahead | None = None,
) -> tuple[Scores, metrics.Scores | None, dict[str, Any]]:
    """The figures but the explanation summary: scores, cross-validation, science
    (``ahead``: the training rows' pass prepared, see ``evaluation.walks_ahead``)."""
    with run.predicting():
        scores = score_fit(fit, rows, random_state, notes, ahead)
    run.check()
    cv, collector = cv_scores(data, fit, rows, evaluation, random_state, run, notes)
    science = measure_science(
        fit, rows, scores, evaluation, collector, random_state, run, notes, timings
    )
    run.check()
    return scores, cv, science


def _check_evaluation(evaluation: EvaluationSpec, rows: Rows, task: Task) -> None:
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
    rows: Rows,
    random_state: int,
    run: Run,
    notes: list[str],
    final: Callable[[Pipeline], None] | None = None,
) -> Fit:
    """Build the pipeline and fit it on the training rows (``final``: called with the
    pipeline as soon as a boosting library's fit has returned, before its answers are
    read: see ``Keep.fitted``)."""
    task: Task = data.task
    kind = KINDS[spec.kind]
    features = [FeatureColumn(f.name, f.dtype, f.n_missing > 0, f.n_unique) for f in data.features]
    pipeline = build_pipeline(spec, task, features, random_state)
    fitted = None if final is None else (lambda: final(pipeline))
    with scikit_learn_errors("fit this model", spec, task, ("ensemble",)):
        Xt, Xht, rounds = _fit_pipeline(pipeline, kind, spec, task, rows, run, fitted)
    own = adopt(pipeline)  # the service's own algorithms: their scikit-learn form
    notes += early_stop_notes(pipeline[-1])
    classes = list(pipeline.classes_) if task == "classification" else []
    return Fit(spec, kind, task, features, pipeline, Xt, own, classes, rounds, Xht)


def _explained(
    fit: Fit, rows: Rows, Xbt: NDArray[Any], run: Run, notes: list[str]
) -> tuple[Any, float]:
    """``metrics.explanations`` on the rows the scores are measured on (``Xbt``), and
    the seconds it took."""
    evaluated_on = "holdout" if rows.X_hold is not None else "train"
    started = time.perf_counter()
    with run.predicting():
        explanations = explanation_summary(
            fit.pipeline, fit.task, _classes(fit.classes), rows.X_train, Xbt, evaluated_on, notes
        )
    return explanations, round(time.perf_counter() - started, 3)


def _signature(fit: Fit) -> ModelSignature:
    return ModelSignature(
        fit.task,
        fit.spec.kind,
        tuple(fit.features),
        _classes(fit.classes),
        _voting(fit.ensemble, fit.kind, fit.spec, fit.task),
        known_categories(fit.pipeline[0]),
    )


def _metrics(
    fit: Fit,
    scores: Scores,
    cv: metrics.Scores | None,
    science: dict[str, Any],
    notes: list[str],
) -> Metrics:
    own = fit.own
    rounds = fit.rounds.metrics if fit.rounds is not None else {}
    notes = notes + (fit.rounds.notes if fit.rounds is not None else [])
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
        **rounds,
        # The service's own kinds measured their curves themselves (e(k), selection).
        **(
            {"curves": curves_of(scores.curve, scores.oob) + _fitted_curves(fit)}
            | _own_metrics(own)
        ),
    )


def _fitted_curves(fit: Fit) -> list[Curve]:
    """The curves the fitted model carries about its own fit (its kind's
    ``fitted_curves``: adaboost_mh's Hamming loss and its bound)."""
    read = fit.kind.fitted_curves
    return [] if read is None else [Curve(**c) for c in read(fit.ensemble)]


def _split(data: TrainingData, fraction: float, random_state: int, notes: list[str]) -> Rows:
    """Training and hold-out rows, and each training row's index in the uploaded table."""
    if fraction <= 0:
        return Rows(data.X, data.y, None, None, np.arange(len(data.y), dtype=np.intp))
    rows = split_rows(data.y, data.task, fraction, random_state)
    assert rows.holdout is not None
    if rows.note:
        notes.append(rows.note)
    y = np.asarray(data.y)
    return Rows(
        data.X.iloc[rows.train],
        y[rows.train],
        data.X.iloc[rows.holdout],
        y[rows.holdout],
        rows.train,
    )


def _fit_pipeline(
    pipeline: Pipeline,
    kind: Kind,
    spec: EstimatorSpec,
    task: Task,
    rows: Rows,
    run: Run,
    fitted: Callable[[], None] | None = None,
) -> tuple[NDArray[Any], NDArray[Any] | None, OwnReport | None]:
    """Fit preprocessing, then the ensemble with progress; returns the preprocessed
    training rows, the preprocessed hold-out rows (a boosting library's fit, which may
    keep its answers on them: None otherwise) and what such a fit reported."""
    run.report(0, 1, "preprocessing")
    Xt = np.asarray(pipeline[:-1].fit_transform(rows.X_train, rows.y_train))
    Xht = None
    if kind.growth == "rounds" and rows.X_hold is not None:
        doing = "score this model on the hold-out rows"
        with scikit_learn_errors(doing, spec, task, HOLDOUT):
            Xht = np.asarray(pipeline[:-1].transform(rows.X_hold))
    return Xt, Xht, _fit_ensemble(pipeline[-1], kind, spec, Xt, rows.y_train, run, Xht, fitted)


def _fit_ensemble(
    ensemble: BaseEstimator,
    kind: Kind,
    spec: EstimatorSpec,
    Xt: NDArray[Any],
    y: NDArray[Any],
    run: Run,
    Xht: NDArray[Any] | None = None,
    fitted: Callable[[], None] | None = None,
) -> OwnReport | None:
    size = ensemble.get_params(deep=False).get(kind.size_param) if kind.size_param else None
    total = int(size or 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if kind.growth == "rounds":
            keep = Keep(Xht, metrics.checkpoints(total), fitted)
            return fit_rounds(ensemble, kind, spec, Xt, y, run, keep)
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
    return None


def fit_rounds(
    ensemble: BaseEstimator,
    kind: Kind,
    spec: EstimatorSpec,
    Xt: NDArray[Any],
    y: NDArray[Any],
    run: Run,
    keep: Keep | None = None,
) -> OwnReport:
    """A boosting library's rounds, each reported; a cancel stops it after the round
    (``keep``: the library may keep its answers on the rows, for the figures)."""
    assert kind.fit_rounds is not None

    def on_round(done: int, total: int) -> bool:
        run.report(done, total, "fitting")
        return run.cancelled()

    report: OwnReport = kind.fit_rounds(
        ensemble, Xt, y, dict(spec.params), run.pool.task_threads, on_round, keep=keep
    )
    run.check()
    return report


def _fit_members(
    ensemble: BaseEstimator, kind: Kind, Xt: NDArray[Any], y: NDArray[Any], total: int, run: Run
) -> None:
    """A forest or bagging ensemble in one fit, its members in parallel, counted as they
    finish.  A bootstrapped forest's own OOB attributes come from the members' pass after
    the fit (:mod:`ensembles.forest_oob`), the bagging family's OOB figures from
    ``metrics`` (which also draws the curve)."""
    own_oob = kind.oob == "forest" and bool(ensemble.get_params().get("bootstrap"))
    forest_oob.fit_without_oob(ensemble, own_oob)  # the members' pass tallies the OOB rows
    run.report(0, total, "fitting")
    with run.parallel(members=total):
        ensemble.fit(Xt, y)
    run.report(total, total, "fitting")


def _fit_boosting(
    ensemble: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], total: int, run: Run
) -> None:
    def monitor(i: int, _est: object, _locals: object) -> bool:
        run.report(i + 1, total, "fitting")
        return run.cancel is not None and run.cancel.is_set()

    ensemble.fit(Xt, y, monitor=monitor)
    run.check()


def _fit_own(ensemble: BaseEstimator, Xt: NDArray[Any], y: NDArray[Any], run: Run) -> None:
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
    members = members_of(ensemble, with_samples=False)
    return "soft" if members and hasattr(members[0].estimator, "predict_proba") else "hard"
