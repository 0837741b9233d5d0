"""The request line written straight to the service's handler (``app.logs.write_info``)
is the line ``logging`` writes, to the byte; request ids made without ``uuid`` are
``uuid4().hex``'s."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import os
import random
import time
import uuid
import weakref
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
    """Each id is ``uuid4().hex`` of the next 16 random bytes drawn."""
    drawn: list[bytes] = []

    def urandom(n: int) -> bytes:
        raw = bytes((len(drawn) * 37 + i * 101) % 256 for i in range(n))
        drawn.append(raw)
        return raw

    logs._IDS.clear()
    monkeypatch.setattr(os, "urandom", urandom)
    made = [new_request_id() for _ in range(300)]
    monkeypatch.undo()
    logs._IDS.clear()
    raw = b"".join(drawn)
    assert made == [uuid.UUID(bytes=raw[16 * k : 16 * k + 16], version=4).hex for k in range(300)]
    made = [new_request_id() for _ in range(600)]
    assert len(set(made)) == 600
    assert all(uuid.UUID(hex=m).version == 4 and uuid.UUID(hex=m).hex == m for m in made)


def test_request_ids_are_drawn_256_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """One ``os.urandom`` call for 256 ids (it was one a request)."""
    sizes: list[int] = []
    urandom = os.urandom

    def counted(n: int) -> bytes:
        sizes.append(n)
        return urandom(n)

    logs._IDS.clear()
    monkeypatch.setattr(os, "urandom", counted)
    for _ in range(300):
        new_request_id()
    assert sizes == [16 * 256, 16 * 256]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_draws_ids_of_its_own() -> None:
    """The pool is emptied in a forked child: parent and child never share an id."""
    new_request_id()  # the pool filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, ",".join(new_request_id() for _ in range(5)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split(","))
    assert len(child) == 5 and not child & {new_request_id() for _ in range(5)}


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


class _CountedWrites(io.StringIO):
    """A stream counting its writes."""

    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


async def test_the_lines_held_on_the_loop_leave_in_one_write(
    service_logging: io.StringIO,
) -> None:
    """On an event loop, request lines are held until the timer the first one armed
    fires (``HOLD_S``), across loop turns (at one client each request is a turn of its
    own), and leave in one write, the same lines as one write each; a line logged
    meanwhile (any thread's) is written after them, in order."""
    handler = _service_handler_only()
    stream = _CountedWrites()
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    access = logging.getLogger("app.access")
    for k in range(3):
        assert write_info(access, ACCESS, ARGS, {**FIELDS, "request_id": f"r-{k}"})
        await asyncio.sleep(0)  # a turn of its own
    assert stream.getvalue() == ""  # held until the timer fires
    await asyncio.sleep(logs.HOLD_S * 3)
    lines = stream.getvalue().splitlines()
    assert stream.writes == 1
    assert [json.loads(line)["request_id"] for line in lines] == ["r-0", "r-1", "r-2"]
    assert write_info(access, ACCESS, ARGS, FIELDS)
    logging.getLogger("app").warning("after the line")
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()[3:]] == [
        "POST /v1/models/iris/versions/1/predict 200 0.4 ms",
        "after the line",
    ]
    await asyncio.sleep(logs.HOLD_S * 3)
    assert len(stream.getvalue().splitlines()) == 5


async def test_at_most_hold_lines_are_held(service_logging: io.StringIO) -> None:
    handler = _service_handler_only()
    stream = _CountedWrites()
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)
    access = logging.getLogger("app.access")
    for _ in range(logs.HOLD_LINES - 1):
        assert write_info(access, ACCESS, ARGS, FIELDS)
    assert stream.writes == 0
    assert write_info(access, ACCESS, ARGS, FIELDS)
    assert stream.writes == 1 and stream.getvalue().count("\n") == logs.HOLD_LINES
    assert write_info(access, ACCESS, ARGS, FIELDS)  # rides the timer armed before
    await asyncio.sleep(logs.HOLD_S * 3)
    assert stream.writes == 2 and stream.getvalue().count("\n") == logs.HOLD_LINES + 1


def test_held_lines_are_written_at_the_end_of_logging(
    service_logging: io.StringIO,
) -> None:
    """``logging.shutdown`` (at exit) flushes the handler: the held lines are written,
    though their loop is gone."""
    _service_handler_only()

    async def served() -> None:
        assert write_info(logging.getLogger("app.access"), ACCESS, ARGS, FIELDS)

    asyncio.run(served())  # the loop closed before its timer fired
    assert service_logging.getvalue() == ""
    logging.shutdown(handlerList=[weakref.ref(h) for h in logging.getLogger().handlers])
    assert service_logging.getvalue().count("\n") == 1


async def test_held_lines_are_the_lines_written_at_once(service_logging: io.StringIO) -> None:
    """A held line is the line written off the loop, to the byte, and a flush, a new
    stream or the end of logging writes what is held first."""
    handler = _service_handler_only()
    access = logging.getLogger("app.access")
    assert write_info(access, ACCESS, ARGS, FIELDS)
    handler.flush()
    held = service_logging.getvalue()
    service_logging.seek(0)
    service_logging.truncate()
    assert await asyncio.to_thread(write_info, access, ACCESS, ARGS, FIELDS)
    assert service_logging.getvalue() == held and held.count("\n") == 1
    assert write_info(access, ACCESS, ARGS, FIELDS)
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(other := io.StringIO())
    assert service_logging.getvalue() == held * 2 and other.getvalue() == ""
