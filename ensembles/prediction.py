"""Predictions of a fitted ensemble: input checks, votes, probabilities and spread.

Two paths.  By default the answer is exactly what the stored scikit-learn Pipeline says
(``predict`` / ``predict_proba``): the API promises that predictions equal those of the
stored model, so nothing is recomputed.  Votes, agreement, spread and a per-request voting
override need the members, so they are computed from :func:`ensembles.members.members_of`
on the preprocessed rows, with the arithmetic scikit-learn's ``VotingClassifier`` uses
(``np.average`` with the member weights; ties go to the first maximum, i.e. the first class
in ``classes`` order).  ``votes`` count each member once; a model whose weights are not all
1 also gets the weighted tallies, which a hard vote and ``agreement`` go by.

User rows are checked here rather than in :mod:`ensembles.data`: prediction must name
``("instances", row, column)`` in every problem, collect all problems in one answer, and be
fast, so each column is checked by one plain Python loop and built as one numpy array.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.pipeline import Pipeline

from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.errors import PredictionInputError, Problem, TooLargeError, shown
from ensembles.members import (
    FloatArray,
    IntArray,
    Member,
    has_members,
    member_class_indices,
    member_probabilities,
    member_values,
    members_of,
)
from ensembles.serving import Rows, Servable
from ensembles.signature import ModelSignature

__all__ = [
    "MAX_PROBLEMS",
    "PredictOptions",
    "PredictionArrays",
    "PredictionResult",
    "check_row_count",
    "predict",
    "predict_arrays",
    "rows_to_columns",
    "rows_to_frame",
    "unseen_categories",
]

MAX_PROBLEMS = 50
MAX_UNSEEN_SHOWN = 10  # rows (with their values) an unseen-category warning names
_LARGEST_INT = 10**308  # ints beyond this do not fit a float64
_PLAIN_TYPES: dict[str, tuple[type, ...]] = {"number": (int, float), "bool": (bool,), "str": (str,)}
_NOUNS = {"number": "a number", "bool": "a boolean", "str": "a string"}
_ABSENT = object()  # a record without the column's key
_SKIP = object()  # a row already refused as a whole: its cells are not checked
_EXACT_INT = 2**53  # from here on an int may not survive a float64 (the careful path: int64)
_NUMBERS = frozenset({float, int})
Columns = dict[str, np.ndarray[Any, Any]]


@dataclass(frozen=True)
class PredictOptions:
    """What a prediction request asks for besides the predictions themselves."""

    voting: Literal["hard", "soft"] | None = None
    return_proba: bool = False
    return_votes: bool = False
    return_std: bool = False


@dataclass(frozen=True)
class PredictionResult:
    """Per-row answers (n entries each, in input order) as plain JSON values."""

    predictions: list[Any]
    probabilities: list[list[float]] | None = None
    votes: list[dict[str, int]] | None = None  # each member once
    agreement: list[float] | None = None
    std: list[float] | None = None
    warnings: list[str] = field(default_factory=list)
    engine: str | None = None  # which engine computed the predictions (not part of as_dict)
    # Weighted tallies, only for models whose member weights are not all 1 (see _votes).
    weighted_votes: list[dict[str, float | int]] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Only what was asked for, so responses stay small and fields mean 'requested'."""
        out = _requested(self)
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@dataclass(frozen=True, eq=False)
class PredictionArrays:
    """The answers of :func:`predict_arrays`: what a :class:`PredictionResult` holds, with
    the per-row numbers still in numpy arrays (C-contiguous float64), so a writer encodes
    them directly (orjson's ``OPT_SERIALIZE_NUMPY`` writes the same text as for floats)
    instead of building a Python float per cell first."""

    predictions: list[Any] | FloatArray  # class labels (plain JSON values) or numbers
    probabilities: FloatArray | None = None
    votes: list[dict[str, int]] | None = None
    agreement: FloatArray | None = None
    std: FloatArray | None = None
    engine: str | None = None
    weighted_votes: list[dict[str, float | int]] | None = None

    def as_dict(self) -> dict[str, Any]:
        """Only what was asked for (as :meth:`PredictionResult.as_dict`), arrays as they are."""
        return _requested(self)

    def as_result(self) -> PredictionResult:
        """The same answers as plain JSON values."""

        def plain(values: FloatArray | None) -> Any:
            return None if values is None else values.tolist()

        predictions = self.predictions
        return PredictionResult(
            predictions=predictions if isinstance(predictions, list) else predictions.tolist(),
            probabilities=plain(self.probabilities),
            votes=self.votes,
            agreement=plain(self.agreement),
            std=plain(self.std),
            engine=self.engine,
            weighted_votes=self.weighted_votes,
        )


