"""Measuring a fitted model: its scores on the training and hold-out rows, OOB, the
members' own, the score curve, cross-validation, the science and, when asked, the
bias-variance decomposition.

What scikit-learn refuses while scoring or cross-validating is placed on the request's
path (:mod:`ensembles.fit_errors`); progress and cancel go through the run
(:mod:`ensembles.training_run`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ensembles import metrics
from ensembles.builders import FeatureColumn, build_pipeline
from ensembles.catalog import KINDS, Kind, kind_of
from ensembles.data import TrainingData
from ensembles.fit_errors import scikit_learn_errors
from ensembles.kinds import OwnReport
from ensembles.kinds.base import FitAnswers
from ensembles.member_pass import Ahead, MemberPass, member_pass, shares_pass, walk_ahead
from ensembles.members import predicted_labels
from ensembles.science import bias_variance, measures
from ensembles.science.oof import FoldCollector
from ensembles.specs import EstimatorSpec, EvaluationSpec
from ensembles.splits import CV_FOLDS, HOLDOUT, cv_splitter, encode_classes
from ensembles.tasks import Task
from ensembles.training_run import Run


@dataclass(frozen=True)
class Rows:
    """The training and hold-out parts of the table (None: nothing held out)."""

    X_train: pd.DataFrame
    y_train: NDArray[Any]
    X_hold: pd.DataFrame | None
    y_hold: NDArray[Any] | None
    positions: NDArray[np.intp]  # each training row's index in the uploaded table


@dataclass(frozen=True)
class Fit:
    """The fitted pipeline and what measuring it needs."""

    spec: EstimatorSpec
    kind: Kind
    task: Task
    features: list[FeatureColumn]
    pipeline: Pipeline
    Xt: NDArray[Any]  # the training rows, preprocessed
    own: OwnReport | None  # the service's own algorithms: what they measured themselves
    classes: list[Any]
    rounds: OwnReport | None = None  # a boosting library's fit: where it stopped, notes
    # The hold-out rows, preprocessed before a boosting library's fit (which may keep its
    # answers on them, ``rounds.answers``); None: preprocessed when scored.
    Xht: NDArray[Any] | None = None

    @property
    def ensemble(self) -> BaseEstimator:
        return self.pipeline[-1]


@dataclass(frozen=True)
class Scores:
    """What the fitted model scores on its rows, measured right after the fit."""

    on_train: metrics.Scores
    holdout: metrics.Scores | None
    oob: metrics.Scores | None
    members: list[dict[str, Any]]
    curve: dict[str, Any] | None
    extra: dict[str, Any]  # predicted_vs_actual (regression)
    Xbt: NDArray[Any]  # the rows scored (hold-out, else training), preprocessed
    # What the diversity measures judge, when the members' pass already answered it.
    judged: measures.Judged | None = None


def score_fit(
    fit: Fit, rows: Rows, random_state: int, notes: list[str], ahead: Ahead | None = None
) -> Scores:
    """Scores on the training and hold-out rows, OOB, the members' own and the curve
    (``ahead``: the training rows' pass prepared before, :func:`walks_ahead`)."""
    if ahead is not None and ahead.X is fit.Xt:  # walks_ahead made its checks
        return _score_by_members(fit, rows, random_state, notes, ahead)
    if _measured_by_pass(fit, rows):
        return _score_by_members(fit, rows, random_state, notes)
    return _score_each(fit, rows, random_state, notes)


def walks_ahead(fit: Fit, rows: Rows) -> Ahead | None:
    """The training rows' pass of a forest prepared, and its trees' leaves walked on a
    thread from now (:mod:`ensembles.leaf_walks`), for :func:`score_fit`; None for a
    model whose figures do not come from such a pass."""
    return walk_ahead(fit.ensemble, fit.Xt) if _measured_by_pass(fit, rows) else None


def _measured_by_pass(fit: Fit, rows: Rows) -> bool:
    """Are the figures measured from one pass of the members over the fitted rows: a
    kind that shares one, and training rows the pipeline gives as it gave the fit
    (else scored as any other kind)?"""
    if not shares_pass(fit.ensemble, fit.kind.combination, fit.kind.members):
        return False
    return same_rows(np.asarray(fit.pipeline[:-1].transform(rows.X_train)), fit.Xt)


def _score_each(fit: Fit, rows: Rows, random_state: int, notes: list[str]) -> Scores:
    """Each figure by its own predictions, but for a kind whose staged answers and final
    answers come from one walk of its trees (``Stages.answers``): the rows the curve is
    drawn on are then answered once, for the curve and for their scores; and for a fit
    that kept its own answers (``OwnReport.answers``), not at all."""
    spec, task, classes, pipeline = fit.spec, fit.task, fit.classes, fit.pipeline
    held = rows.X_hold is not None and rows.y_hold is not None
    basis, Xb, yb = (
        ("holdout", rows.X_hold, rows.y_hold)
        if rows.X_hold is not None
        else ("train", rows.X_train, rows.y_train)
    )
    assert Xb is not None and yb is not None
    doing, path = (
        ("score this model on the hold-out rows", HOLDOUT)
        if held
        else ("score this model on its training rows", ("ensemble",))
    )
    with scikit_learn_errors(doing, spec, task, path):
        shared = _shared_pass(fit, rows)
    final = None if shared is None else shared.final
    holdout: metrics.Scores | None = None
    # The curve's rows' class codes, made once for their scores and the curve.
    same = _same_classes(fit.ensemble, classes)
    truth = _class_codes(fit.ensemble, yb, task) if same or fit.kind.curve == "stages" else None
    shared_truth = truth if same else None
    with scikit_learn_errors("score this model on its training rows", spec, task, ("ensemble",)):
        on_train = _evaluate(
            pipeline,
            rows.X_train,
            rows.y_train,
            task,
            classes,
            None if shared is None else shared.train_final,
            None if held else shared_truth,
        )
    if rows.X_hold is not None and rows.y_hold is not None:
        with scikit_learn_errors("score this model on the hold-out rows", spec, task, HOLDOUT):
            holdout = _evaluate(
                pipeline, rows.X_hold, rows.y_hold, task, classes, final, shared_truth
            )
    else:
        notes.append("no hold-out set (holdout_fraction = 0)")
    kind, ensemble = fit.kind, fit.ensemble
    with scikit_learn_errors("measure this model's members", spec, task, ("ensemble",)):
        oob, oob_curve = _oob(fit, rows.y_train, notes)
        Xbt = _scored_rows(fit, rows) if shared is None else shared.Xbt
        members, member_note = metrics.member_scores(
            ensemble, Xbt, yb, task, classes, basis, walk=kind.members
        )
        if member_note and kind.members != "none":  # "none": members never score alone
            notes.append(member_note)
        staged = None if shared is None else shared.staged
        codes = None if shared is None else shared.staged_codes
        curve = _curve(kind, ensemble, oob_curve, Xbt, yb, task, basis, notes, staged, codes, truth)
        extra: dict[str, Any] = {}
        if task == "regression":
            predicted = np.asarray(pipeline.predict(Xb)) if final is None else final
            extra["predicted_vs_actual"] = metrics.prediction_pairs(
                yb, predicted, basis, random_state
            )
    return Scores(on_train, holdout, oob, members, curve, extra, Xbt)


def _class_codes(ensemble: BaseEstimator, y: NDArray[Any], task: Task) -> NDArray[np.intp] | None:
    """``metrics.class_codes(y, classes_)`` for a classifier (None otherwise): what the
    staged curve counts its hits on, and the scores of the same rows too when their
    classes are the same (``_same_classes``): hashing 200,000 string labels costs ~0.03 s
    of CPU each time, on the job's critical path after the fit."""
    classes = getattr(ensemble, "classes_", None) if task == "classification" else None
    return None if classes is None else metrics.class_codes(y, list(classes))


def _same_classes(ensemble: BaseEstimator, classes: list[Any]) -> bool:
    """Are the scores' classes the ensemble's ``classes_``, in their order?"""
    own = getattr(ensemble, "classes_", None)
    return own is not None and len(own) == len(classes) and list(own) == list(classes)


@dataclass(frozen=True)
class _SharedPass:
    """The curve's rows, preprocessed, with their staged and final answers, and the
    training rows' final answers when known (None: the model answers them)."""

    Xbt: NDArray[Any]
    staged: Sequence[Any]
    final: NDArray[np.float64]
    train_final: NDArray[np.float64] | None
    staged_codes: list[NDArray[Any]] | None = None  # FitAnswers.staged_codes


def _shared_pass(fit: Fit, rows: Rows) -> _SharedPass | None:
    """The answers the fit kept (``OwnReport.answers``), else one walk of the trees, for
    the curve and the scores of the rows it is drawn on (None: the kind has neither, or
    its labels are not the first maximum of its probabilities, so each figure asks the
    model as before)."""
    stages = fit.kind.stages
    if fit.kind.curve != "stages" or stages is None:
        return None
    if fit.task == "classification" and fit.kind.labels != "argmax":
        return None
    held = rows.X_hold is not None
    kept = None if fit.rounds is None else fit.rounds.answers
    if kept is None and stages.answers is None:
        return None
    Xbt = _scored_rows(fit, rows)
    marks = metrics.checkpoints(stages.count(fit.ensemble))
    if kept is not None and _kept_on_these_rows(fit, rows, Xbt, marks, kept):
        staged: Sequence[Any]
        if kept.staged is None:
            staged, codes = stages.predict(fit.ensemble, Xbt, marks), None
        else:
            staged, codes = kept.staged, kept.staged_codes
        final = kept.train if kept.held is None else kept.held
        return _SharedPass(Xbt, staged, final, kept.train, codes)
    if stages.answers is None:
        return None
    answers = stages.answers(fit.ensemble, Xbt, marks)
    return _SharedPass(Xbt, answers.staged, answers.final, None if held else answers.final)


def _scored_rows(fit: Fit, rows: Rows) -> NDArray[Any]:
    """The rows the curve and the members are scored on (hold-out, else training),
    preprocessed (the hold-out's once: before the fit, for a boosting library)."""
    if rows.X_hold is None:
        return np.asarray(fit.pipeline[:-1].transform(rows.X_train))
    return fit.Xht if fit.Xht is not None else np.asarray(fit.pipeline[:-1].transform(rows.X_hold))


def scored_rows(fit: Fit, rows: Rows) -> NDArray[Any]:
    """``Scores.Xbt`` before the scores of a forest that :func:`walks_ahead` prepared:
    the training rows as fitted (the same rows, :func:`_measured_by_pass`), else
    :func:`_scored_rows`' hold-out rows."""
    return fit.Xt if rows.X_hold is None else _scored_rows(fit, rows)


def _kept_on_these_rows(
    fit: Fit, rows: Rows, Xbt: NDArray[Any], marks: list[int], kept: FitAnswers
) -> bool:
    """Whether the answers the fit kept are those of the rows scored here: the same marks,
    a hold-out exactly when there is one, and the training rows preprocessed now as they
    were for the fit (else each figure asks the model)."""
    if kept.marks != marks or (kept.held is None) != (rows.X_hold is None):
        return False
    if rows.X_hold is not None and fit.Xht is None:
        return False
    Xtt = Xbt if rows.X_hold is None else np.asarray(fit.pipeline[:-1].transform(rows.X_train))
    return same_rows(Xtt, fit.Xt)


def same_rows(a: NDArray[Any], b: NDArray[Any]) -> bool:
    """``np.array_equal(a, b, equal_nan=True)``, the plain comparison first: equal
    without NaN (no NaN is equal to itself) is equal with, and it costs 0.006 s of CPU on
    200,000 x 20 rows where ``equal_nan`` masks both arrays (0.12 s, on the job's path
    before the figures); only a table with missing values pays for the second."""
    return bool(np.array_equal(a, b) or np.array_equal(a, b, equal_nan=True))


def _score_by_members(
    fit: Fit, rows: Rows, random_state: int, notes: list[str], ahead: Ahead | None = None
) -> Scores:
    """Forests and the bagging family: the same figures from one pass of the members over
    the training rows and one over the hold-out rows (:mod:`ensembles.member_pass`)."""
    spec, task, classes, ensemble = fit.spec, fit.task, fit.classes, fit.ensemble
    held = rows.X_hold is not None and rows.y_hold is not None
    # The training labels' class codes, once for the pass, its scores and the OOB scores
    # (each hashed the 200,000 labels again: ~0.3 s on the job's path, on one core).
    codes = _codes(fit, rows.y_train)
    with scikit_learn_errors("score this model on its training rows", spec, task, ("ensemble",)):
        on_rows = _pass(
            fit, fit.Xt, rows.y_train, oob=True, sample=not held, seed=random_state,
            codes=codes, ahead=ahead,
        )  # fmt: skip
        on_train = _pass_scores(fit, on_rows, rows.y_train, codes)
    holdout: metrics.Scores | None = None
    basis, Xbt, yb, judged = "train", fit.Xt, rows.y_train, on_rows
    if held:
        assert rows.X_hold is not None and rows.y_hold is not None
        with scikit_learn_errors("score this model on the hold-out rows", spec, task, HOLDOUT):
            Xbt = np.asarray(fit.pipeline[:-1].transform(rows.X_hold))
            held_codes = _codes(fit, rows.y_hold)
            judged = _pass(
                fit, Xbt, rows.y_hold, oob=False, sample=True, seed=random_state, codes=held_codes
            )
            holdout = _pass_scores(fit, judged, rows.y_hold, held_codes)
        basis, yb = "holdout", rows.y_hold
    else:
        notes.append("no hold-out set (holdout_fraction = 0)")
    with scikit_learn_errors("measure this model's members", spec, task, ("ensemble",)):
        oob, oob_curve = _oob(fit, rows.y_train, notes, on_rows.oob_tallies(), codes)
        members, _ = metrics.member_scores(
            ensemble, Xbt, yb, task, classes, basis, walk=fit.kind.members,
            primaries=judged.primaries,
        )  # fmt: skip
        curve = _curve(fit.kind, ensemble, oob_curve, Xbt, yb, task, basis, notes)
    extra: dict[str, Any] = {}
    if task == "regression":
        extra["predicted_vs_actual"] = metrics.prediction_pairs(
            yb, judged.combined, basis, random_state
        )
    outputs = _judged(fit, judged, yb, held)
    return Scores(on_train, holdout, oob, members, curve, extra, Xbt, outputs)


def _judged(fit: Fit, answered: MemberPass, y: NDArray[Any], held: bool) -> measures.Judged | None:
    """What the diversity measures judge, from a pass: the sampled members' outputs on
    hold-out rows (with the ensemble's answer there), else on their OOB rows."""
    if answered.sampled is None:
        return None
    chosen = slice(None) if answered.sample is None else answered.sample
    if not held:
        return "oob", answered.sampled, y[chosen], None
    answer = (
        answered.combined
        if fit.task == "regression"
        else answered.labels(np.asarray(fit.ensemble.classes_))
    )
    return "holdout", answered.sampled, y[chosen], answer[chosen]


def _codes(fit: Fit, y: NDArray[Any]) -> NDArray[np.intp] | None:
    """``metrics.class_codes(y, fit.classes)`` of a classification (None: a regression)."""
    return metrics.class_codes(y, fit.classes) if fit.task == "classification" else None


def _pass(
    fit: Fit,
    X: NDArray[Any],
    y: NDArray[Any],
    *,
    oob: bool,
    sample: bool,
    seed: int,
    codes: NDArray[np.intp] | None = None,
    ahead: Ahead | None = None,
) -> MemberPass:
    """The members once over ``X``; ``sample``: keep the outputs diversity judges;
    ``codes``: ``y``'s class codes, when made; ``ahead``: see ``member_pass``."""
    rows = measures.sample_rows(len(y), seed) if sample else None
    return member_pass(
        fit.ensemble, X, y, fit.task, fit.classes, oob=oob, sample=rows,
        max_sampled=measures.MAX_MEMBERS if sample else 0, codes=codes, ahead=ahead,
    )  # fmt: skip


def _pass_scores(
    fit: Fit, answered: MemberPass, y: NDArray[Any], codes: NDArray[np.intp] | None = None
) -> metrics.Scores:
    """The API's scores of the ensemble's answer in a pass (``_evaluate``'s figures;
    ``codes``: ``y``'s class codes, when made)."""
    if fit.task == "regression":
        return metrics.score(fit.task, y, answered.combined)
    own = np.asarray(fit.ensemble.classes_)
    index = np.argmax(answered.combined, axis=1)
    labels = own.take(index, axis=0)  # answered.labels(own)
    # ``fit.classes`` are ``classes_`` (unique): a label's code is its index, not hashed.
    same = list(own) == list(fit.classes)
    return metrics.score(
        fit.task, y, labels, answered.combined, fit.classes,
        predicted_codes=index if same else None, true_codes=codes,
    )  # fmt: skip


def _oob(
    fit: Fit,
    y_train: NDArray[Any],
    notes: list[str],
    tallied: metrics.OobTallies | None = None,
    codes: NDArray[np.intp] | None = None,
) -> tuple[metrics.Scores | None, list[dict[str, Any]]]:
    """The OOB scores and curve: the own algorithm's sums, else the members' OOB rows
    (``tallied``: as a pass over them counted them; ``codes``: ``y_train``'s class codes,
    when made)."""
    own, kind, task, classes = fit.own, fit.kind, fit.task, fit.classes
    if own is not None and own.oob_sums is not None and own.oob_counts is not None:
        oob = metrics.oob_from_sums(own.oob_sums, own.oob_counts, y_train, task, classes)
        reason = None if oob is not None else "no row was ever out of bag"
        oob_curve = metrics.thinned(own.oob_points)
    else:
        oob, reason, oob_curve = metrics.oob_scores(
            fit.ensemble, fit.Xt, y_train, task, classes, source=kind.oob, tallied=tallied,
            codes=codes,
        )  # fmt: skip
    if reason and own is not None and own.oob_sums is None:
        reason = "its members are measured out of fold instead (metrics.selection)"
    if reason and kind.leaves_rows_out:  # else no fit of this kind has one
        notes.append(f"no OOB estimate: {reason}")
    return oob, oob_curve


def cv_scores(
    data: TrainingData,
    fit: Fit,
    rows: Rows,
    evaluation: EvaluationSpec,
    random_state: int,
    run: Run,
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


def measure_science(
    fit: Fit,
    rows: Rows,
    scores: Scores,
    evaluation: EvaluationSpec,
    collector: FoldCollector | None,
    random_state: int,
    run: Run,
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
            judged=scores.judged,
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


def _evaluate(
    pipeline: Pipeline,
    X: pd.DataFrame,
    y: NDArray[Any],
    task: Task,
    classes: list[Any],
    final: NDArray[np.float64] | None = None,
    truth: NDArray[np.intp] | None = None,
) -> metrics.Scores:
    """The metric set of ``pipeline`` on these rows; ``final``: its ``predict_proba``
    (classifier) or ``predict`` (regressor) on them, already answered (_shared_pass);
    ``truth``: ``metrics.class_codes(y, classes)``, already made."""
    ensemble = pipeline[-1]
    if final is not None:
        if task != "classification":
            return metrics.score(task, y, final, None, classes)
        index = np.argmax(final, axis=1)
        pred = ensemble.classes_.take(index, axis=0)
        # ``classes`` are ``classes_`` (unique): a label's code is its index, not hashed.
        codes = index if list(ensemble.classes_) == list(classes) else None
        return metrics.score(
            task, y, np.asarray(pred), final, classes, predicted_codes=codes, true_codes=truth
        )
    proba = (
        pipeline.predict_proba(X)
        if task == "classification" and hasattr(pipeline, "predict_proba")
        else None
    )
    kind = kind_of(ensemble)
    if proba is not None and kind is not None and kind.labels == "argmax":
        # Their predict is exactly this (scikit-learn's own code): one pass over the members
        # instead of two, which on a large table is seconds of a forest's training.
        pred = ensemble.classes_.take(np.argmax(proba, axis=1), axis=0)
    else:
        pred = pipeline.predict(X)
    return metrics.score(task, y, np.asarray(pred), proba, classes, true_codes=truth)


def _curve(
    kind: Kind,
    ensemble: BaseEstimator,
    oob_curve: list[dict[str, Any]],
    Xbt: NDArray[Any],
    yb: NDArray[Any],
    task: Task,
    basis: str,
    notes: list[str],
    staged: Sequence[Any] | None = None,
    staged_codes: list[NDArray[Any]] | None = None,
    truth: NDArray[np.intp] | None = None,
) -> dict[str, Any] | None:
    """OOB curve for the bagging family, forests and pasting_votes, staged scores for
    boosting (an own algorithm's other curves are in ``metrics.curves``; ``staged``: the
    staged answers at the checkpoints, already answered; ``staged_codes``: their class
    codes, when known; ``truth``: ``yb``'s class codes, when made)."""
    metric = metrics.primary_metric(task)
    if kind.curve == "oob" and oob_curve:
        return {"basis": "oob", "metric": metric, "points": oob_curve}
    points = (
        metrics.staged_curve(ensemble, Xbt, yb, task, kind.stages, staged, staged_codes, truth)
        if kind.curve == "stages"
        else []
    )
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
    run: Run,
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
                fit_rows(fold, spec, X.iloc[tr], y[tr], run)
            classes = list(fold.classes_) if data.task == "classification" else []
            scores = _evaluate(fold, X.iloc[va], y[va], data.task, classes)
            if collector is not None:
                collector.add(fold, X.iloc[va], tr, va)
        scores.pop("confusion_matrix", None)
        folds.append(scores)
    run.report(k, k, "cross_validating")
    return metrics.mean_scores(folds)


def fit_rows(
    pipeline: Pipeline, spec: EstimatorSpec, X: pd.DataFrame, y: NDArray[Any], run: Run
) -> None:
    """Fit a pipeline as training fits the model: a boosting library's rounds through its
    kind (threads, early stopping), anything else with ``fit``."""
    kind = KINDS[spec.kind]
    if kind.fit_rounds is None:
        pipeline.fit(X, y)
        return
    Xt = np.asarray(pipeline[:-1].fit_transform(X, y))
    kind.fit_rounds(pipeline[-1], Xt, y, dict(spec.params), run.pool.task_threads, None)


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
    run: Run,
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
                fit_rows(model, which, X_train.iloc[rows], y_train[rows], run)
            return predicted_labels(model, X_hold)

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
