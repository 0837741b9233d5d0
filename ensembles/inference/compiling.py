"""Compiling a fitted model for serving, and the verdict its version keeps.

Rule: a compiled engine may serve a model only if it answers as scikit-learn does on the
training rows and fresh probe rows (labels identical, numbers within 1e-9; see
:mod:`ensembles.inference.fidelity`).  Tree ensembles become a
:class:`~ensembles.inference.compiled.CompiledModel`; voting, stacking and the bagging
family are compiled member by member (:mod:`ensembles.inference.composite`: tree members
by GTIL, logistic regression, naive Bayes and linear members by numpy, the rest by
scikit-learn, combined by each estimator's own arithmetic) and only if at least one member
is a tree model GTIL takes.  GTIL was chosen by measurement over ONNX Runtime, whose
float32 leaves break the 1e-9 rule.  Figures: docs/performance.md.

Training does not compile: the worker runs train, then :func:`inference_verdict` on the
training rows, then publishes (a job compiles and checks beside train's measuring, and
calibrates after it: :mod:`ensembles.engine_verdict`, with :func:`calibrated`).  The
stored artifact stays the plain scikit-learn Pipeline: at load time :func:`rebuild`
re-creates the engine from it in tens of milliseconds, trusting the recorded verdict
after a quick check on synthetic rows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import sklearn
import treelite
from numpy.typing import NDArray
from sklearn.pipeline import Pipeline

from ensembles.inference import composite
from ensembles.inference.compiled import CompiledModel, restore_model, with_single_row
from ensembles.inference.composite import CompiledComposite
from ensembles.inference.engines import SKLEARN, Answer, SklearnEngine
from ensembles.inference.fidelity import FidelityReport, compare, probe_rows, synthetic_rows
from ensembles.inference.fitted_rows import FittedRows, KnownAnswers, own_answers
from ensembles.inference.gtil import ENGINE, IMPORT_ERRORS, import_model, plan_for
from ensembles.leaf_order import LeafOrder, first_tree, leaf_order
from ensembles.tasks import Task

__all__ = [
    "DEFAULT_MAX_ROWS",
    "Compiled",
    "calibrated",
    "compile_model",
    "inference_verdict",
    "rebuild",
    "verdict_of",
]

DEFAULT_MAX_ROWS = 64  # when not calibrated: below every crossover the benchmark measured
FloatArray = NDArray[np.float64]

_CALIBRATION_LARGE = 1024  # rows of scikit-learn's second size timed by the calibration
_CALIBRATION_COMPILED = 256  # and of the compiled engine's (see _calibrate)
# Training rows the compiled engine is checked on, beside the probes at every threshold:
# a seeded sample beyond this (checking all 500,000 rows of a big table took longer than
# the fit; the probes, not the bulk, reach the edge cases).
MAX_CHECK_ROWS = 10_000


def _check_positions(n: int, rng: np.random.Generator) -> NDArray[np.intp] | None:
    """The positions of at most MAX_CHECK_ROWS of ``n`` training rows, in their order
    (None: all of them)."""
    if n <= MAX_CHECK_ROWS:
        return None
    return np.sort(rng.choice(n, MAX_CHECK_ROWS, replace=False))


def _check_sample(X: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """At most MAX_CHECK_ROWS of the training rows, in their order."""
    positions = _check_positions(len(X), rng)
    return X if positions is None else X.iloc[positions]


_CALIBRATION_MAX_ROWS = 4096  # the largest crossover a calibration reports
Compiled = CompiledModel | CompiledComposite


def _versions() -> str:
    return f"treelite {treelite.__version__}, scikit-learn {sklearn.__version__}"


def inference_verdict(
    pipeline: Pipeline, task: Task, X_train: pd.DataFrame, random_state: int, threads: int = 1
) -> dict[str, Any]:
    """The version's ``inference`` metadata: the engine that serves it (``engine``, with the
    ``reason`` when scikit-learn does), the check's figures and each member's engine;
    ``threads``: the job's, for the compiled side of the check."""
    _, report = compile_model(pipeline, task, X_train, random_state, threads=threads)
    return verdict_of(report)


def verdict_of(report: FidelityReport) -> dict[str, Any]:
    """The version's ``inference`` metadata from the (calibrated) report."""
    return {**report.as_dict(), "engine": report.engine or SKLEARN}