def _requested(answers: PredictionResult | PredictionArrays) -> dict[str, Any]:
    """The predictions and every per-row answer that was asked for (the others are None)."""
    out: dict[str, Any] = {"predictions": answers.predictions}
    for name in ("probabilities", "votes", "weighted_votes", "agreement", "std"):
        value = getattr(answers, name)
        if value is not None:
            out[name] = value
    return out


def _floats_out(values: Any) -> FloatArray:
    """A C-contiguous float64 array (what orjson's numpy support writes)."""
    return np.ascontiguousarray(values, dtype=np.float64)


# --- rows in ----------------------------------------------------------------------------


# Raw cells per feature column (before any type check), shape problems, extra columns.
_Cells = tuple[dict[str, list[object]], list[Problem], list[str]]


def rows_to_frame(
    signature: ModelSignature, instances: object, max_rows: int | None = None
) -> tuple[pd.DataFrame, list[str]]:
    """The model frame for ``instances`` (records or columnar) and warnings.

    Every problem is collected (up to ``MAX_PROBLEMS``, in row order) into one
    PredictionInputError, so a client fixes a request in one round trip.
    """
    arrays, warnings = rows_to_columns(signature, instances, max_rows)
    frame = pd.DataFrame({n: pd.Series(a, dtype=a.dtype, copy=False) for n, a in arrays.items()})
    return frame, warnings


def rows_to_columns(
    signature: ModelSignature, instances: object, max_rows: int | None = None
) -> tuple[Columns, list[str]]:
    """One numpy array per feature column (in feature order) for ``instances``, and warnings.

    What :func:`rows_to_frame` checks and builds, without the DataFrame: a model whose
    features are all numeric takes these arrays as they are (see ``ensembles.serving``).
    Well-formed numeric input (numbers only, at most 2**53 in magnitude) goes the fast
    way: the cells' types are checked in one pass over all of them and each column
    becomes a float64 array at once; anything else takes the careful path below, which
    names every problem (and gives exactly the same arrays for well-formed input, but
    for integer columns, which it keeps as int64: the same numbers to every model).
    """
    fast = _numeric_columns(signature, instances, max_rows)
    if fast is not None:
        return fast
    names = [f.name for f in signature.features]
    columns, shape_problems, extra = _read_instances(instances, names, max_rows)
    # Sort key (row, column position); shape problems name a row (or -1: the whole input).
    keyed = [((next((x for x in p.loc if isinstance(x, int)), -1), -1), p) for p in shape_problems]
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    total = len(shape_problems)
    for position, column in enumerate(signature.features):
        values = columns.get(column.name)
        if values is None:
            continue  # reported as a missing column already
        bad, n_bad = _scan(column, values, signature.accepts_missing(column))
        total += n_bad
        loc = ("instances", column.name)
        keyed += [((row, position), Problem((loc[0], row, loc[1]), msg)) for row, msg in bad]
        if not total:
            arrays[column.name] = _build(column, values)
    if total:
        keyed.sort(key=lambda item: item[0])
        raise _input_error("instances", [p for _, p in keyed], total)
    return arrays, _extra_warnings(extra) + unseen_categories(signature, arrays)


def _extra_warnings(extra: Sequence[str]) -> list[str]:
    return [f"extra columns ignored: {', '.join(extra)}"] if extra else []


def unseen_categories(signature: ModelSignature, columns: Columns) -> list[str]:
    """One warning per encoded column with cells whose category training never saw.

    The encoders take such a cell without complaint (one-hot: all zeros; histogram
    boosting's ordinal codes: missing), so the prediction stands, but the client should
    know that the model knew nothing of that value.  Only the columns listed in
    ``signature.categories`` are looked at (none for numeric-only models, and none for
    signatures stored before categories were recorded).  One set difference per column
    against ``signature.category_sets`` (hashing in C, measured: 0.3 us per column for
    one row, 0.1 ms for 10,000 rows; pandas' ``isin`` on an object array costs 0.1 ms even
    for one row, and numpy's ``isin`` sorts, which strings mixed with NaN refuse) finds
    whether anything is unseen; only then are the rows looked for.  Missing cells (NaN)
    are never unseen categories.
    """
    known = signature.categories
    if not known:
        return []
    warnings: list[str] = []
    for name, categories in signature.category_sets.items():
        values = columns.get(name)
        if values is None:
            continue
        cells = values.tolist()
        unseen = set(cells).difference(categories)
        if unseen and (unseen := {v for v in unseen if v == v}):  # NaN: a missing cell
            warnings.append(_unseen_warning(name, cells, unseen))
    return warnings


