"""Structured logs: one JSON object per line, tagged with the id of the request served.

Call sites log an event with its fields: ``log.info("...", extra={"fields": {...}})``.
Every line carries ``time``, ``level``, ``logger``, ``pid`` (the process that wrote it:
the launcher, one of the server processes, a training worker), ``message``, the fields,
and the ``request_id`` of the request being served (a context variable, so lines logged
in the worker threads of that request have it too). Nothing logs headers or bodies: API keys
and uploaded data never reach a log line.

:func:`configure_logging` is for the server process (and training workers) only; the
app factory calls it when it builds the app uvicorn serves, and it replaces uvicorn's
access log with the request lines of :class:`app.middleware.RequestMiddleware`.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import re
import sys
import threading
import time
from collections import deque
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Final, Literal

import orjson

REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
REQUEST_ID_HEADER: Final = "X-Request-ID"
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_UVICORN: Final = ("uvicorn", "uvicorn.error")


def request_id_from(header: str | None) -> str:
    """The caller's request id when it is a plausible one, else a new random id."""
    if header is not None and _REQUEST_ID.fullmatch(header):
        return header
    return new_request_id()


def new_request_id() -> str:
    """``uuid.uuid4().hex``, the same 32 digits (random, with the version and variant
    bits of a version 4 UUID) without a ``UUID`` object, taken from a pool drawn
    ``_ID_POOL`` at a time: one ``os.urandom`` call and one ``hex`` for 256 ids instead
    of each (every request that brings no id pays for one: 1.7 us, 0.2 from the pool).
    The pool is emptied in a forked child, so parent and child never hand out the same
    ids; ``deque.popleft`` is atomic, so two threads never take the same one."""
    while True:
        try:
            return _IDS.popleft()
        except IndexError:
            _IDS.extend(_drawn_ids(_ID_POOL))


def _drawn_ids(count: int) -> list[str]:
    """``count`` new ids: ``count`` x 16 random bytes, each 16 marked as UUID 4's."""
    raw = bytearray(os.urandom(16 * count))
    raw[6::16] = bytes(b & 0x0F | 0x40 for b in raw[6::16])  # version 4
    raw[8::16] = bytes(b & 0x3F | 0x80 for b in raw[8::16])  # RFC 4122 variant
    text = raw.hex()
    return [text[32 * k : 32 * k + 32] for k in range(count)]


_ID_POOL: Final = 256
_IDS: deque[str] = deque()  # ids drawn, not yet handed out
os.register_at_fork(after_in_child=_IDS.clear)


def _entry(
    created: float, level: str, name: str, pid: int | None, message: str, fields: object
) -> dict[str, Any]:
    """A line's JSON object, as :class:`JsonFormatter` and :func:`write_info` write it."""
    return {
        "time": time_text(created),
        "level": level,
        "logger": name,
        "pid": pid,
        "message": message,
        **_fields(fields),
    }