def calibrated(
    compiled: Compiled | None, report: FidelityReport, X_check: pd.DataFrame
) -> tuple[Compiled | None, FidelityReport]:
    """``compile_model(..., calibrate=False)``'s answer calibrated as ``calibrate=True``
    gives it (a refused model as it is): the crossover measured on this model, its time
    counted in ``check_seconds``.  Apart so that a job checks the model beside its
    measuring and times the engines once nothing else runs (:mod:`ensembles.engine_verdict`)."""
    if compiled is None or not report.ok:
        return compiled, report
    started = time.perf_counter()
    max_rows = _calibrate(compiled, X_check)
    seconds = report.check_seconds + time.perf_counter() - started
    return (
        replace(compiled, max_rows=max_rows),
        replace(report, crossover_rows=max_rows, check_seconds=seconds),
    )


def compile_model(
    pipeline: Pipeline,
    task: Task,
    X_check: pd.DataFrame,
    rng_seed: int = 0,
    *,
    calibrate: bool = True,
    threads: int = 1,
    before_compiled: Callable[[], None] | None = None,
    known: KnownAnswers | None = None,
    before_own: Callable[[], None] | None = None,
) -> tuple[Compiled | None, FidelityReport]:
    """Compile the ensemble step and check it against scikit-learn on ``X_check`` + probes.

    ``X_check`` are the training rows (raw, before preprocessing; a seeded sample of
    MAX_CHECK_ROWS of them when there are more).  Returns the compiled
    model, or None with the reason, and the report to keep in the version's metadata.
    ``calibrate`` measures the crossover row count on this model (else DEFAULT_MAX_ROWS).
    ``threads``: GTIL's threads for the check's rows (the engine serves with one).
    ``before_compiled``: called before GTIL answers the check's rows of a compiled tree
    model, scikit-learn's side already under way (a job holds GTIL there until it has
    cores to spare: :mod:`ensembles.engine_verdict`); the time it takes is not counted
    in ``check_seconds``.
    ``known``: the fit's own answers on the rows of ``X_check`` (all of them, in their
    order), when it kept them: the estimator's side of the check takes them for the
    sampled training rows instead of asking the library again
    (:mod:`ensembles.inference.fitted_rows`; the same numbers, the same report).
    ``before_own``: called before scikit-learn answers the check's rows of a compiled
    tree model (on the thread that asks it; a job holds that side while the explanation
    summary holds the GIL, :mod:`ensembles.engine_verdict`); the wait is not counted in
    ``check_seconds`` either.
    """
    started = time.perf_counter()
    estimator = pipeline[-1]
    if composite.is_composite(estimator):
        return _compile_composite(pipeline, task, X_check, rng_seed, calibrate, started)
    plan = plan_for(estimator, task)
    if isinstance(plan, str):
        return None, _refused(plan, started)
    try:
        model = import_model(estimator)
    except IMPORT_ERRORS as exc:
        return None, _refused(f"treelite cannot import {type(estimator).__name__}: {exc}", started)
    compile_seconds = time.perf_counter() - started
    compiled = CompiledModel(
        ENGINE, task, type(estimator).__name__, DEFAULT_MAX_ROWS, pipeline, model, plan
    )
    rng = np.random.default_rng(rng_seed)
    positions = _check_positions(len(X_check), rng)
    sample = X_check if positions is None else X_check.iloc[positions]
    Xt = np.asarray(pipeline[:-1].transform(sample), dtype=np.float64)
    if Xt.shape[0] == 0:
        return None, _refused("no rows to check the compiled model on", started, compile_seconds)
    rows = np.vstack([Xt, probe_rows(estimator, Xt, rng=rng, missing=plan.routes_missing)])
    fitted = None if known is None else FittedRows(len(Xt), positions, len(X_check), known)
    return _checked(
        compiled,
        rows,
        X_check,
        calibrate,
        started,
        compile_seconds,
        threads,
        before_compiled,
        fitted,
        before_own,
    )