def _unseen_warning(name: str, cells: list[Any], unseen: set[Any]) -> str:
    """``column 'c': 2 rows have categories not seen in training ('x' at row 0, ...)``:
    the first MAX_UNSEEN_SHOWN rows with their values, and how many rows in all."""
    rows = [i for i, v in enumerate(cells) if v in unseen]
    listed = ", ".join(f"{shown(cells[i])} at row {i}" for i in rows[:MAX_UNSEEN_SHOWN])
    if len(rows) > MAX_UNSEEN_SHOWN:
        listed += f", and {len(rows) - MAX_UNSEEN_SHOWN} more rows"
    one = len(rows) == 1
    have = "1 row has a category" if one else f"{len(rows)} rows have categories"
    encoded = "it is" if one else "they are"
    return f"column {name!r}: {have} not seen in training ({listed}); {encoded} encoded as unknown"


def _numeric_columns(
    signature: ModelSignature, instances: object, max_rows: int | None
) -> tuple[Columns, list[str]] | None:
    """The fast path for all-numeric models, or None to take the careful one."""
    features = signature.features
    if not features or any(f.dtype not in NUMERIC_DTYPES for f in features):
        return None
    names = [f.name for f in features]
    if type(instances) is list:
        if not instances or (max_rows is not None and len(instances) > max_rows):
            return None
        return _numeric_records(instances, names)
    if type(instances) is dict and "columns" in instances and "data" in instances:
        data = instances["data"]
        if type(data) is not list or not data or (max_rows is not None and len(data) > max_rows):
            return None
        return _numeric_columnar(instances["columns"], data, names)
    return None


def _numeric_records(records: list[Any], names: list[str]) -> tuple[Columns, list[str]] | None:
    if set(map(type, records)) != {dict}:  # (map and set: one pass in C, not in Python)
        return None
    try:
        cells = [[r[n] for r in records] for n in names]
    except KeyError:
        return None  # a missing column: the careful path names the rows
    table = _floats(cells)  # one row per column
    if table is None:
        return None
    extra: list[str] = []
    if set(map(len, records)) != {len(names)}:
        wanted = set(names)
        extra = list(dict.fromkeys(str(k) for r in records for k in r if k not in wanted))
    return dict(zip(names, table, strict=True)), _extra_warnings(extra)


def _numeric_columnar(
    header: object, data: list[Any], names: list[str]
) -> tuple[Columns, list[str]] | None:
    if type(header) is not list or any(type(c) is not str for c in header):
        return None
    position = {c: j for j, c in enumerate(header)}
    if len(position) != len(header) or any(n not in position for n in names):
        return None
    if set(map(type, data)) != {list} or set(map(len, data)) != {len(header)}:
        return None
    table = _floats(data)  # one row per row
    if table is None:
        return None
    wanted = set(names)
    extra = [c for c in header if c not in wanted]
    return {n: table[:, position[n]] for n in names}, _extra_warnings(extra)


def _floats(nested: list[list[Any]]) -> FloatArray | None:
    """Equal-length lists of cells as one 2-D float64 array, if every cell is a number
    (int or float, never bool or None) that is finite and exact in a float64.

    numpy infers the type while it copies (one pass in C instead of a type check per
    cell in Python): a float or int array means every cell was a number or a bool
    (strings, None, huge ints and nested lists give other dtypes or fail).  Bools become
    0 or 1, so only cells equal to 0 or 1 are looked at again.  A magnitude of 2**53 or
    more may be an int that a float64 rounds, so it takes the careful path too.
    """
    try:
        table = np.array(nested)
    except (OverflowError, ValueError, TypeError):
        return None
    if table.ndim != 2 or table.dtype.kind not in "fi":
        return None
    table = table.astype(np.float64, copy=False)
    if not table.size or not np.isfinite(table).all():
        return None
    if np.abs(table).max() >= _EXACT_INT or _has_bools(nested, table):
        return None
    return table


