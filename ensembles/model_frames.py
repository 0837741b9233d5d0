"""Canonical frames -> the typed frame a model takes, at training and at prediction."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ensembles.data import (
    ColumnDtype,
    cell_error,
    finite_floats,
    is_missing,
    problems_error,
)
from ensembles.errors import DataError, Problem, shown
from ensembles.suggestions import did_you_mean


def _wrong_type(row: int, name: str, expected: str, value: object) -> DataError:
    return cell_error(row, name, f"expected {expected}, got {type(value).__name__} {shown(value)}")


def _model_numbers(name: str, s: pd.Series, dtype: ColumnDtype) -> np.ndarray[Any, Any]:
    """Complete int64 columns pass untouched (fidelity with plain scikit-learn); the rest
    become float64 with NaN for missing."""
    if pd.api.types.is_integer_dtype(s.dtype) and not bool(s.isna().any()):
        return s.to_numpy(dtype=dtype)
    if pd.api.types.is_float_dtype(s.dtype) or pd.api.types.is_integer_dtype(s.dtype):
        return finite_floats(name, s.to_numpy(dtype="float64", na_value=np.nan))
    out: list[float] = []
    for row, value in enumerate(s.to_numpy(dtype=object)):
        if is_missing(value):
            out.append(math.nan)
        elif isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
            raise _wrong_type(row, name, "a number", value)
        else:
            out.append(float(value))
    if dtype == "int64" and not any(map(math.isnan, out)) and all(v.is_integer() for v in out):
        return np.array(out, dtype="int64")
    return finite_floats(name, np.array(out, dtype="float64"))


def _model_objects(name: str, s: pd.Series, dtype: ColumnDtype) -> np.ndarray[Any, Any]:
    """Python bools or strs in an object array, np.nan for missing: OneHotEncoder's NaN."""
    expected: tuple[type, ...] = (bool, np.bool_) if dtype == "bool" else (str,)
    out: list[object] = []
    for row, value in enumerate(s.to_numpy(dtype=object)):
        if is_missing(value):
            out.append(np.nan)
        elif isinstance(value, expected):
            out.append(bool(value) if dtype == "bool" else value)
        else:
            raise _wrong_type(row, name, "a boolean" if dtype == "bool" else "a string", value)
    return np.array(out, dtype=object)


def _model_column(name: str, frame: pd.DataFrame, dtype: ColumnDtype) -> np.ndarray[Any, Any]:
    if name not in frame.columns:
        sent = [c for c in frame.columns if isinstance(c, str)]
        msg = f"the column is missing{did_you_mean(name, sent)}"
        raise DataError("missing column", [Problem(("columns", name), msg)])
    if dtype == "datetime":
        msg = f"{name!r} is a datetime column; models take numbers, booleans or strings"
        raise DataError("datetime column", [Problem(("columns", name), msg)])
    if dtype in ("int64", "float64"):
        return _model_numbers(name, frame[name], dtype)
    return _model_objects(name, frame[name], dtype)


def to_model_frame(frame: pd.DataFrame, dtypes: Mapping[str, ColumnDtype]) -> pd.DataFrame:
    """The frame handed to scikit-learn, columns in ``dtypes`` order. Prediction reuses it on
    frames built from JSON, so every value is type-checked and bad cells are named."""
    columns: dict[str, pd.Series] = {}
    problems: list[Problem] = []
    for name, dtype in dtypes.items():
        try:
            array = _model_column(name, frame, dtype)
        except DataError as exc:
            problems += exc.problems
            continue
        # Not copied here: the frame below copies every column into its one block (two
        # copies of each column less than a Series of each, 20 ms of a 200,000 x 20 job).
        columns[name] = pd.Series(array, index=frame.index, dtype=array.dtype, copy=False)
    if problems:
        raise problems_error("values unfit for the model", problems)
    return pd.DataFrame(columns, index=frame.index)