def _compile_composite(
    pipeline: Pipeline,
    task: Task,
    X_check: pd.DataFrame,
    rng_seed: int,
    calibrate: bool,
    started: float,
) -> tuple[Compiled | None, FidelityReport]:
    """Voting, stacking, bagging: members compiled where they can be, then the same check."""
    estimator = pipeline[-1]
    rng = np.random.default_rng(rng_seed)
    Xt = np.asarray(pipeline[:-1].transform(_check_sample(X_check, rng)), dtype=np.float64)
    rows = np.vstack([Xt, probe_rows(estimator, Xt, rng=rng)]) if len(Xt) else Xt
    rows = rows[np.isfinite(rows).all(axis=1)]  # others are scikit-learn's to answer
    if rows.shape[0] == 0:
        return None, _refused("no rows to check the compiled model on", started)
    root, members = composite.build(estimator, task, rows)
    compile_seconds = time.perf_counter() - started
    name = type(estimator).__name__
    if not any(m["engine"] == ENGINE for m in members):
        return None, _refused(_uncompiled(name, members), started, compile_seconds, members=members)
    n_features = int(estimator.n_features_in_)
    compiled = CompiledComposite(
        ENGINE, task, name, DEFAULT_MAX_ROWS, pipeline, root, n_features, tuple(members)
    )
    return _checked(compiled, rows, X_check, calibrate, started, compile_seconds)


def _uncompiled(name: str, members: list[composite.MemberRecord]) -> str:
    """Why a composite has no compiled member."""
    if len(members) == 1 and members[0]["name"] == name and members[0].get("reason"):
        return f"{name} is not compiled: {members[0]['reason']}"  # its own step refused
    listed = ", ".join(f"{m['name']}: {m['kind']}" for m in members[:8])
    more = f" and {len(members) - 8} more" if len(members) > 8 else ""
    return (
        f"{name} is not a tree ensemble the compiled engine supports, nor is any of its "
        f"members ({listed}{more})"
    )


def _checked(
    compiled: Compiled,
    rows: FloatArray,
    X_check: pd.DataFrame,
    calibrate: bool,
    started: float,
    compile_seconds: float,
    threads: int = 1,
    before_compiled: Callable[[], None] | None = None,
    fitted: FittedRows | None = None,
    before_own: Callable[[], None] | None = None,
) -> tuple[Compiled | None, FidelityReport]:
    """The compiled model if it answers as scikit-learn on ``rows``, calibrated; the report
    (``before_compiled``: see :func:`compile_model`; its time is taken off the check's;
    ``fitted``: the training rows among ``rows`` and the fit's own answers on them)."""
    members = compiled.members if isinstance(compiled, CompiledComposite) else ()
    checking = (
        replace(compiled, threads=threads) if isinstance(compiled, CompiledModel) else compiled
    )
    waited = [0.0, 0.0]  # GTIL's hold, scikit-learn's side's hold

    def held(before: Callable[[], None] | None, which: int) -> Callable[[], None] | None:
        if before is None:
            return None

        def hold() -> None:
            held_at = time.perf_counter()
            before()
            waited[which] += time.perf_counter() - held_at

        return hold

    hold, hold_own = held(before_compiled, 0), held(before_own, 1)
    reason, max_diff = _check(checking, rows, hold, fitted, hold_own)
    started += max(waited)  # the holds (side by side) are neither compiling nor checking
    if reason is not None:
        return None, _refused(reason, started, compile_seconds, max_diff, len(rows), members)
    report = FidelityReport(
        ok=True,
        engine=ENGINE,
        reason=None,
        max_abs_diff=max_diff,
        n_rows_checked=len(rows),
        compile_seconds=compile_seconds,
        check_seconds=time.perf_counter() - started - compile_seconds,
        crossover_rows=DEFAULT_MAX_ROWS,
        versions=_versions(),
        members=tuple(members),
    )
    return calibrated(compiled, report, X_check) if calibrate else (compiled, report)