def _has_bools(nested: list[list[Any]], table: FloatArray) -> bool:
    """Was any cell of ``table`` (built from ``nested``) a bool rather than a number?"""
    candidates = np.flatnonzero((table == 0) | (table == 1))
    if 8 * candidates.size > table.size:  # mostly zeros and ones: look at every cell
        types = set(map(type, chain.from_iterable(nested)))
        return not types <= _NUMBERS and any(issubclass(t, bool | np.bool_) for t in types)
    rows, columns = np.divmod(candidates, table.shape[1])
    return any(
        isinstance(nested[i][j], bool | np.bool_)
        for i, j in zip(rows.tolist(), columns.tolist(), strict=True)
    )


def _read_instances(instances: object, names: Sequence[str], max_rows: int | None) -> _Cells:
    """Records or columnar input -> cells per feature column, plus shape problems."""
    if isinstance(instances, list):
        check_row_count(len(instances), max_rows)
        return _from_records(instances, names)
    if isinstance(instances, dict) and "columns" in instances and "data" in instances:
        data = instances["data"]
        if isinstance(data, list):
            check_row_count(len(data), max_rows)
        return _from_columnar(instances["columns"], data, names)
    msg = 'expected a list of records or {"columns": [...], "data": [[...], ...]}'
    raise PredictionInputError("instances have the wrong shape", [Problem(("instances",), msg)])


def check_row_count(n_rows: int, max_rows: int | None) -> None:
    """At least one row and at most ``max_rows`` (413 above, as TooLargeError)."""
    if max_rows is not None and n_rows > max_rows:
        msg = f"{n_rows} rows; at most {max_rows} rows per request"
        raise TooLargeError("too many rows in one request", [Problem(("instances",), msg)])
    if n_rows == 0:
        msg = "no instances: send at least one row"
        raise PredictionInputError("no instances", [Problem(("instances",), msg)])


def _from_records(records: list[object], names: Sequence[str]) -> _Cells:
    wanted = set(names)
    problems: list[Problem] = []
    extra: dict[str, None] = {}
    rows: list[dict[Any, Any] | None] = []
    for i, record in enumerate(records):
        rows.append(record if isinstance(record, dict) else None)
        if isinstance(record, dict):
            extra.update(dict.fromkeys(str(k) for k in record if k not in wanted))
        else:
            problems.append(Problem(("instances", i), f"expected an object, got {shown(record)}"))
    columns = {n: [_SKIP if r is None else r.get(n, _ABSENT) for r in rows] for n in names}
    return columns, problems, list(extra)


def _from_columnar(header: object, data: object, names: Sequence[str]) -> _Cells:
    problems: list[Problem] = []
    if not isinstance(header, list) or not all(isinstance(c, str) for c in header):
        problems.append(Problem(("instances", "columns"), "expected a list of column names"))
    if not isinstance(data, list):
        problems.append(Problem(("instances", "data"), "expected a list of rows (lists of values)"))
    if problems or not isinstance(header, list) or not isinstance(data, list):
        return {}, problems, []
    position: dict[str, int] = {}
    for j, name in enumerate(header):
        if name in position:
            problems.append(Problem(("instances", "columns"), f"duplicate column {name!r}"))
        position.setdefault(name, j)
    missing = [n for n in names if n not in position]
    problems += [Problem(("instances", "columns"), f"missing column {n!r}") for n in missing]
    rows: list[list[Any] | None] = []
    for i, row in enumerate(data):
        ok = isinstance(row, list) and len(row) == len(header)
        rows.append(row if ok else None)
        if not ok:
            got = f"{len(row)} values" if isinstance(row, list) else shown(row)
            msg = f"expected a list of {len(header)} values (one per column), got {got}"
            problems.append(Problem(("instances", "data", i), msg))
    columns = {
        n: [_SKIP if r is None else r[position[n]] for r in rows] for n in names if n in position
    }
    extra = [c for c in position if c not in set(names)]
    return columns, problems, extra


def _family(column: FeatureColumn) -> str:
    """Which JSON values a column takes (builders treat every non-numeric as a category)."""
    if column.dtype in NUMERIC_DTYPES:
        return "number"
    return "bool" if column.dtype == "bool" else "str"


