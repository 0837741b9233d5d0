"""One-row Parquet files read from a layout seen before (app.parquet_files) give the
values pyarrow reads, bit for bit, and any file that is not of a learnt layout is left to
pyarrow; the footer and page headers are walked by app.thrift_compact."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app import parquet_files
from app.bodies import read_table_body
from app.thrift_compact import Span, ThriftError, read_struct

# Ways clients write a one-row file: pandas' default, and pyarrow's options.
WRITERS: dict[str, dict[str, Any]] = {
    "pandas": {},
    "uncompressed": {"compression": "none"},
    "plain": {"use_dictionary": False},
    "plain v2 pages": {"use_dictionary": False, "data_page_version": "2.0"},
    "dictionary v2 pages": {"data_page_version": "2.0"},
    "no statistics": {"write_statistics": False},
    "format 1.0": {"version": "1.0"},
    "statistics of one column": {"write_statistics": ["feature 0"]},
}
ODD = [np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, 1e300, -3.4e38, 1.0]


@pytest.fixture(autouse=True)
def _forget() -> None:
    parquet_files._LAYOUTS.clear()
    parquet_files._DECLINED.clear()


def _file(frame: pd.DataFrame, **options: Any) -> bytes:
    out = io.BytesIO()
    if options:
        pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), out, **options)
    else:
        frame.to_parquet(out, index=False)
    return out.getvalue()


def _pyarrow(content: bytes) -> tuple[pa.Table, pq.FileMetaData]:
    parquet = pq.ParquetFile(pa.BufferReader(content))
    return parquet.read(), parquet.metadata


def _learn(content: bytes) -> None:
    table, metadata = _pyarrow(content)
    parquet_files.learn(content, metadata, table)


def _bits(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, np.float64).view(np.uint64)


@pytest.mark.parametrize("writer", list(WRITERS))
@pytest.mark.parametrize("seed", range(6))
def test_files_of_a_learnt_layout_read_as_pyarrow_reads_them(writer: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    names = [f"feature {j}" for j in range(int(rng.integers(1, 40)))]

    def row(values: np.ndarray) -> bytes:
        return _file(pd.DataFrame([values], columns=names), **WRITERS[writer])

    _learn(row(rng.normal(size=len(names))))
    assert len(parquet_files._LAYOUTS) == 1
    for attempt in range(30):
        values = rng.normal(size=len(names)) * 10.0 ** rng.integers(-30, 30, len(names))
        if attempt % 3 == 0:  # odd cells: a file of another layout, or the same one
            values[rng.integers(len(names))] = ODD[attempt % len(ODD)]
        content = row(values)
        expected, _ = _pyarrow(content)
        read = parquet_files.float_row(content)
        if attempt % 3:  # ordinary values: the learnt layout
            assert read is not None
        if read is None:
            continue
        assert read.schema is parquet_files._LAYOUTS[0].schema
        assert read.schema.equals(expected.schema, check_metadata=True)
        own = expected.to_tensor(row_major=True).to_numpy().reshape(-1)
        assert np.array_equal(_bits(read.values), _bits(own))
        rows = parquet_files.float_rows(content)
        assert rows is not None and rows.matrix.shape == (1, len(names))
        assert np.array_equal(_bits(rows.matrix[0]), _bits(own))


def test_read_table_body_learns_one_row_files() -> None:
    frame = pd.DataFrame([[1.5, 2.5]], columns=["a", "b"])
    content = _file(frame)
    assert parquet_files.float_row(content) is None
    table = read_table_body(content, "parquet", None)
    assert table.num_rows == 1
    read = parquet_files.float_row(_file(frame * 3))
    assert read is not None and read.values.tolist() == [4.5, 7.5]


def _indexed(frame: pd.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.to_parquet(out, index=True)
    return out.getvalue()


def _nested() -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.table({"s": pa.array([{"x": 1.0, "y": 2.0}])}), out)
    return out.getvalue()


@pytest.mark.parametrize(
    "make",
    [
        lambda: _file(pd.DataFrame([[1.0, 2.0]], columns=["a", "b"]), compression="zstd"),
        lambda: _file(pd.DataFrame([[1.0, 2.0]], columns=["a", "b"]), write_page_checksum=True),
        lambda: _file(pd.DataFrame([[1.0, 2.0], [3.0, 4.0]], columns=["a", "b"])),
        lambda: _file(pd.DataFrame({"a": [1.0], "n": [3]})),
        lambda: _file(pd.DataFrame({"a": [1.0], "b": [None]}, dtype=float)),
        lambda: _file(pd.DataFrame({"a": np.array([1.0], np.float32)})),
        lambda: _indexed(pd.DataFrame({"a": [1.0]}, index=pd.Index([7], name="id"))),
        _nested,
    ],
    ids=[
        "zstd",
        "page checksums",
        "two rows",
        "an integer column",
        "a null",
        "float32",
        "pandas' integer index as a column",
        "a struct column",
    ],
)
def test_other_files_are_never_learnt(make: Callable[[], bytes]) -> None:
    content = make()
    assert read_table_body(content, "parquet", None).equals(_pyarrow(content)[0])
    _learn(content)
    assert parquet_files._LAYOUTS == []
    assert parquet_files.float_row(content) is None


def test_a_file_like_one_declined_is_not_walked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout walked and declined (here: page checksums) is not walked on every
    request of it (~2 ms for 30 columns) but once in 64 files of its schema; a file of
    another schema is walked at once, and one of the same schema learnt after at most
    64."""
    walked: list[int] = []
    walk = parquet_files._walk

    def spied(content: bytes, table: pa.Table) -> Any:
        walked.append(len(content))
        return walk(content, table)

    monkeypatch.setattr(parquet_files, "_walk", spied)
    frame = pd.DataFrame([[1.0, 2.0]], columns=["a", "b"])
    for scale in range(1, 66):
        _learn(_file(frame * scale, write_page_checksum=True))
    assert len(walked) == 2 and parquet_files._LAYOUTS == []  # the 1st and the 65th
    other = pd.DataFrame([[1.0, 2.0]], columns=["a", "c"])
    _learn(_file(other))
    assert len(walked) == 3 and len(parquet_files._LAYOUTS) == 1
    for _ in range(64):
        _learn(_file(frame))  # the same schema: walked when its turn comes
    assert len(walked) == 4 and len(parquet_files._LAYOUTS) == 2
    assert parquet_files.float_row(_file(frame * 5)) is not None


