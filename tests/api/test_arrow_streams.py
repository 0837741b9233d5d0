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


# --- streams read straight from their bytes (float_rows) --------------------------------


def _floats(values: list[list[float]], names: tuple[str, ...] = ("a", "b", "c")) -> bytes:
    columns = {n: pa.array([row[j] for row in values], pa.float64()) for j, n in enumerate(names)}
    return _stream(pa.RecordBatch.from_pydict(columns))


def _tensor(content: bytes) -> object:
    import numpy as np

    batch = _read(content).to_batches()[0]
    return np.asarray(batch.to_tensor(row_major=True).to_numpy())


def test_a_float_stream_laid_out_as_one_read_before_is_read_from_its_bytes() -> None:
    import numpy as np

    odd = [float("nan"), -0.0, float("inf"), -float("inf"), 5e-324, 1.7976931348623157e308]
    first = _floats([[0.5, 1.5, 2.5]], ("fa", "fb", "fc"))
    assert arrow_streams.float_rows(first) is None  # not learnt yet
    assert one_batch_table(first) is not None  # learnt here
    rng = np.random.default_rng(0)
    for i in range(50):
        row = [float(v) for v in rng.normal(size=3) * 10.0 ** rng.integers(-300, 300, 3)]
        if i < len(odd):
            row[i % 3] = odd[i]
        content = _floats([row], ("fa", "fb", "fc"))
        rows = arrow_streams.float_rows(content)
        assert rows is not None and rows.num_rows == 1
        assert rows.schema.equals(_read(content).schema, check_metadata=True)
        own = _tensor(content)
        assert rows.matrix.flags.c_contiguous and rows.matrix.flags.writeable
        assert rows.matrix.dtype == np.float64 and rows.matrix.shape == (1, 3)
        assert np.array_equal(rows.matrix.view(np.uint64), own.view(np.uint64))  # type: ignore[attr-defined]
    (layout,) = [k for k in arrow_streams._LAYOUTS if k.length == len(first)]
    assert layout.rows == 1 and layout.step == 8  # one row read by its side-by-side values


def test_a_lone_row_s_values_are_viewed_in_its_bytes_as_float_rows_reads_them() -> None:
    """``float_row`` gives a one-row body's schema (the layout's own object, as
    ``float_rows``') and its values viewed in the body's bytes (read-only), bit for bit
    ``float_rows``' row; None for a body ``float_rows`` does not read, and for a layout of
    several rows."""
    import numpy as np

    odd = [float("nan"), -0.0, float("inf"), -float("inf"), 5e-324, 1.7976931348623157e308]
    names = ("pa", "pb", "pc", "pd")
    first = _floats([[0.5, 1.5, 2.5, 3.5]], names)
    assert arrow_streams.float_row(first) is None  # not learnt yet
    assert one_batch_table(first) is not None
    rng = np.random.default_rng(3)
    for i in range(40):
        row = [float(v) for v in rng.normal(size=4) * 10.0 ** rng.integers(-300, 300, 4)]
        if i < len(odd):
            row[i % 4] = odd[i]
        content = _floats([row], names)
        found, rows = arrow_streams.float_row(content), arrow_streams.float_rows(content)
        assert found is not None and rows is not None
        assert found.schema is rows.schema
        assert found.values.shape == (4,) and found.values.dtype == np.float64
        assert not found.values.flags.writeable  # a view of the request's bytes
        assert found.values.tobytes() == rows.matrix[0].tobytes()
    three = _floats([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], ("qa", "qb"))
    one_batch_table(three)
    assert arrow_streams.float_rows(three) is not None and arrow_streams.float_row(three) is None
    content = _floats([[1.0, 2.0, 3.0, 4.0]], names)
    for bad in (content[:-8] + b"\x00" * 7 + b"\x01", content[:-1], content + b"\x00" * 8):
        assert arrow_streams.float_rows(bad) is None and arrow_streams.float_row(bad) is None


def test_one_pandas_row_is_read_side_by_side_with_pyarrow_s_bits() -> None:
    """A one-row stream as pandas writes it (the bench's body) is read by the one-row
    way (``_Layout.read``: its values lie side by side), as pyarrow reads it."""
    import numpy as np

    def row(i: int) -> bytes:
        return _stream(pa.RecordBatch.from_pandas(FRAME.iloc[i : i + 1].reset_index(drop=True)))

    first = row(3)
    assert one_batch_table(first) is not None
    (layout,) = [k for k in arrow_streams._LAYOUTS if k.length == len(first)]
    assert layout.rows == 1 and layout.step == 8
    for i in (0, 50, 149):
        content = row(i)
        rows = arrow_streams.float_rows(content)
        assert rows is not None and rows.matrix.flags.writeable
        own = _tensor(content)
        assert np.array_equal(rows.matrix.view(np.uint64), own.view(np.uint64))  # type: ignore[attr-defined]