def _scan(
    column: FeatureColumn, cells: list[object], allow_missing: bool
) -> tuple[list[tuple[int, str]], int]:
    """The first MAX_PROBLEMS bad cells of one column (row, message) and how many in all.

    Only the first MAX_PROBLEMS of a column can be among the first MAX_PROBLEMS overall in
    row order, so keeping more would only cost memory on a huge bad request.
    """
    family = _family(column)
    plain = _PLAIN_TYPES[family]
    missing = _cannot_be_missing(column)
    bad: list[tuple[int, str]] = []
    n_bad = 0
    for row, value in enumerate(cells):
        kind = type(value)
        if kind in plain:
            msg = _number_problem(value) if family == "number" else None
        elif value is None:
            msg = None if allow_missing else missing
        elif value is _SKIP:
            msg = None
        elif value is _ABSENT:
            msg = f"missing column {column.name!r}"
        else:
            msg = _unusual_value_problem(value, family)
        if msg is not None:
            n_bad += 1
            if len(bad) < MAX_PROBLEMS:
                bad.append((row, msg))
    return bad, n_bad


def _cannot_be_missing(column: FeatureColumn) -> str:
    return (
        f"column {column.name!r} cannot be missing for this model"
        " (it had no missing values in training)"
    )


def _number_problem(value: object) -> str | None:
    """JSON allows NaN, Infinity and huge integers; none of them is a usable feature value."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if isinstance(value, int) and not -_LARGEST_INT <= value <= _LARGEST_INT:
        return "expected a finite number, got an integer too large for a float64"
    return None


def _unusual_value_problem(value: object, family: str) -> str | None:
    """Subclasses and numpy scalars (Python callers); bool is never a number."""
    is_bool = isinstance(value, bool | np.bool_)
    number = isinstance(value, int | float | np.integer | np.floating) and not is_bool
    if family == "number" and number:
        return _number_problem(value if isinstance(value, int) else float(value))  # type: ignore[arg-type]
    accepted = is_bool if family == "bool" else family == "str" and isinstance(value, str)
    return None if accepted else f"expected {_NOUNS[family]}, got {shown(value)}"


def _build(column: FeatureColumn, cells: list[object]) -> np.ndarray[Any, Any]:
    """Checked cells -> the dtype training used (see ensembles.data.to_model_frame)."""
    family = _family(column)
    if family == "number":
        if column.dtype == "int64" and all(type(v) is int for v in cells):
            try:
                return np.array(cells, dtype=np.int64)
            except OverflowError:
                pass  # beyond int64: a float column, as pandas would make it
        return np.array(cells, dtype=np.float64)  # None -> NaN
    out = np.empty(len(cells), dtype=object)
    if family == "bool":
        out[:] = [np.nan if v is None else bool(v) for v in cells]
    else:
        out[:] = [np.nan if v is None else v for v in cells]
    return out


def _input_error(what: str, problems: list[Problem], total: int) -> PredictionInputError:
    shown = problems[:MAX_PROBLEMS]
    more = f" (first {MAX_PROBLEMS} shown)" if total > MAX_PROBLEMS else ""
    plural = "s" if total != 1 else ""
    return PredictionInputError(f"{total} problem{plural} in the {what}{more}", shown)


# --- predictions out --------------------------------------------------------------------


def predict(
    model: Pipeline | Servable,
    signature: ModelSignature,
    rows: Rows,
    options: PredictOptions,
) -> PredictionResult:
    """Predictions for ``rows`` (from :func:`rows_to_frame` or :func:`rows_to_columns`)
    with what ``options`` ask.

    ``model`` is the stored Pipeline, or its :class:`~ensembles.serving.Servable` form:
    then the default answer comes from the faster engine for the request's size (the
    compiled one when the version has one), and rows need not be a DataFrame.  Votes,
    spread and a voting override always come from scikit-learn's members.

    Options the model cannot honour raise PredictionInputError at ``("options", name)``
    before any work.  ``warnings`` stays empty: the caller adds those of rows_to_frame
    (``dataclasses.replace(result, warnings=...)``), as only it has seen the raw input.
    """
    return predict_arrays(model, signature, rows, options).as_result()


def predict_arrays(
    model: Pipeline | Servable,
    signature: ModelSignature,
    rows: Rows,
    options: PredictOptions,
) -> PredictionArrays:
    """:func:`predict`, with the per-row numbers left in numpy arrays (for fast writers)."""
    servable = model if isinstance(model, Servable) else Servable(model, signature.task)
    pipeline = servable.pipeline
    override = None if options.voting in (None, signature.voting) else options.voting
    needs_members = override is not None or options.return_votes or options.return_std
    members = members_of(pipeline[-1], with_samples=False) if needs_members else []
    problems = _option_problems(signature, pipeline, members, options, override)
    if problems:
        raise _input_error("options", problems, len(problems))
    if signature.task == "regression":
        return _regress(servable, members, rows, options)
    return _classify(servable, signature, members, rows, options, override)


def _option_problems(
    signature: ModelSignature,
    pipeline: Pipeline,
    members: list[Member],
    options: PredictOptions,
    override: str | None,
) -> list[Problem]:
    """Every option the model cannot honour, each at its own field path."""
    kind, classifier = signature.kind, signature.task == "classification"
    voters = has_members(pipeline[-1]) and signature.supports_voting_override
    not_voters = f"{kind} does not combine members by vote"
    problems: list[Problem] = []

    def refuse(option: str, msg: str) -> None:
        problems.append(Problem(("options", option), msg))

    if override not in (None, "hard", "soft"):
        refuse("voting", "must be 'hard' or 'soft'")
    elif override is not None and not classifier:
        refuse("voting", "voting applies to classification only")
    elif override is not None and not voters:
        refuse("voting", f"{not_voters}, so its voting cannot be changed")
    elif override == "soft" and (blind := _without_probabilities(members)):
        refuse("voting", f"soft voting needs probabilities from every member; {blind} give none")
    if options.return_votes and not (classifier and voters):
        refuse("return_votes", not_voters if classifier else "votes apply to classification only")
    if options.return_std and not (voters and not classifier):
        msg = f"{kind} has no members whose predictions spread"
        refuse("return_std", "std applies to regression only" if classifier else msg)
    if options.return_proba and not (
        classifier and (override is not None or hasattr(pipeline, "predict_proba"))
    ):
        msg = f"this {kind} model gives no probabilities"
        if classifier and voters and signature.voting == "hard":
            msg += " (hard voting); set options.voting to 'soft' for averaged probabilities"
        refuse("return_proba", msg if classifier else "probabilities apply to classification only")
    return problems


def _without_probabilities(members: list[Member]) -> str:
    names = [m.name for m in members if not hasattr(m.estimator, "predict_proba")]
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _member_rows(servable: Servable, rows: Rows) -> FloatArray:
    """Members were fitted on the preprocessed matrix, so they must be fed that matrix."""
    return np.asarray(servable.transform(rows), dtype=np.float64)


def _classify(
    servable: Servable,
    signature: ModelSignature,
    members: list[Member],
    rows: Rows,
    options: PredictOptions,
    override: str | None,
) -> PredictionArrays:
    """Default: the pipeline's own answer; with an override, the members' combination."""
    pipeline = servable.pipeline
    classes = _class_labels(signature, pipeline)
    k = len(classes)
    Xt = _member_rows(servable, rows) if override or options.return_votes else None
    tallies = None
    if Xt is not None and (override == "hard" or options.return_votes):
        tallies = _vote_tallies(members, Xt, k)
    proba: FloatArray | None = None
    engine = "scikit-learn"
    if override == "hard" and tallies is not None:
        weighted = tallies[1]  # a hard vote is by weight, as VotingClassifier's
        proba = weighted / _total_weight(members)  # weighted vote shares
        index = np.argmax(weighted, axis=1)  # first maximum: ties go to the first class
    elif override == "soft" and Xt is not None:
        proba = _mean_probabilities(members, Xt, k)
        index = np.argmax(proba, axis=1)
    else:
        answer = servable.answer(rows, with_proba=options.return_proba)
        index = _positions(pipeline.classes_, answer.predictions)
        proba, engine = answer.probabilities, answer.engine
    votes, weighted_votes, agreement = None, None, None
    if options.return_votes and tallies is not None:
        votes, weighted_votes, agreement = _votes(*tallies, index, classes, members)
    return PredictionArrays(
        predictions=[classes[i] for i in index.tolist()],
        probabilities=_floats_out(proba) if options.return_proba and proba is not None else None,
        votes=votes,
        agreement=agreement,
        engine=engine,
        weighted_votes=weighted_votes,
    )


def _class_labels(signature: ModelSignature, pipeline: Pipeline) -> list[Any]:
    """The signature's JSON labels (same order as classes_), else classes_ made plain."""
    if signature.classes is not None:
        return list(signature.classes)
    return list(np.asarray(pipeline.classes_).tolist())