def rebuild(
    pipeline: Pipeline, task: Task, recorded: FidelityReport | Mapping[str, Any]
) -> tuple[Compiled | None, FidelityReport]:
    """Re-create the engine of a stored version from its pipeline and recorded verdict.

    No training rows at load time: after importing, the engine is checked once more on
    synthetic rows built from the trees' own thresholds (tens of milliseconds), so a library
    upgrade that changed the engine's answers is caught rather than served.  A LightGBM
    model's single-row predictor is kept only if it gives GTIL's raw scores of those rows,
    bit for bit (:func:`~ensembles.inference.compiled.with_single_row`: 55 ms more for 100
    rounds, 220 ms for 500, mostly GTIL scoring the rows once more and LightGBM each row).
    """
    report = (
        recorded
        if isinstance(recorded, FidelityReport)
        else FidelityReport.from_dict(dict(recorded))
    )
    if not report.ok:
        return None, report
    started = time.perf_counter()
    try:
        compiled: Compiled = (
            composite.restore(pipeline, task, report.crossover_rows, report.members)
            if composite.is_composite(pipeline[-1])
            else restore_model(pipeline, task, report.crossover_rows)
        )
    except IMPORT_ERRORS as exc:
        return None, _refused(f"cannot re-create the compiled engine: {exc}", started)
    compile_seconds = time.perf_counter() - started
    rng = np.random.default_rng(0)
    base = synthetic_rows(compiled.estimator, 200, rng)
    missing = isinstance(compiled, CompiledModel) and compiled.plan.routes_missing
    probes = probe_rows(
        compiled.estimator,
        base,
        rng=rng,
        missing=missing,
        n_resampled=200,
        max_threshold_rows=1000,
    )
    rows = np.vstack([base, probes])
    reason, max_diff = _check(compiled, rows)
    if reason is not None:
        return None, _refused(reason, started, compile_seconds, max_diff, len(rows))
    if isinstance(compiled, CompiledModel):  # one row by LightGBM's own, if the same bits
        compiled = with_single_row(compiled, rows)
    return compiled, replace(
        report,
        max_abs_diff=max_diff,
        n_rows_checked=len(rows),
        compile_seconds=compile_seconds,
        check_seconds=time.perf_counter() - started - compile_seconds,
        versions=_versions(),
    )


def _check(
    compiled: Compiled,
    rows: FloatArray,
    before_compiled: Callable[[], None] | None = None,
    fitted: FittedRows | None = None,
    before_own: Callable[[], None] | None = None,
) -> tuple[str | None, float]:
    """Compare the compiled answers with the estimator's own on ``rows``.

    For a compiled tree model, scikit-learn's side runs in a thread of its own while the
    compiled engine answers (both release the GIL in native code: GTIL's threads and,
    say, LightGBM's single predict thread share the job's cores); its failure counts
    only once the compiled side has answered, as when they ran one after the other.
    ``before_compiled`` is called once scikit-learn's side is under way, before GTIL;
    ``before_own`` on scikit-learn's side's thread, before it asks;
    ``fitted``: that side's answers on the training rows among ``rows`` may be the fit's
    own (:mod:`ensembles.inference.fitted_rows`; rows in their own order only).  A
    composite's check runs them in turn (whether scikit-learn is asked for probabilities
    follows from the compiled answer: hard voting has none).
    """
    if not isinstance(compiled, CompiledModel):
        return _compared(compiled, rows, lambda with_proba: _own(compiled, rows, with_proba))
    # Both sides walk the rows in the order of one tree's leaves (ensembles.leaf_order:
    # GTIL's CPU on the forest's 18,000 check rows 2.19 -> 1.20 s), and both answers are
    # put back in the rows' order before they are compared: the same report.
    order = leaf_order(first_tree(compiled.estimator), rows)
    asked = rows if order is None else order.rows(rows)
    known = fitted if order is None else None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="own-answers") as side:
        # A compiled tree model always gives probabilities for a classifier.
        with_proba = compiled.task == "classification"

        def answers() -> Answer:
            if before_own is not None:
                before_own()
            return own_answers(
                compiled.estimator,
                compiled.task,
                asked,
                known,
                lambda part: _own(compiled, part, with_proba),
            )

        own = side.submit(answers)
        if before_compiled is not None:
            before_compiled()
        return _compared(compiled, asked, lambda _with_proba: own.result(), order)


def _own(compiled: Compiled, rows: FloatArray, with_proba: bool) -> Answer:
    """scikit-learn's answers on ``rows``: labels and probabilities from one pass where
    its predict is the first maximum of its probabilities (forests: half the check's
    time); values for a regression."""
    estimator = compiled.estimator
    if compiled.task == "classification":
        return SklearnEngine(estimator, "classification").answer(rows, with_proba=with_proba)
    return Answer(np.asarray(estimator.predict(rows), dtype=np.float64), None, SKLEARN)