def test_a_file_that_differs_outside_its_values_and_statistics_is_left_to_pyarrow() -> None:
    """Every byte but a value's or a statistic's is compared: a file that differs in any
    one of them (a name, a page's encoding, the footer's length) is not the layout."""
    frame = pd.DataFrame([[1.25, -2.5, 3.75]], columns=["a", "b", "c"])
    content = _file(frame)
    _learn(content)
    layout = parquet_files._LAYOUTS[0]
    free = _value_bytes(layout)
    for statistics in _statistics_spans(content):
        free.update(range(statistics.start, statistics.end))
    assert len(free) < len(content) // 4
    for place in range(len(content)):
        changed = bytearray(content)
        changed[place] ^= 0x01
        read = parquet_files.float_row(bytes(changed))
        assert (read is not None) == (place in free), place
        if read is None:
            continue
        # A value or a statistic: pyarrow reads the same values (it reads no statistic).
        expected, _ = _pyarrow(bytes(changed))
        own = expected.to_tensor(row_major=True).to_numpy().reshape(-1)
        assert np.array_equal(_bits(read.values), _bits(own)), place
    assert parquet_files.float_row(content + b"\x00") is None
    assert parquet_files.float_row(content[:-1]) is None


def _value_bytes(layout: Any) -> set[int]:
    if layout.places is not None:
        return set(layout.places.tolist())
    return {layout.first + j * layout.step + k for j in range(layout.columns) for k in range(8)}


def test_values_at_uneven_places_are_gathered() -> None:
    """Columns whose chunks differ in length (statistics for one of them) have their
    values at uneven steps: read by their places, not as one strided view."""
    frame = pd.DataFrame([[1.5, -2.5, 3.5]], columns=["feature 0", "b", "c"])
    options = WRITERS["statistics of one column"]
    _learn(_file(frame, **options))
    layout = parquet_files._LAYOUTS[0]
    assert layout.places is not None
    read = parquet_files.float_row(_file(frame * 2, **options))
    assert read is not None and read.values.tolist() == [3.0, -5.0, 7.0]
    assert parquet_files.float_row(_file(frame.iloc[:, :2] * 2, **options)) is None


def _statistics_spans(content: bytes) -> list[Span]:
    """The min and max of every column's footer entry and data page header."""
    size = int.from_bytes(content[-8:-4], "little")
    footer, _ = read_struct(content, len(content) - 8 - size)
    spans = []
    for chunk in footer[4][0][1]:
        meta = chunk[3]
        spans += [v for k, v in meta[12].items() if k in (1, 2, 5, 6)]
        page = meta[9]
        header, _ = read_struct(content, page)
        spans += [v for k, v in header[5][5].items() if k in (1, 2, 5, 6)]
    return spans


def test_the_footer_walk_agrees_with_pyarrow_s_metadata() -> None:
    frame = pd.DataFrame([[0.5, 1.5, 2.5]], columns=["a", "bb", "ccc"])
    content = _file(frame)
    metadata = pq.ParquetFile(pa.BufferReader(content)).metadata
    size = int.from_bytes(content[-8:-4], "little")
    footer, end = read_struct(content, len(content) - 8 - size)
    assert end == len(content) - 8
    assert footer[3] == metadata.num_rows == 1
    created = footer[6]
    assert content[created.start : created.end].decode() == metadata.created_by
    for j, chunk in enumerate(footer[4][0][1]):
        column = metadata.row_group(0).column(j)
        meta = chunk[3]
        assert meta[9] == column.data_page_offset
        assert meta[11] == column.dictionary_page_offset
        assert meta[7] == column.total_compressed_size
        path = meta[3][0]
        assert content[path.start : path.end].decode() == column.path_in_schema
        minimum = meta[12][6]
        assert np.frombuffer(content[minimum.start : minimum.end])[0] == column.statistics.min
    keys = {content[k.start : k.end] for k in (pair[1] for pair in footer[5])}
    assert keys == set(metadata.metadata)


@pytest.mark.parametrize(
    "content",
    [b"", b"\x15", b"\x18\x05ab", b"\x19\xfc", b"\x1d" + b"\x00" * 3, b"\x16" + b"\xff" * 11],
    ids=["empty", "no stop", "a string cut short", "a list cut short", "type 13", "varint"],
)
def test_malformed_thrift_raises_its_own_error(content: bytes) -> None:
    with pytest.raises(ThriftError):
        read_struct(content)