def _positions(classes: Any, predicted: Any) -> IntArray:
    """Index of each predicted label in ``classes_`` (checked, so no sortedness is assumed:
    scikit-learn's ``classes_`` are sorted, and a binary search finds them at once)."""
    known = np.asarray(classes)
    labels = np.asarray(predicted)
    if known.size and labels.dtype == known.dtype and labels.dtype != object:
        index = np.minimum(np.searchsorted(known, labels), known.size - 1)
        if np.array_equal(known[index], labels):
            return index.astype(np.int64)
    lookup = {label: i for i, label in enumerate(known.tolist())}
    values = labels.tolist()
    return np.fromiter((lookup[label] for label in values), dtype=np.int64, count=len(values))


def _total_weight(members: list[Member]) -> float:
    return float(sum(m.weight for m in members))


def _weighted(members: list[Member]) -> bool:
    """Do the members' weights make the weighted tallies differ from the plain counts?"""
    return any(m.weight != 1.0 for m in members)


def _vote_tallies(
    members: list[Member], Xt: FloatArray, n_classes: int
) -> tuple[IntArray, FloatArray]:
    """Per row and class: how many members voted for it (each once), and the weighted
    tally (added in member order, as ``np.bincount`` with weights does; the same array
    as the counts, as floats, when every weight is 1)."""
    n = Xt.shape[0]
    counts = np.zeros((n, n_classes), dtype=np.int64)
    weighted = np.zeros((n, n_classes)) if _weighted(members) else None
    rows = np.arange(n)
    for member in members:
        picked = member_class_indices(member, Xt)
        counts[rows, picked] += 1
        if weighted is not None:
            weighted[rows, picked] += member.weight
    return counts, counts.astype(np.float64) if weighted is None else weighted


