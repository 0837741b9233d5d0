"""Small Arrow IPC streams read with a schema seen before (app.arrow_streams) give the
table pyarrow's stream reader gives, and anything else is left to that reader."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from app import arrow_streams
from app.arrow_streams import one_batch_table
from app.bodies import read_table_body
from app.problems import InvalidRequestError
from ensembles import TooLargeError
from tests.api.support import IRIS_FEATURES, iris_frame


def _stream(*batches: pa.RecordBatch, close: bool = True) -> bytes:
    sink = pa.BufferOutputStream()
    writer = ipc.new_stream(sink, batches[0].schema)
    for batch in batches:
        writer.write_batch(batch)
    if close:
        writer.close()
    return bytes(sink.getvalue().to_pybytes())


def _read(content: bytes) -> pa.Table:
    reader = ipc.open_stream(pa.py_buffer(content))
    return pa.Table.from_batches(list(reader), schema=reader.schema)


FRAME = iris_frame()[IRIS_FEATURES]
PANDAS = pa.RecordBatch.from_pandas(FRAME.iloc[:1])  # with pandas' metadata and index
MIXED = pa.RecordBatch.from_pydict(
    {"x": [1.5, None], "n": pa.array([3, 4], pa.int64()), "s": ["a", None]}
)


@pytest.mark.parametrize(
    "content",
    [_stream(PANDAS), _stream(MIXED), _stream(PANDAS, close=False)],
    ids=["pandas row", "nulls, ints, strings", "no end marker"],
)
def test_a_known_schema_s_stream_is_read_as_pyarrow_reads_it(content: bytes) -> None:
    first, again = one_batch_table(content), one_batch_table(content)
    assert first is not None and again is not None
    assert any(content.startswith(prefix) for prefix, _ in arrow_streams._KNOWN)
    expected = _read(content)
    for table in (first, again):
        assert table.schema.equals(expected.schema, check_metadata=True)
        assert table.equals(expected)
    assert read_table_body(content, "arrow", None).equals(expected)


def test_other_streams_are_left_to_pyarrow_s_reader() -> None:
    two = _stream(PANDAS, PANDAS)
    coded = pa.RecordBatch.from_pydict({"c": pa.array(["a", "b"]).dictionary_encode()})
    after = _stream(PANDAS) + b"more"
    cut = _stream(PANDAS)[:-40]
    for content in (two, _stream(coded), after, cut, b"\x00" * 16):
        assert one_batch_table(content) is None
    for good in (two, _stream(coded), after):  # (the reader stops at the end marker)
        assert read_table_body(good, "arrow", None).equals(_read(good))
    for bad in (cut, b"\x00" * 16):
        with pytest.raises(InvalidRequestError):
            read_table_body(bad, "arrow", None)


def test_a_known_schema_s_stream_over_the_row_limit_is_refused_as_before() -> None:
    content = _stream(MIXED)
    assert one_batch_table(content) is not None
    with pytest.raises(TooLargeError, match="too many rows"):
        read_table_body(content, "arrow", 1)
    big = pa.RecordBatch.from_pandas(FRAME)
    assert one_batch_table(_stream(big) + bytes(arrow_streams.MAX_BYTES)) is None