def time_text(created: float) -> str:
    """``datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")`` with
    ``Z`` for ``+00:00``, the same characters, its date and time of day made once per
    second: every request writes a line, and the datetime cost a third of its Python.

    The microseconds are rounded as ``fromtimestamp`` rounds them (half to even, a carry
    into the next second; CPython's ``_PyTime_DoubleToDenominator``), then cut to
    milliseconds as ``isoformat`` cuts them; other moments (before 1970) take the
    datetime's own way."""
    fraction, whole = math.modf(created)
    micro = round(fraction * 1e6)
    if micro >= 1_000_000:
        micro -= 1_000_000
        whole += 1.0
    if not 0 <= micro < 1_000_000 or whole < 0:
        moment = datetime.fromtimestamp(created, UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    second = int(whole)
    cached = _SECOND
    if cached[0] != second:
        moment = datetime.fromtimestamp(second, UTC).replace(tzinfo=None)
        cached[:] = [second, moment.isoformat(timespec="seconds")]
    text: str = cached[1]
    return text + _MILLIS[micro // 1000]


_SECOND: list[Any] = [None, ""]  # the last whole second written, and its text
_MILLIS: Final = tuple(f".{ms:03d}Z" for ms in range(1000))  # (a formatted field cost 0.3 us)


def _fields(fields: object) -> dict[str, Any]:
    """A record's ``fields`` (its ``extra``), then the request id of the request being
    served unless they name one."""
    out: dict[str, Any] = dict(fields) if isinstance(fields, dict) else {}
    request_id = REQUEST_ID.get()
    if request_id is not None:
        out.setdefault("request_id", request_id)
    return out


class JsonFormatter(logging.Formatter):
    """A log record as one line of JSON."""

    def format(self, record: logging.LogRecord) -> str:
        entry = _entry(
            record.created,
            record.levelname.lower(),
            record.name,
            record.process,
            record.getMessage(),
            getattr(record, "fields", None),
        )
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        # orjson: a request line is written for every request, and json.dumps cost 5x more.
        return orjson.dumps(entry, default=str).decode()


def write_info(
    logger: logging.Logger, msg: str, args: tuple[Any, ...], fields: dict[str, Any]
) -> bool:
    """``logger.info(msg, *args, extra={"fields": fields})``'s line written straight to the
    service's handler, when logging would write only that line, through that handler and
    formatter (the configuration :func:`configure_logging` makes); False otherwise (a
    filter, another handler, the text format, a test's capture): the caller logs it.

    The request line is written for every request: through ``logging`` it took a dozen
    Python calls (a ``LogRecord`` with fields no line prints, filters, locks, handlers
    looked up level by level), a large share of a one-row prediction's Python
    (issue 24).  The line is the formatter's own, to the byte.  On an event loop it is
    held by the handler for at most 20 ms (:meth:`_ServiceHandler.hold`): the lines held
    leave in one write.
    """
    if logger.filters or not logger.isEnabledFor(logging.INFO):
        return False
    handler = _only_handler(logger)
    if handler is None:
        return False
    pid = os.getpid() if logging.logProcesses else None
    message = msg % args if args else msg
    created = time.time()
    if "request_id" in fields:  # (a request line): _entry's object, fields not copied
        entry = {
            "time": time_text(created),
            "level": "info",
            "logger": logger.name,
            "pid": pid,
            "message": message,
            **fields,
        }
    else:
        entry = _entry(created, "info", logger.name, pid, message, fields)
    line = orjson.dumps(entry, default=str).decode() + handler.terminator
    loop = asyncio.events._get_running_loop()  # the C call: None off the loop
    if loop is not None:
        handler.hold(line, loop)
        return True
    handler.acquire()
    try:
        handler.write_held()
        handler.stream.write(line)
        handler.flush()
    except RecursionError:  # as StreamHandler.emit
        raise
    except Exception:
        handler.handleError(logger.makeRecord(logger.name, logging.INFO, "", 0, msg, args, None))
    finally:
        handler.release()
    return True


def _only_handler(logger: logging.Logger) -> _ServiceHandler | None:
    """The handler a record of ``logger`` at INFO reaches, when it is the only one, is
    the service's with the JSON formatter, and filters nothing; else None."""
    found: list[logging.Handler] = []
    current: logging.Logger | None = logger
    while current is not None:
        found += current.handlers
        if not current.propagate:
            break
        current = current.parent
    if len(found) != 1:
        return None
    handler = found[0]
    if not isinstance(handler, _ServiceHandler) or handler.filters:
        return None
    if type(handler.formatter) is not JsonFormatter or handler.level > logging.INFO:
        return None
    return handler


class TextFormatter(logging.Formatter):
    """``time LEVEL logger[pid]: message key=value ...`` for a human at a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = _fields(getattr(record, "fields", None))
        extra = " ".join(f"{key}={value}" for key, value in fields.items())
        if not extra:
            return line
        head, sep, tail = line.partition("\n")  # keep a traceback below the fields
        return f"{head} {extra}{sep}{tail}"


HOLD_S: Final = 0.02  # seconds a request line may be held on the loop, at most
HOLD_LINES: Final = 64  # lines held at most: more are written at once


class _ServiceHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler this module installs (configuring twice replaces it), holding the
    request lines written on an event loop for up to ``HOLD_S`` (20 ms).

    Every request wrote its line with a write of its own (a system call, and a flush),
    then (issue 24) the lines of one loop turn together; but at one client every
    request is its own turn, and its write, with the ``call_soon`` that scheduled it,
    was ~4 us of the ~370 us of CPU a one-row request costs (issue 24.3; at one client
    the server is CPU-bound, so that is latency too).  :func:`write_info` on the loop
    hands the line to :meth:`hold`: the first line held arms a timer (``call_later``),
    and every line held until it fires leaves with it, joined, in one write (at most
    ``HOLD_LINES``: the 64th line writes them all at once).

    Why no line is lost or reordered: the held lines are written before any other line
    this handler writes (:meth:`emit`, from any thread, so a warning logged after a
    request still comes after its line), at any flush, at a change of stream and at the
    close: ``logging.shutdown`` (at exit, after uvicorn's graceful shutdown, whose own
    messages already wrote them) flushes every handler.  The same bytes, in the same
    order, to the same stream, at most 20 ms later.  What can be lost is what a process
    killed outright (SIGKILL, a crash in C) had not written: the last 20 ms of request
    lines instead of the last loop turn's; a forked child drops the lines it inherited
    (the parent writes them).
    """

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stream)
        self._held: list[str] = []
        self._held_by = 0  # the process that holds them (a forked child drops them)
        self._held_on: asyncio.AbstractEventLoop | None = None  # the loop of the timer
        self._timer: asyncio.TimerHandle | None = None  # armed, not yet fired
        self._guard = threading.RLock() if self.lock is None else self.lock

    def hold(self, line: str, loop: asyncio.AbstractEventLoop) -> None:
        """``line`` written within ``HOLD_S`` (see the class)."""
        with self._guard:  # (the Handler's lock: another thread's emit writes them)
            if self._timer is None or self._held_on is not loop:  # (a loop closed since?)
                self._held_by = os.getpid()
                self._held_on = loop
                self._timer = loop.call_later(HOLD_S, self._write_due)
            held = self._held
            held.append(line)
            if len(held) >= HOLD_LINES:
                self.write_held()

    def _write_due(self) -> None:
        """The timer fired: write what is held (lines held since ride the next one)."""
        with self._guard:
            self._timer = None
            self.write_held()

    def write_held(self) -> None:
        """Write the lines held, in one write."""
        with self._guard:
            held = self._held
            if not held:
                return
            self._held = []
            if self._held_by != os.getpid():
                return  # a forked child: the parent writes them
            try:
                self.stream.write(held[0] if len(held) == 1 else "".join(held))
                logging.StreamHandler.flush(self)
            except RecursionError:  # as StreamHandler.emit
                raise
            except Exception:
                self.handleError(logging.makeLogRecord({"msg": "request lines"}))

    def emit(self, record: logging.LogRecord) -> None:
        if self._held:  # (the lock is held: Handler.handle takes it)
            self.write_held()
        super().emit(record)

    def flush(self) -> None:
        self.write_held()
        super().flush()


def configure_logging(level: str, fmt: Literal["json", "text"]) -> None:
    """Send every log line of this process to stderr in ``fmt``; silence uvicorn's
    access log (the service writes its own request lines) and route uvicorn's other
    messages through the same handler. Python's warnings too (numpy's ``RuntimeWarning``
    on an overflow, scikit-learn's): they are logged by ``py.warnings`` rather than
    printed raw, which would break the one object per line."""
    handler = _ServiceHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.setLevel(level)
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _ServiceHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
    # Every record would look up its caller's file and line (a walk up the stack), its
    # thread and its process name, which no line here prints: a request's access line
    # cost ~10 us more (the logging HOWTO's "Optimization"). The pid stays.
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False
    for name in _UVICORN:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    access = logging.getLogger("uvicorn.access")
    access.handlers.clear()
    access.propagate = False
    access.disabled = True