def _mean_probabilities(members: list[Member], Xt: FloatArray, n_classes: int) -> FloatArray:
    """VotingClassifier's soft vote: ``np.average`` over members, weights None when uniform."""
    stacked = np.asarray([member_probabilities(m, Xt, n_classes) for m in members])
    weights = [m.weight for m in members]
    uniform = all(w == 1.0 for w in weights)
    return np.asarray(np.average(stacked, axis=0, weights=None if uniform else weights))


def _votes(
    counts: IntArray,
    weighted: FloatArray,
    index: IntArray,
    classes: list[Any],
    members: list[Member],
) -> tuple[list[dict[str, int]], list[dict[str, float | int]] | None, FloatArray]:
    """Per row: {label: members} (each member once: integers summing to the number of
    members), the weighted tallies of the same classes (None unless some weight is not 1:
    they would repeat the counts), and the predicted class's share of the weighted tally.

    Only classes with at least one vote appear.  Weighted tallies are integers when every
    weight is whole, as the weights were given.
    """
    total = _total_weight(members)
    picked = weighted[np.arange(len(index)), index]
    agreement = _floats_out(picked / total if total > 0 else np.zeros_like(picked))
    keys = [str(c) for c in classes]
    table = counts.tolist()
    votes = [{keys[j]: v for j, v in enumerate(row) if v > 0} for row in table]
    if not _weighted(members):
        return votes, None, agreement
    whole = all(float(m.weight).is_integer() for m in members)
    tallies = (weighted.astype(np.int64) if whole else weighted).tolist()
    weighted_votes: list[dict[str, float | int]] = [
        {key: tally[j] for j, key in enumerate(keys) if row[j] > 0}
        for row, tally in zip(table, tallies, strict=True)
    ]
    return votes, weighted_votes, agreement


def _regress(
    servable: Servable, members: list[Member], rows: Rows, options: PredictOptions
) -> PredictionArrays:
    """Regression: the pipeline's predictions; std is unweighted over members (ddof 0)."""
    answer = servable.answer(rows)
    std = None
    if options.return_std:
        Xt = _member_rows(servable, rows)
        values = np.asarray([member_values(m, Xt) for m in members])
        std = _floats_out(np.std(values, axis=0))
    return PredictionArrays(_floats_out(answer.predictions), std=std, engine=answer.engine)
