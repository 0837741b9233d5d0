"""The request line written straight to the service's handler (``app.logs.write_info``)
is the line ``logging`` writes, to the byte; request ids made without ``uuid`` are
``uuid4().hex``'s."""

from __future__ import annotations

import io
import json
import logging
import os
import random
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from app import logs
from app.logs import REQUEST_ID, configure_logging, new_request_id, write_info

ACCESS = "%s %s %s %.1f ms"
FIELDS = {
    "event": "request",
    "method": "POST",
    "route": "/v1/models/{name}/versions/{ref}/predict",
    "path": "/v1/models/iris/versions/1/predict",
    "status": 200,
    "duration_ms": 0.42,
    "request_id": "r-1",
}
ARGS = ("POST", "/v1/models/iris/versions/1/predict", 200, 0.42)


@pytest.fixture
def service_logging(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The server process's logging (pytest's own handlers set aside), into a buffer,
    with a frozen clock."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    knobs = (logging._srcfile, logging.logThreads, logging.logMultiprocessing)
    uvicorn = {n: logging.getLogger(n) for n in ("uvicorn", "uvicorn.error", "uvicorn.access")}
    state = {n: (list(lg.handlers), lg.propagate, lg.disabled) for n, lg in uvicorn.items()}
    root.handlers[:] = []
    configure_logging("INFO", "json")
    stream = io.StringIO()
    handler = root.handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    monkeypatch.setattr(time, "time", lambda: 1_790_000_000.123456)
    yield stream
    logging._srcfile, logging.logThreads, logging.logMultiprocessing = knobs
    logging.captureWarnings(False)
    root.handlers[:], root.level = saved
    for name, (handlers, propagate, disabled) in state.items():
        uvicorn[name].handlers[:] = handlers
        uvicorn[name].propagate, uvicorn[name].disabled = propagate, disabled


def _service_handler_only() -> logging.Handler:
    """The root's handlers but the service's set aside (pytest adds its own for each
    test's call); the fixture puts them back."""
    root = logging.getLogger()
    root.handlers[:] = [h for h in root.handlers if isinstance(h, logs._ServiceHandler)]
    return root.handlers[0]


def _logged(logger: logging.Logger, fields: dict[str, object], stream: io.StringIO) -> str:
    logger.info(ACCESS, *ARGS, extra={"fields": fields})
    return stream.getvalue()


@pytest.mark.parametrize("with_id", [True, False])
def test_the_direct_line_is_the_logging_line(service_logging: io.StringIO, with_id: bool) -> None:
    fields = dict(FIELDS) if with_id else {k: v for k, v in FIELDS.items() if k != "request_id"}
    _service_handler_only()
    access = logging.getLogger("app.access")
    token = REQUEST_ID.set("from-the-context")
    try:
        assert write_info(access, ACCESS, ARGS, fields)
        direct = service_logging.getvalue()
        service_logging.seek(0)
        service_logging.truncate()
        through_logging = _logged(access, fields, service_logging)
    finally:
        REQUEST_ID.reset(token)
    assert direct == through_logging
    assert direct.count("\n") == 1 and f'"pid":{os.getpid()}' in direct
    assert ('"request_id":"r-1"' in direct) is with_id


def test_the_direct_line_stands_aside_for_any_other_configuration(
    service_logging: io.StringIO,
) -> None:
    """A filter, a second handler (a test's capture), the text format or a handler above
    INFO: logging writes the line (False), nothing is written here."""
    access = logging.getLogger("app.access")
    handler = _service_handler_only()

    def refused() -> bool:
        written = write_info(access, ACCESS, ARGS, FIELDS)
        assert service_logging.getvalue() == ""
        return not written

    class Drop(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            return False

    access.addFilter(drop := Drop())
    assert refused()
    access.removeFilter(drop)
    handler.addFilter(drop)
    assert refused()
    handler.removeFilter(drop)
    other = logging.NullHandler()
    logging.getLogger("app").addHandler(other)
    assert refused()
    logging.getLogger("app").removeHandler(other)
    handler.setLevel(logging.WARNING)
    assert refused()
    handler.setLevel(logging.INFO)
    formatter = handler.formatter
    handler.setFormatter(logs.TextFormatter())
    assert refused()
    handler.setFormatter(formatter)
    assert write_info(access, ACCESS, ARGS, FIELDS)


def test_new_request_ids_are_uuid4_hex(monkeypatch: pytest.MonkeyPatch) -> None:
    for seed in range(50):
        raw = bytes((seed * 37 + i * 101) % 256 for i in range(16))
        monkeypatch.setattr(os, "urandom", lambda n, raw=raw: raw[:n])
        assert new_request_id() == uuid.UUID(bytes=raw, version=4).hex
    monkeypatch.undo()
    made = {new_request_id() for _ in range(100)}
    assert len(made) == 100
    assert all(uuid.UUID(hex=m).version == 4 for m in made)


def test_the_time_is_the_datetimes_to_the_character() -> None:
    """``time_text`` against ``datetime``'s own text: random moments, and the rounding
    edges (half a microsecond either side, a carry into the next second)."""
    rng = random.Random(24)
    edges = [0.0, 0.9999995, 0.9999994999, 2.5e-6, 1.5e-6, 1_790_000_000.9995]
    edges += [1_790_000_000 + k / 1e6 + d for k in (0, 499, 500, 999_999) for d in (-5e-7, 5e-7)]
    moments = edges + [rng.uniform(0, 4e9) for _ in range(20_000)]
    moments += [rng.randrange(4_000_000_000) + rng.randrange(10**6) / 1e6 for _ in range(20_000)]
    for moment in moments:
        expected = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
        assert logs.time_text(moment) == expected.replace("+00:00", "Z"), moment


def test_lines_of_one_second_make_one_datetime(
    service_logging: io.StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The date and time of day are made once per second, not once per line (each
    request writes one), and every line still reads its own millisecond."""
    made: list[float] = []

    class Counted(datetime):
        @classmethod
        def fromtimestamp(cls, t: float, tz: Any = None) -> Any:
            made.append(t)
            return datetime.fromtimestamp(t, tz)

    monkeypatch.setattr(logs, "datetime", Counted)
    clock = iter([1_790_000_001.0 + k / 100 for k in range(50)])
    monkeypatch.setattr(time, "time", lambda: next(clock))
    _service_handler_only()
    for _ in range(50):
        assert write_info(logging.getLogger("app.access"), ACCESS, ARGS, FIELDS)
    lines = [json.loads(line) for line in service_logging.getvalue().splitlines()]
    assert [line["time"] for line in lines[:3]] == [
        "2026-09-21T14:13:21.000Z",
        "2026-09-21T14:13:21.010Z",
        "2026-09-21T14:13:21.020Z",
    ]
    assert len(made) == 1