def test_several_rows_and_other_layouts() -> None:
    import numpy as np

    names = ("ga", "gb")
    three = _floats([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], names)
    one_batch_table(three)
    again = _floats([[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]], names)
    rows = arrow_streams.float_rows(again)
    assert rows is not None and rows.matrix.tolist() == [[7.0, 8.0], [9.0, 10.0], [11.0, 12.0]]
    assert np.array_equal(rows.matrix, _tensor(again))  # type: ignore[arg-type]
    # Another row count, another schema, bytes after the end, a cut body: not this layout.
    assert arrow_streams.float_rows(_floats([[1.0, 2.0]], names)) is None
    assert arrow_streams.float_rows(_floats([[1.0, 2.0, 3.0]] * 3, ("ga", "gb", "gc"))) is None
    tail = again[:-8] + b"\x00" * 7 + b"\x01"
    assert arrow_streams.float_rows(tail) is None
    assert arrow_streams.float_rows(again[:-1]) is None


@pytest.mark.parametrize(
    "batch",
    [
        pa.RecordBatch.from_pydict({"ha": pa.array([1.5, None]), "hb": pa.array([1.0, 2.0])}),
        pa.RecordBatch.from_pydict({"ia": pa.array([1, 2], pa.int64())}),
        pa.RecordBatch.from_pydict({"ja": pa.array([1.0] * 65)}),
        pa.RecordBatch.from_pydict({"ka": pa.array([1.0], pa.float32())}),
    ],
    ids=["nulls", "integers", "65 rows", "float32"],
)
def test_other_streams_are_never_read_from_their_bytes(batch: pa.RecordBatch) -> None:
    content = _stream(batch)
    for _ in range(2):
        assert one_batch_table(content) is not None
        assert arrow_streams.float_rows(content) is None


def _forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    """No schema nor layout remembered (as in a new process)."""
    monkeypatch.setattr(arrow_streams, "_KNOWN", [])
    monkeypatch.setattr(arrow_streams, "_LAYOUTS", [])


def test_two_schemas_in_turn_are_each_read_as_pyarrow_reads_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Bodies of two schemas (the same column names, another order; another name) sent
    in turn, as one client's connection may: each read, from the bytes or by its
    record batch, is pyarrow's own reading of it, never the other schema's."""
    import numpy as np

    _forgotten(monkeypatch)
    rng = np.random.default_rng(5)
    names = [("la", "lb", "lc"), ("lc", "lb", "la"), ("la", "lb", "ld")]
    for _ in range(4):
        for order in names:
            content = _floats([[float(v) for v in rng.normal(size=3)]], order)
            expected = _read(content)
            table = read_table_body(content, "arrow", None)
            assert table.schema.equals(expected.schema, check_metadata=True)
            assert table.equals(expected)
            rows = arrow_streams.float_rows(content)
            if rows is not None:
                assert rows.schema.equals(expected.schema, check_metadata=True)
                assert rows.matrix.tolist() == _tensor(content).tolist()  # type: ignore[attr-defined]
    assert len(arrow_streams._KNOWN) == len(names)
    assert len(arrow_streams._LAYOUTS) == len(names)


def _refusal(content: bytes) -> str:
    with pytest.raises(InvalidRequestError) as exc:
        read_table_body(content, "arrow", None)
    return str(exc.value.problems)


def test_a_known_schema_s_body_whose_batch_is_malformed_is_refused_as_unknown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body that starts with a remembered schema message (and may have a remembered
    layout's length) but whose record batch does not read: never read from the
    remembered schema or layout, and refused with the problem pyarrow's reader names
    for it in a process that remembers nothing."""
    good = _floats([[1.0, 2.0, 3.0]], ("ma", "mb", "mc"))
    _forgotten(monkeypatch)
    one_batch_table(good)  # the schema and the layout remembered
    assert arrow_streams.float_rows(good) is not None
    start = next(len(prefix) for prefix, _ in arrow_streams._KNOWN if good.startswith(prefix))
    bad_bodies = [
        good[:start] + b"\xff\xff\xff\xff" + b"\x7f" * 4 + good[start + 8 :],  # its length
        good[:start] + good[start : start + 8] + b"\x00" * (len(good) - start - 8),
        good[: start + 20],  # cut in the batch's message
        good[:start] + b"\xff\xff\xff\xff\x00\x00\x00\x00" + b"\x00" * 8,  # ends, then bytes
    ]
    assert len(bad_bodies[0]) == len(bad_bodies[1]) == len(good)  # a layout's length
    for bad in bad_bodies:
        assert arrow_streams.float_rows(bad) is None
    remembered = [_refusal(bad) if _raises(bad) else None for bad in bad_bodies]
    assert sum(r is not None for r in remembered) >= 3
    _forgotten(monkeypatch)
    fresh = [_refusal(bad) if _raises(bad) else None for bad in bad_bodies]
    assert remembered == fresh
    for bad in bad_bodies:
        table = one_batch_table(bad)
        assert table is None or table.equals(_read(bad))


def _raises(content: bytes) -> bool:
    try:
        read_table_body(content, "arrow", None)
    except InvalidRequestError:
        return True
    return False
