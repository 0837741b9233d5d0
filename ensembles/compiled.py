"""Compiled inference for tree ensembles and tree members: GTIL where exact, else scikit-learn.

scikit-learn takes about 4-6 ms to walk 100 trees for one row (Python and joblib overhead
per tree); treelite's General Tree Inference Library (GTIL) walks them in C++ in about
50 us.  GTIL was chosen by measurement (``benchmarks/compiled_floor.py``) over ONNX
Runtime through skl2onnx: faster still (about 8 us a row), but its trees keep leaf values
(and, but for a float64 random forest, thresholds) in float32, so its answers are off by
5e-8 to 3e-4 (refused by the 1e-9 rule), and it cannot convert histogram gradient boosting.
GTIL is not always faster: from a few hundred rows on, scikit-learn's vectorised walk
wins, so each compiled model carries the request size up to which it is used
(``max_rows``, measured on the model when it is compiled).

Only the ensemble step is compiled; preprocessing stays scikit-learn's ColumnTransformer,
except when it passes every numeric column through unchanged, where stacking the columns
is the same thing, faster.  Exactness, as scikit-learn computes it:

* forests and gradient boosting compare ``float32(x) <= threshold`` (scikit-learn casts
  X to float32), so rows are cast the same way before the float64 engine; histogram
  gradient boosting compares float64 values and routes NaN and categories itself, which
  GTIL reproduces once codes its encoder never saw are made NaN, as scikit-learn does;
* boosting's links are applied here to GTIL's raw scores (init/prior included), exactly
  as scikit-learn's losses do: sigmoid (binary), ``sigmoid(2 raw)`` (exponential loss),
  softmax (multiclass), ``exp`` (poisson/gamma); GTIL's own float post-processing is not
  used;
* labels follow each estimator's rule (forests: first maximum of the probabilities;
  gradient boosting: ``raw >= 0``; histogram gradient boosting: ``raw > 0``; multiclass:
  first maximum of raw scores).  Rows whose top two scores are within ``TIE_MARGIN`` —
  ties, where the last bit of a sum decides — get their label from scikit-learn itself.

A compiled model is used only if :func:`compile_model`'s fidelity check passes (see
:mod:`ensembles.fidelity`).  The stored artifact stays the plain scikit-learn Pipeline:
at load time :func:`rebuild` re-creates the engine from it in tens of milliseconds,
trusting the recorded verdict after a quick check on synthetic rows.

Voting, stacking and the bagging family are compiled member by member
(:mod:`ensembles.composite`): tree members by GTIL as above (a bagging of decision trees
as one forest), logistic regression, naive Bayes and linear members by numpy, the rest by
scikit-learn, combined by each estimator's own arithmetic.  Such a composite is compiled
only if at least one member is a tree model GTIL takes, and is held to the same check; its
report lists every member with the engine that answers it (``members``).  The tree
primitives (plans, importing, links, labels) live in :mod:`ensembles.gtil`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import sklearn
import treelite
import treelite.sklearn
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ensembles import composite
from ensembles.builders import Rows, passthrough_columns, preprocess_rows, stack_columns
from ensembles.catalog import Task
from ensembles.composite import CompiledComposite
from ensembles.fidelity import FidelityReport, compare, probe_rows, synthetic_rows
from ensembles.gtil import (
    ENGINE,
    IMPORT_ERRORS,
    TIE_MARGIN,
    Plan,
    cast_rows,
    decide,
    gtil_scores,
    import_model,
    link,
    plan_for,
)

__all__ = [
    "DEFAULT_MAX_ROWS",
    "ENGINE",
    "SKLEARN",
    "TIE_MARGIN",
    "Answer",
    "Compiled",
    "CompiledComposite",
    "CompiledModel",
    "FidelityReport",
    "compile_model",
    "passthrough_columns",
    "predict_rows",
    "rebuild",
    "stack_columns",
]

SKLEARN = "scikit-learn"
DEFAULT_MAX_ROWS = 64  # when not calibrated: below every crossover the benchmark measured
FloatArray = NDArray[np.float64]

_CALIBRATION_LARGE = 1024  # rows of the second size timed by the calibration
_CALIBRATION_MAX_ROWS = 4096  # the largest crossover a calibration reports
_IMPORT_ERRORS = IMPORT_ERRORS


@dataclass(frozen=True, eq=False)
class CompiledModel:
    """A fitted pipeline's ensemble step, compiled; answers on preprocessed rows.

    Pickles by re-creating the engine from the pipeline (the engine's handle is native).
    """

    engine: str
    task: Task
    kind: str  # scikit-learn class of the ensemble step
    max_rows: int  # requests up to this many rows are faster here than in scikit-learn
    pipeline: Pipeline = field(repr=False)
    model: Any = field(repr=False)  # treelite.Model
    plan: Plan = field(repr=False)
    passthrough: tuple[str, ...] | None = field(default=None, repr=False)

    @property
    def estimator(self) -> BaseEstimator:
        return self.pipeline[-1]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.pipeline, self.task, self.max_rows, self.passthrough))

    @property
    def native(self) -> bool:
        """Every tree is walked by GTIL: no scikit-learn call but for rows on a tie."""
        return True

    def use_for(self, n_rows: int) -> bool:
        """Is this engine the faster one for a request of ``n_rows`` rows?"""
        return n_rows <= self.max_rows

    def transform(self, rows: Rows) -> NDArray[Any]:
        """The preprocessed rows (ColumnTransformer's output) for a frame or column arrays."""
        return preprocess_rows(self.pipeline, self.passthrough, rows)

    def predict(self, Xt: ArrayLike) -> NDArray[Any]:
        """Labels (classification) or values (regression), as the estimator's ``predict``."""
        if self.task == "regression":
            return self._values(Xt)
        return self.predict_with_proba(Xt)[0]

    def predict_proba(self, Xt: ArrayLike) -> FloatArray:
        """Class probabilities, as the estimator's ``predict_proba``."""
        return self.predict_with_proba(Xt)[1]

    def predict_with_proba(self, Xt: ArrayLike) -> tuple[NDArray[Any], FloatArray]:
        """Labels and probabilities from one pass over the trees."""
        if self.task != "classification":
            raise ValueError("probabilities apply to classification only")
        estimator = self.estimator
        X = self._input(Xt)
        if X is None:  # non-finite after the float32 cast: scikit-learn decides (or refuses)
            return estimator.predict(Xt), np.asarray(estimator.predict_proba(Xt), np.float64)
        scores = self._scores(X)
        proba = self._link(scores)
        index, ambiguous = decide(proba if self.plan.decision == "proba" else scores, self.plan)
        labels = np.asarray(estimator.classes_).take(index)
        if ambiguous.any():
            labels[ambiguous] = estimator.predict(np.asarray(Xt)[ambiguous])
        return labels, proba

    def _values(self, Xt: ArrayLike) -> FloatArray:
        X = self._input(Xt)
        if X is None:
            return np.asarray(self.estimator.predict(Xt), dtype=np.float64)
        return self._link(self._scores(X))[:, 0]

    def _input(self, Xt: ArrayLike) -> FloatArray | None:
        """The rows the engine must see to compare as scikit-learn does (None: can't)."""
        X = np.asarray(Xt, dtype=np.float64)
        expected = int(self.estimator.n_features_in_)
        if X.ndim != 2 or X.shape[1] != expected:
            shape = X.shape[1] if X.ndim == 2 else X.shape
            raise ValueError(f"X has {shape} features, but {self.kind} expects {expected}")
        return cast_rows(X, self.plan)

    def _scores(self, X: FloatArray) -> FloatArray:
        return gtil_scores(self.model, X, self.plan)

    def _link(self, scores: FloatArray) -> FloatArray:
        return link(scores, self.plan)


Compiled = CompiledModel | CompiledComposite


def _verified_passthrough(pipeline: Pipeline, X: pd.DataFrame) -> tuple[str, ...] | None:
    """The passthrough columns, if stacking them gives exactly the preprocessing's rows."""
    columns = passthrough_columns(pipeline)
    if columns is None:
        return None
    expected = np.asarray(pipeline[:-1].transform(X), dtype=np.float64)
    return columns if np.array_equal(stack_columns(X, columns), expected, equal_nan=True) else None


def _restore(
    pipeline: Pipeline, task: Task, max_rows: int, passthrough: tuple[str, ...] | None
) -> CompiledModel:
    plan = plan_for(pipeline[-1], task)
    if isinstance(plan, str):
        raise ValueError(plan)
    model = import_model(pipeline[-1])
    return CompiledModel(
        ENGINE, task, type(pipeline[-1]).__name__, max_rows, pipeline, model, plan, passthrough
    )


def _versions() -> str:
    return f"treelite {treelite.__version__}, scikit-learn {sklearn.__version__}"


# --- serving ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """Predictions for a request and which engine computed them."""

    predictions: NDArray[Any]  # labels (classes_ values) or regression values
    probabilities: FloatArray | None
    engine: str  # ENGINE or SKLEARN


def predict_rows(
    pipeline: Pipeline, compiled: Compiled | None, rows: Rows, *, with_proba: bool = False
) -> Answer:
    """The pipeline's answer for ``rows``, from the faster engine for this request size.

    ``compiled`` is None when the version has no compiled engine (refused, or no tree
    model): scikit-learn answers, preprocessing once for labels and probabilities.
    """
    if compiled is not None and compiled.use_for(_n_rows(rows)):
        Xt = compiled.transform(rows)
        if compiled.task == "regression":
            return Answer(compiled.predict(Xt), None, compiled.engine)
        labels, proba = compiled.predict_with_proba(Xt)
        return Answer(labels, proba if with_proba else None, compiled.engine)
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(dict(rows))
    rows_t = pipeline[:-1].transform(frame)
    estimator = pipeline[-1]
    wanted = with_proba and hasattr(estimator, "predict_proba")
    sk_proba = np.asarray(estimator.predict_proba(rows_t), np.float64) if wanted else None
    return Answer(np.asarray(estimator.predict(rows_t)), sk_proba, SKLEARN)


def _n_rows(rows: Rows) -> int:
    if isinstance(rows, pd.DataFrame):
        return len(rows)
    return len(np.asarray(next(iter(rows.values())))) if rows else 0


# --- compiling and checking -------------------------------------------------------------


def compile_model(
    pipeline: Pipeline,
    task: Task,
    X_check: pd.DataFrame,
    rng_seed: int = 0,
    *,
    calibrate: bool = True,
) -> tuple[Compiled | None, FidelityReport]:
    """Compile the ensemble step and check it against scikit-learn on ``X_check`` + probes.

    ``X_check`` are the training rows (raw, before preprocessing).  Returns the compiled
    model, or None with the reason, and the report to keep in the version's metadata.
    ``calibrate`` measures the crossover row count on this model (else DEFAULT_MAX_ROWS).
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
    except _IMPORT_ERRORS as exc:
        return None, _refused(f"treelite cannot import {type(estimator).__name__}: {exc}", started)
    compile_seconds = time.perf_counter() - started
    compiled = CompiledModel(
        ENGINE, task, type(estimator).__name__, DEFAULT_MAX_ROWS, pipeline, model, plan
    )
    Xt = np.asarray(pipeline[:-1].transform(X_check), dtype=np.float64)
    if Xt.shape[0] == 0:
        return None, _refused("no rows to check the compiled model on", started, compile_seconds)
    rng = np.random.default_rng(rng_seed)
    rows = np.vstack([Xt, probe_rows(estimator, Xt, rng=rng, missing=not plan.float32)])
    return _checked(compiled, rows, X_check, calibrate, started, compile_seconds)


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
    Xt = np.asarray(pipeline[:-1].transform(X_check), dtype=np.float64)
    rng = np.random.default_rng(rng_seed)
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
) -> tuple[Compiled | None, FidelityReport]:
    """The compiled model if it answers as scikit-learn on ``rows``, calibrated; the report."""
    members = compiled.members if isinstance(compiled, CompiledComposite) else ()
    reason, max_diff = _check(compiled, rows)
    if reason is not None:
        return None, _refused(reason, started, compile_seconds, max_diff, len(rows), members)
    compiled = replace(compiled, passthrough=_verified_passthrough(compiled.pipeline, X_check))
    max_rows = _calibrate(compiled, X_check) if calibrate else DEFAULT_MAX_ROWS
    compiled = replace(compiled, max_rows=max_rows)
    return compiled, FidelityReport(
        ok=True,
        engine=ENGINE,
        reason=None,
        max_abs_diff=max_diff,
        n_rows_checked=len(rows),
        compile_seconds=compile_seconds,
        check_seconds=time.perf_counter() - started - compile_seconds,
        crossover_rows=max_rows,
        versions=_versions(),
        members=tuple(members),
    )


def rebuild(
    pipeline: Pipeline, task: Task, recorded: FidelityReport | Mapping[str, Any]
) -> tuple[Compiled | None, FidelityReport]:
    """Re-create the engine of a stored version from its pipeline and recorded verdict.

    No training rows at load time: after importing, the engine is checked once more on
    synthetic rows built from the trees' own thresholds (tens of milliseconds), so a library
    upgrade that changed the engine's answers is caught rather than served.
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
            composite.restore(pipeline, task, report.crossover_rows, None, report.members)
            if composite.is_composite(pipeline[-1])
            else _restore(pipeline, task, report.crossover_rows, None)
        )
    except _IMPORT_ERRORS as exc:
        return None, _refused(f"cannot re-create the compiled engine: {exc}", started)
    compile_seconds = time.perf_counter() - started
    rng = np.random.default_rng(0)
    base = synthetic_rows(compiled.estimator, 200, rng)
    columns = passthrough_columns(pipeline)
    if columns is not None:  # preprocessed rows are then frames of those columns
        frame = pd.DataFrame(base, columns=list(columns))
        compiled = replace(compiled, passthrough=_verified_passthrough(pipeline, frame))
    missing = isinstance(compiled, CompiledModel) and not compiled.plan.float32
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
    return compiled, replace(
        report,
        max_abs_diff=max_diff,
        n_rows_checked=len(rows),
        compile_seconds=compile_seconds,
        check_seconds=time.perf_counter() - started - compile_seconds,
        versions=_versions(),
    )


def _check(compiled: Compiled, rows: FloatArray) -> tuple[str | None, float]:
    """Compare the compiled answers with the estimator's own on ``rows``."""
    estimator = compiled.estimator
    try:
        if compiled.task == "classification":
            labels, proba = compiled.predict_with_proba(rows)
            expected_labels = estimator.predict(rows)
            if proba is None:  # hard voting: labels only
                none = np.zeros((len(rows), 0))
                return compare(none, none, "probabilities", expected_labels, labels)
            expected = np.asarray(estimator.predict_proba(rows), dtype=np.float64)
            return compare(expected, proba, "probabilities", expected_labels, labels)
        values = compiled.predict(rows)
        expected = np.asarray(estimator.predict(rows), dtype=np.float64)
        return compare(expected, values, "predicted values")
    except (*_IMPORT_ERRORS, RuntimeError) as exc:
        return f"the compiled engine failed on the check rows: {exc}", float("inf")


def _calibrate(compiled: Compiled, X: pd.DataFrame) -> int:
    """The largest request size (rows) up to which the compiled engine beats scikit-learn.

    Each engine's time for n rows is close to ``a + b n`` (a per call, b per row), so two
    sizes each, 1 and ``_CALIBRATION_LARGE`` rows (best of three), place the crossover
    ``n = (a_sk - a_c) / (b_c - b_sk)``; both engines take the same preprocessed rows, as
    in the service.  At most ``_CALIBRATION_MAX_ROWS`` (beyond it the line is not
    measured); 0 when scikit-learn is faster even for one row.  About 0.1 s for 100
    trees, where timing every power of two up to 4,096 rows took 0.5 s of each training.
    """
    index = np.resize(np.arange(len(X)), _CALIBRATION_LARGE)
    Xt_large = compiled.transform(X.iloc[index])
    Xt_one = Xt_large[:1]
    estimator = compiled.estimator
    ours = [_fastest(compiled.predict, Xt) for Xt in (Xt_one, Xt_large)]
    theirs = [_fastest(estimator.predict, Xt) for Xt in (Xt_one, Xt_large)]
    if ours[0] >= theirs[0]:
        return 0
    per_row_ours = (ours[1] - ours[0]) / (_CALIBRATION_LARGE - 1)
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
