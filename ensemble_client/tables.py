"""Tables in and out: files and DataFrames as upload and prediction bodies, prediction
answers as DataFrames.

pandas and pyarrow are optional: the client imports without them, uploads files and
predicts records without them, and says what to install when a DataFrame is asked for.
"""

from __future__ import annotations

import importlib
import io
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ensemble_client.errors import InvalidArgumentError, MissingDependencyError

if TYPE_CHECKING:
    import pandas as pd

    from ensemble_client.models import Prediction

EXTRA = "pip install 'ensemble-service[client-pandas]' (pandas and pyarrow)"
ARROW_STREAM = "application/vnd.apache.arrow.stream"
PARQUET = "application/vnd.apache.parquet"
_MEDIA = {
    ".csv": "text/csv",
    ".parquet": PARQUET,
    ".pq": PARQUET,
    ".jsonl": "application/x-ndjson",
    ".ndjson": "application/x-ndjson",
}


def optional(module: str, why: str) -> Any:
    """Import an optional library, or raise MissingDependencyError saying what needs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependencyError(f"{why} needs {module}: {EXTRA}") from None


def has(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def is_frame(value: Any) -> bool:
    """Whether ``value`` is a pandas DataFrame (without importing pandas)."""
    return type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas")


def is_path(value: Any) -> bool:
    return isinstance(value, str | os.PathLike)


# --- uploads ---------------------------------------------------------------------------


def upload_file(path: str | os.PathLike[str]) -> tuple[str, bytes, str]:
    """A file as a multipart part: its name, bytes and a media type from its suffix (the
    server also reads the format from the name)."""
    file = Path(path)
    data = file.read_bytes()  # FileNotFoundError names the path
    media = _MEDIA.get(file.suffix.lower(), "application/octet-stream")
    return file.name, data, media


def upload_frame(frame: pd.DataFrame) -> tuple[str, bytes, str]:
    """A DataFrame as a Parquet part (types kept exactly), or CSV without pyarrow.

    The index is left out unless it is named (then it is a column like the others).
    """
    keep_index = any(name is not None for name in frame.index.names)
    table = frame.reset_index() if keep_index else frame
    if has("pyarrow"):
        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False)
        return "table.parquet", buffer.getvalue(), PARQUET
    return "table.csv", table.to_csv(index=False).encode(), "text/csv"


# --- predictions -----------------------------------------------------------------------


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A CSV, Parquet or JSON Lines file as a DataFrame (by its suffix; CSV otherwise)."""
    pandas = optional("pandas", f"reading {path}")
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        optional("pyarrow", f"reading {path}")
        frame: pd.DataFrame = pandas.read_parquet(path)
    elif suffix in (".jsonl", ".ndjson"):
        frame = pandas.read_json(path, lines=True)
    else:
        frame = pandas.read_csv(path)
    return frame


WRITABLE_SUFFIXES = (".csv", ".parquet", ".pq", ".jsonl", ".ndjson", ".json")


def check_writable_suffix(path: str | os.PathLike[str]) -> None:
    """``InvalidArgumentError`` unless the suffix names a format ``write_table`` writes:
    a guess (CSV for ``out.xyz``) would hide a typo."""
    if Path(path).suffix.lower() not in WRITABLE_SUFFIXES:
        raise InvalidArgumentError(
            f"cannot tell the format of {os.fspath(path)!r} from its suffix: end it with "
            + ", ".join(WRITABLE_SUFFIXES)
        )


def write_table(frame: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a DataFrame as CSV, Parquet or JSON Lines, by the path's suffix (one of
    ``WRITABLE_SUFFIXES``); atomically (a temporary file renamed into place), so a reader
    never sees half a file."""
    check_writable_suffix(path)
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    suffix = target.suffix.lower()
    if suffix in (".parquet", ".pq"):
        optional("pyarrow", f"writing {path}")
        frame.to_parquet(partial, index=False)
    elif suffix in (".jsonl", ".ndjson"):
        frame.to_json(partial, orient="records", lines=True)
    elif suffix == ".json":
        frame.to_json(partial, orient="records")
    else:
        frame.to_csv(partial, index=False)
    partial.replace(target)


def frame_rows(frame: pd.DataFrame) -> dict[str, Any]:
    """A DataFrame as JSON columnar instances: exact floats (Python's repr round-trips),
    missing values (NaN, None, NaT) as null, datetimes as ISO 8601 strings."""
    pandas = optional("pandas", "a DataFrame")
    columns: dict[str, list[Any]] = {}
    for name in frame.columns:
        series = frame[name]
        if pandas.api.types.is_datetime64_any_dtype(series.dtype):
            values = [None if pandas.isna(v) else v.isoformat() for v in series]
        else:
            values = series.astype(object).where(series.notna(), None).tolist()
        columns[str(name)] = values
    data = [list(row) for row in zip(*columns.values(), strict=True)] if columns else []
    return {"columns": list(columns), "data": data}


def arrow_stream(frame: pd.DataFrame) -> bytes:
    """A DataFrame as an Arrow IPC stream (the index left out)."""
    pa = optional("pyarrow", "sending a DataFrame as Arrow")
    table = pa.Table.from_pandas(frame, preserve_index=False)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def instances(rows: Any) -> Any:
    """Rows given without pandas (records, or a mapping of columns) as JSON instances."""
    if isinstance(rows, Mapping):
        names = [str(k) for k in rows]
        values = list(rows.values())
        data = [list(row) for row in zip(*values, strict=True)] if values else []
        return {"columns": names, "data": data}
    if isinstance(rows, Sequence) and not isinstance(rows, str | bytes):
        return [dict(row) for row in rows]
    raise TypeError(
        "rows must be a pandas DataFrame, a path to a CSV/Parquet file, a list of records "
        f"(dicts) or a mapping of column name to values; got {type(rows).__name__}"
    )


def prediction_frame(prediction: Prediction, index: Any = None) -> pd.DataFrame:
    """The per-row lists of an answer as columns (see ``Prediction.to_frame``)."""
    pandas = optional("pandas", "a prediction as a DataFrame")
    columns: dict[str, Any] = {"prediction": prediction.predictions}
    classes = [str(c) for c in prediction.classes or []]
    if prediction.probabilities is not None:
        for i, name in enumerate(classes):
            columns[f"proba_{name}"] = [row[i] for row in prediction.probabilities]
    for key in ("votes", "weighted_votes"):
        tallies = getattr(prediction, key)
        if tallies is not None:
            for name in classes:
                columns[f"{key}_{name}"] = [row.get(name, 0) for row in tallies]
    for key in ("agreement", "std"):
        values = getattr(prediction, key)
        if values is not None:
            columns[key] = values
    frame: pd.DataFrame = pandas.DataFrame(columns, index=index)
    frame.attrs.update(
        model=prediction.model,
        version=prediction.version,
        task=prediction.task,
        classes=prediction.classes,
        warnings=list(prediction.warnings),
    )
    if prediction.explanations is not None:
        frame.attrs["explanations"] = prediction.explanations
    return frame