def _compared(
    compiled: Compiled,
    rows: FloatArray,
    own_answer: Callable[[bool], Answer],
    order: LeafOrder | None = None,
) -> tuple[str | None, float]:
    """The compiled answers on ``rows`` against ``own_answer(with_proba)`` (``order``:
    ``rows`` are in that order; both answers are put back in the rows' own order, so a
    mismatch names the row it has there)."""

    def back(answers: NDArray[Any]) -> NDArray[Any]:
        return answers if order is None else order.back(answers)

    try:
        if compiled.task == "classification":
            labels, proba = compiled.predict_with_proba(rows)
            labels, proba = back(labels), None if proba is None else back(proba)
            own = _back(own_answer(proba is not None), back)
            if proba is None or own.probabilities is None:  # hard voting: labels only
                none = np.zeros((len(rows), 0))
                return compare(none, none, "probabilities", own.predictions, labels)
            return compare(own.probabilities, proba, "probabilities", own.predictions, labels)
        values = back(compiled.predict(rows))
        expected = _back(own_answer(False), back).predictions
        return compare(expected, values, "predicted values")
    except (*IMPORT_ERRORS, RuntimeError) as exc:
        return f"the compiled engine failed on the check rows: {exc}", float("inf")


def _back(answer: Answer, back: Callable[[NDArray[Any]], NDArray[Any]]) -> Answer:
    """``answer`` with its predictions and probabilities put back by ``back``."""
    proba = None if answer.probabilities is None else back(answer.probabilities)
    return Answer(back(answer.predictions), proba, answer.engine)


def _calibrate(compiled: Compiled, X: pd.DataFrame) -> int:
    """The largest request size (rows) up to which the compiled engine beats scikit-learn.

    Each engine's time for n rows is close to ``a + b n`` (a per call, b per row), so two
    sizes each (best of three), 1 row and a larger one, place the crossover
    ``n = (a_sk - a_c) / (b_c - b_sk)``; both engines take the same preprocessed rows, as
    in the service.  At most ``_CALIBRATION_MAX_ROWS`` (beyond it the line is not
    measured); 0 when scikit-learn is faster even for one row.  About 0.1 s for 100
    trees, where timing every power of two up to 4,096 rows took 0.5 s of each training.

    The larger size is ``_CALIBRATION_LARGE`` (1,024) rows for scikit-learn, whose calls
    cost mostly per call (a forest's per-tree loop): its slope needs the rows; and
    ``_CALIBRATION_COMPILED`` (256) for the compiled engine, whose calls cost mostly per
    row (GTIL walks each row through every tree), a line 256 rows measure as well: for
    a 500-round LightGBM its three 1,024-row timings were 0.18 s of the calibration's
    0.25 s.
    """
    index = np.resize(np.arange(len(X)), _CALIBRATION_LARGE)
    Xt_large = np.asarray(compiled.pipeline[:-1].transform(X.iloc[index]))
    Xt_one = Xt_large[:1]
    Xt_compiled = Xt_large[:_CALIBRATION_COMPILED]
    estimator = compiled.estimator
    ours = [_fastest(compiled.predict, Xt) for Xt in (Xt_one, Xt_compiled)]
    theirs = [_fastest(estimator.predict, Xt) for Xt in (Xt_one, Xt_large)]
    if ours[0] >= theirs[0]:
        return 0
    per_row_ours = (ours[1] - ours[0]) / (len(Xt_compiled) - 1)
    per_row_theirs = (theirs[1] - theirs[0]) / (_CALIBRATION_LARGE - 1)
    if per_row_ours <= per_row_theirs:
        return _CALIBRATION_MAX_ROWS
    crossover = (theirs[0] - ours[0]) / (per_row_ours - per_row_theirs)
    return int(min(max(crossover, 1.0), _CALIBRATION_MAX_ROWS))


def _fastest(predict: Callable[[NDArray[Any]], Any], Xt: NDArray[Any]) -> float:
    """The best of three timings."""
    times: list[float] = []
    for _ in range(3):
        start = time.perf_counter()
        predict(Xt)
        times.append(time.perf_counter() - start)
    return min(times)


def _refused(
    reason: str,
    started: float,
    compile_seconds: float | None = None,
    max_abs_diff: float = 0.0,
    n_rows_checked: int = 0,
    members: tuple[composite.MemberRecord, ...] | list[composite.MemberRecord] = (),
) -> FidelityReport:
    elapsed = time.perf_counter() - started
    spent = elapsed if compile_seconds is None else compile_seconds
    return FidelityReport(
        ok=False,
        engine=None,
        reason=reason,
        max_abs_diff=max_abs_diff,
        n_rows_checked=n_rows_checked,
        compile_seconds=spent,
        check_seconds=elapsed - spent,
        versions=_versions(),
        members=tuple(members),
    )
