"""Compiled inference for tree ensembles: treelite's GTIL where it is exact, else scikit-learn.

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
trusting the recorded verdict after a quick check on synthetic rows.  Tree members inside
bagging, voting or stacking are not compiled (scikit-learn serves those kinds).
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
import sklearn
import treelite
import treelite.gtil
import treelite.sklearn
from numpy.typing import ArrayLike, NDArray
from scipy.special import expit
from sklearn.base import BaseEstimator
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.pipeline import Pipeline

from ensembles.catalog import Task
from ensembles.fidelity import FidelityReport, compare, probe_rows, synthetic_rows

__all__ = [
    "DEFAULT_MAX_ROWS",
    "ENGINE",
    "SKLEARN",
    "TIE_MARGIN",
    "Answer",
    "CompiledModel",
    "FidelityReport",
    "compile_model",
    "passthrough_columns",
    "predict_rows",
    "rebuild",
    "stack_columns",
]

ENGINE = "treelite-gtil"
SKLEARN = "scikit-learn"
TIE_MARGIN = 1e-9
DEFAULT_MAX_ROWS = 64  # when not calibrated: below every crossover the benchmark measured
FloatArray = NDArray[np.float64]
Rows = pd.DataFrame | Mapping[str, ArrayLike]

_FORESTS = (
    RandomForestClassifier,
    RandomForestRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
)
_BOOSTING = (GradientBoostingClassifier, GradientBoostingRegressor)
_HISTOGRAM = (HistGradientBoostingClassifier, HistGradientBoostingRegressor)
_CALIBRATION_LARGE = 1024  # rows of the second size timed by the calibration
_CALIBRATION_MAX_ROWS = 4096  # the largest crossover a calibration reports
_IMPORT_ERRORS = (treelite.TreeliteError, NotImplementedError, ValueError, TypeError)

Link = Literal["identity", "exp", "expit", "expit2", "softmax"]
Decision = Literal["proba", "raw_ge", "raw_gt", "raw_argmax", "none"]


@dataclass(frozen=True)
class _Plan:
    """How GTIL's output becomes the estimator's own answers."""

    float32: bool  # scikit-learn casts X to float32 before comparing
    margin: bool  # read raw scores and apply ``link`` here
    link: Link
    decision: Decision  # which scores the label is the (first) maximum of
    # Histogram boosting's categorical columns and their known codes: any other value is
    # unknown, which its own encoder turns into NaN (missing) and GTIL would not.
    categories: tuple[tuple[int, FloatArray], ...] = ()


def _plan_for(estimator: BaseEstimator, task: Task) -> _Plan | str:
    """The plan for a supported kind, else the reason it is not compiled."""
    name = type(estimator).__name__
    classifier = task == "classification"
    if classifier != hasattr(estimator, "classes_"):
        return f"{name} does not match the task {task!r}"
    if isinstance(estimator, _FORESTS):
        return _Plan(True, False, "identity", "proba" if classifier else "none")
    n_classes = len(getattr(estimator, "classes_", ()))
    if isinstance(estimator, _BOOSTING):
        if not classifier:
            return _Plan(True, True, "identity", "none")
        if n_classes > 2:
            return _Plan(True, True, "softmax", "raw_argmax")
        link: Link = "expit2" if estimator.loss == "exponential" else "expit"
        return _Plan(True, True, link, "raw_ge")
    if isinstance(estimator, _HISTOGRAM):
        categories = _known_categories(estimator)
        if isinstance(categories, str):
            return categories
        if classifier:  # labels: raw > 0 (binary), first maximum of raw scores (multiclass)
            if n_classes > 2:
                return _Plan(False, True, "softmax", "raw_argmax", categories)
            return _Plan(False, True, "expit", "raw_gt", categories)
        if estimator.loss in ("poisson", "gamma"):
            return _Plan(False, True, "exp", "none", categories)
        if estimator.loss in ("squared_error", "absolute_error", "quantile"):
            return _Plan(False, True, "identity", "none", categories)
        return f"{name} with loss {estimator.loss!r} has no known inverse link"
    return f"{name} is not a tree ensemble the compiled engine supports"


def _known_categories(estimator: BaseEstimator) -> tuple[tuple[int, FloatArray], ...] | str:
    """Each categorical column's known codes, read from histogram boosting's own encoder.

    scikit-learn exposes only ``is_categorical_``; the codes live in the private
    ``_preprocessor`` (which treelite's importer reads too).  If it moves, the model is
    refused rather than guessed at.
    """
    is_categorical = getattr(estimator, "is_categorical_", None)
    if is_categorical is None or not np.any(is_categorical):
        return ()
    try:
        encoder = estimator._preprocessor.named_transformers_["encoder"]
        known = [np.asarray(c, dtype=np.float64) for c in encoder.categories_]
    except (AttributeError, KeyError, TypeError, ValueError):
        return "cannot read the known categories of this histogram gradient boosting"
    columns = np.flatnonzero(is_categorical).tolist()
    if len(columns) != len(known):
        return "its categorical columns and known categories do not line up"
    return tuple((j, codes[~np.isnan(codes)]) for j, codes in zip(columns, known, strict=True))


def _import(estimator: BaseEstimator) -> Any:
    """The treelite model of a fitted estimator (raises one of ``_IMPORT_ERRORS``)."""
    source = estimator
    fitted = len(getattr(estimator, "estimators_", ()))
    if isinstance(estimator, _BOOSTING + _FORESTS) and fitted != estimator.n_estimators:
        # Early stopping (or a warm start) leaves fewer stages than n_estimators, which
        # treelite's importer reads: give it a shallow copy that says how many there are.
        source = copy.copy(estimator)
        source.n_estimators = fitted
    with warnings.catch_warnings():
        # treelite casts histogram boosting's category lists (NaN included) to int64.
        warnings.simplefilter("ignore", RuntimeWarning)
        return treelite.sklearn.import_model(source)


def _versions() -> str:
    return f"treelite {treelite.__version__}, scikit-learn {sklearn.__version__}"


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
    plan: _Plan = field(repr=False)
    passthrough: tuple[str, ...] | None = field(default=None, repr=False)

    @property
    def estimator(self) -> BaseEstimator:
        return self.pipeline[-1]

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.pipeline, self.task, self.max_rows, self.passthrough))

    def use_for(self, n_rows: int) -> bool:
        """Is this engine the faster one for a request of ``n_rows`` rows?"""
        return n_rows <= self.max_rows

    def transform(self, rows: Rows) -> NDArray[Any]:
        """The preprocessed rows (ColumnTransformer's output) for a frame or column arrays."""
        if self.passthrough is not None:
            return stack_columns(rows, self.passthrough)
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(dict(rows))
        return np.asarray(self.pipeline[:-1].transform(frame))

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
        index, ambiguous = _decide(proba if self.plan.decision == "proba" else scores, self.plan)
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
        if not self.plan.float32:
            return _unknown_as_missing(X, self.plan.categories)
        with np.errstate(over="ignore", invalid="ignore"):
            X32 = X.astype(np.float32)
        if not np.isfinite(X32).all():
            return None
        return X32.astype(np.float64)

    def _scores(self, X: FloatArray) -> FloatArray:
        out = treelite.gtil.predict(self.model, X, nthread=1, pred_margin=self.plan.margin)
        return np.asarray(out, dtype=np.float64).reshape(X.shape[0], -1)

    def _link(self, scores: FloatArray) -> FloatArray:
        link = self.plan.link
        if link == "identity":
            return scores
        if link == "exp":
            return np.exp(scores)
        if link == "softmax":
            shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
            return np.asarray(shifted / shifted.sum(axis=1, keepdims=True))
        p1 = np.asarray(expit(2.0 * scores[:, 0] if link == "expit2" else scores[:, 0]))
        return np.column_stack([1.0 - p1, p1])


def _unknown_as_missing(
    X: FloatArray, categories: tuple[tuple[int, FloatArray], ...]
) -> FloatArray:
    """Codes a categorical column never had in training become NaN, as in scikit-learn."""
    if not categories:
        return np.ascontiguousarray(X)
    out = np.array(X, dtype=np.float64, order="C", copy=True)
    for j, known in categories:
        column = out[:, j]
        column[~np.isin(column, known) & ~np.isnan(column)] = np.nan
    return out


def _decide(scores: FloatArray, plan: _Plan) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
    """Class index per row by the estimator's rule, and rows too close to call."""
    if plan.decision in ("raw_ge", "raw_gt"):
        raw = scores[:, 0]
        positive = raw >= 0 if plan.decision == "raw_ge" else raw > 0
        return positive.astype(np.intp), np.abs(raw) <= TIE_MARGIN
    index = np.argmax(scores, axis=1)
    if scores.shape[1] < 2:
        return index, np.zeros(len(index), dtype=bool)
    top = np.partition(scores, -2, axis=1)
    return index, top[:, -1] - top[:, -2] <= TIE_MARGIN


def stack_columns(rows: Rows, columns: tuple[str, ...]) -> FloatArray:
    """What a passthrough ColumnTransformer gives, as float64 (pandas' own block copy)."""
    if isinstance(rows, pd.DataFrame):
        frame = rows if tuple(rows.columns) == columns else rows[list(columns)]
        return frame.to_numpy(dtype=np.float64)
    return np.column_stack([np.asarray(rows[c], dtype=np.float64) for c in columns])


def passthrough_columns(pipeline: Pipeline) -> tuple[str, ...] | None:
    """The columns, when preprocessing only passes numeric columns through in order."""
    if len(pipeline) != 2 or not isinstance(pipeline[0], ColumnTransformer):
        return None
    transformers = pipeline[0].transformers  # as built: fitting swaps in FunctionTransformer
    if pipeline[0].remainder != "drop" or len(transformers) != 1:
        return None
    if transformers[0][1] != "passthrough":
        return None
    columns = list(transformers[0][2])
    return tuple(columns) if all(isinstance(c, str) for c in columns) else None


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
    plan = _plan_for(pipeline[-1], task)
    if isinstance(plan, str):
        raise ValueError(plan)
    model = _import(pipeline[-1])
    return CompiledModel(
        ENGINE, task, type(pipeline[-1]).__name__, max_rows, pipeline, model, plan, passthrough
    )


# --- serving ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """Predictions for a request and which engine computed them."""

    predictions: NDArray[Any]  # labels (classes_ values) or regression values
    probabilities: FloatArray | None
    engine: str  # ENGINE or SKLEARN


def predict_rows(
    pipeline: Pipeline, compiled: CompiledModel | None, rows: Rows, *, with_proba: bool = False
) -> Answer:
    """The pipeline's answer for ``rows``, from the faster engine for this request size.

    ``compiled`` is None when the version has no compiled engine (refused, or not a tree
    ensemble): scikit-learn answers, preprocessing once for labels and probabilities.
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
) -> tuple[CompiledModel | None, FidelityReport]:
    """Compile the ensemble step and check it against scikit-learn on ``X_check`` + probes.

    ``X_check`` are the training rows (raw, before preprocessing).  Returns the compiled
    model, or None with the reason, and the report to keep in the version's metadata.
    ``calibrate`` measures the crossover row count on this model (else DEFAULT_MAX_ROWS).
    """
    started = time.perf_counter()
    estimator = pipeline[-1]
    plan = _plan_for(estimator, task)
    if isinstance(plan, str):
        return None, _refused(plan, started)
    try:
        model = _import(estimator)
    except _IMPORT_ERRORS as exc:
        return None, _refused(f"treelite cannot import {type(estimator).__name__}: {exc}", started)
    compile_seconds = time.perf_counter() - started
    compiled = CompiledModel(
        ENGINE, task, type(estimator).__name__, DEFAULT_MAX_ROWS, pipeline, model, plan
    )
    Xt = np.asarray(pipeline[:-1].transform(X_check), dtype=np.float64)
    if Xt.shape[0] == 0:
        return None, _refused("no rows to check the compiled model on", started, compile_seconds)
    rows = np.vstack(
        [Xt, probe_rows(estimator, Xt, float32=plan.float32, rng=np.random.default_rng(rng_seed))]
    )
    reason, max_diff = _check(compiled, rows)
    if reason is not None:
        return None, _refused(reason, started, compile_seconds, max_diff, len(rows))
    compiled = replace(compiled, passthrough=_verified_passthrough(pipeline, X_check))
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
    )


def rebuild(
    pipeline: Pipeline, task: Task, recorded: FidelityReport | Mapping[str, Any]
) -> tuple[CompiledModel | None, FidelityReport]:
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
        compiled = _restore(pipeline, task, report.crossover_rows, None)
    except _IMPORT_ERRORS as exc:
        return None, _refused(f"cannot re-create the compiled engine: {exc}", started)
    compile_seconds = time.perf_counter() - started
    rng = np.random.default_rng(0)
    base = synthetic_rows(compiled.estimator, 200, rng)
    columns = passthrough_columns(pipeline)
    if columns is not None:  # preprocessed rows are then frames of those columns
        frame = pd.DataFrame(base, columns=list(columns))
        compiled = replace(compiled, passthrough=_verified_passthrough(pipeline, frame))
    probes = probe_rows(
        compiled.estimator,
        base,
        float32=compiled.plan.float32,
        rng=rng,
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


def _check(compiled: CompiledModel, rows: FloatArray) -> tuple[str | None, float]:
    """Compare the compiled answers with the estimator's own on ``rows``."""
    estimator = compiled.estimator
    try:
        if compiled.task == "classification":
            labels, proba = compiled.predict_with_proba(rows)
            expected = np.asarray(estimator.predict_proba(rows), dtype=np.float64)
            return compare(expected, proba, "probabilities", estimator.predict(rows), labels)
        values = compiled.predict(rows)
        expected = np.asarray(estimator.predict(rows), dtype=np.float64)
        return compare(expected, values, "predicted values")
    except (*_IMPORT_ERRORS, RuntimeError) as exc:
        return f"the compiled engine failed on the check rows: {exc}", float("inf")


def _calibrate(compiled: CompiledModel, X: pd.DataFrame) -> int:
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
    )
