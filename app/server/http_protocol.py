"""uvicorn's HTTP protocol with each response sent in one write instead of two.

uvicorn writes a response's head (status line and headers) as soon as the app sends
``http.response.start``, then the body in a second ``transport.write``: two ``send``
calls for every small answer, and on loopback each wakes the client's reader once. In
py-spy's samples of the server under 16 one-row clients, 41% of the non-idle samples were
in ``transport.write`` (issue 24, docs/performance.md). Here the protocol's transport
holds a write made when nothing is held (a head) until the next write (its body: both
leave at once, joined, in one ``send``) or the end of the event-loop turn
(``loop.call_soon``), whichever comes first. (Holding every write of a turn until its
end was tried first: with 16 clients every answer of a turn then waited for the turn's
last prediction, and the server's CPU per request rose, 625 -> 663 us.) The bytes,
their order and every header are uvicorn's own; only how they are cut into ``send``
calls changes, which TCP does not show a client. A large write (``_JOIN_MAX``) goes
out at once with what is held, so big answers are neither copied nor delayed and
uvicorn's flow control sees the real buffer; closing flushes first.

The response head is uvicorn's too, made with less work (:class:`LeanHeadCycle`): uvicorn
checks each header's name and value with a regular expression of its own (twelve
searches for a one-row prediction's six headers); here each set is searched once, joined
(a character of either class is in the joined bytes exactly when it is in one of them),
and anything the checks refuse, or any answer outside the common case, is uvicorn's own
``send`` with its own error.  The transport answers ``is_closing`` itself: found through
``__getattr__``, uvicorn's check after every answer first raised an AttributeError
inside Python.

Passed to uvicorn as ``http=`` by :mod:`app.server.launcher` (a string, so server
processes started by uvicorn's supervisor import it too).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

try:
    from uvicorn.protocols.http import httptools_impl as _impl
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - uvicorn's own choice without httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

    _impl = None  # type: ignore[assignment]  # h11's cycle is its own: left as it is

__all__ = ["PROTOCOL", "LeanHeadCycle", "OneWriteHTTPProtocol", "TurnWriteTransport"]

PROTOCOL: Final = "app.server.http_protocol:OneWriteHTTPProtocol"
_JOIN_MAX: Final = 64 * 1024  # bytes: a larger write is not held nor copied


class TurnWriteTransport:
    """A transport that holds a write made when nothing is held until the next write or
    the end of the event-loop turn, so an answer's head and body reach the real one as one.

    Everything else is the real transport's (``__getattr__``); what could see the held
    bytes (closing, ``write_eof``, the buffer size) flushes them or counts them first.
    """

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._held_bytes = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if len(data) > _JOIN_MAX:
            self.flush()
            self._transport.write(data)
        elif self._held:  # the body after its head: both leave now
            self._held.append(bytes(data))
            self.flush()
        else:  # held until the next write or the end of the loop turn
            self._loop.call_soon(self.flush)
            self._held.append(bytes(data))
            self._held_bytes += len(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Hand what is held to the real transport, in one write."""
        held = self._held
        if not held:
            return
        self._held = []
        self._held_bytes = 0
        self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._held = []
        self._held_bytes = 0
        self._transport.abort()

    def is_closing(self) -> bool:
        return bool(self._transport.is_closing())

    def get_write_buffer_size(self) -> int:
        return int(self._transport.get_write_buffer_size()) + self._held_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


_Cycle: Any = getattr(_impl, "RequestResponseCycle", None)
_HEAD_CHECKS: tuple[Any, Any] = (
    getattr(_impl, "HEADER_RE", None),
    getattr(_impl, "HEADER_VALUE_RE", None),
)
_STATUS_LINE: dict[int, bytes] = getattr(_impl, "STATUS_LINE", {})
_LEAN: Final = _Cycle is not None and None not in _HEAD_CHECKS and bool(_STATUS_LINE)


class LeanHeadCycle(_Cycle if _LEAN else object):  # type: ignore[misc]
    """uvicorn's request-response cycle (httptools) writing a response head as uvicorn's
    ``send`` writes it, with its header checks made once per set instead of per header.

    Only the common head takes this way (a response not yet started, the connection
    writable, uvicorn's access log off as the service keeps it, a known status, every
    header bytes and accepted by both checks); everything else, an error included, is
    uvicorn's own ``send``."""

    async def send(self, message: Any) -> None:
        head = self._lean_head(message)
        if head is None:
            await super().send(message)
        else:
            self.transport.write(head)

    def _lean_head(self, message: Any) -> bytes | None:
        """The head's bytes, its state set as uvicorn sets it; None: uvicorn's ``send``."""
        cycle: Any = self  # uvicorn's attributes (its class is untyped here)
        if (
            cycle.response_started
            or cycle.disconnected
            or cycle.access_log
            or cycle.flow.write_paused
            or message["type"] != "http.response.start"
        ):
            return None
        status_code = message["status"]
        status_line = _STATUS_LINE.get(status_code) if type(status_code) is int else None
        headers = cycle.default_headers + list(message.get("headers", []))
        try:
            names = b"".join([name for name, _ in headers])
            values = b"".join([value for _, value in headers])
        except (TypeError, ValueError):
            return None
        name_check, value_check = _HEAD_CHECKS
        if status_line is None or name_check.search(names) or value_check.search(values):
            return None
        cycle.response_started = True
        cycle.waiting_for_100_continue = False
        content = [status_line]
        has_connection_close = False
        for raw_name, value in headers:  # uvicorn's loop, without its two searches
            name = raw_name.lower()
            if name == b"content-length" and cycle.chunked_encoding is None:
                cycle.expected_content_length = int(value.decode())
                cycle.chunked_encoding = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                cycle.expected_content_length = 0
                cycle.chunked_encoding = True
            elif name == b"connection":
                connection = [token.lower().strip() for token in value.split(b",")]
                if b"close" in connection:
                    cycle.keep_alive = False
                    has_connection_close = True
            content.extend([name, b": ", value, b"\r\n"])
        if not cycle.keep_alive and not has_connection_close:
            content.append(b"connection: close\r\n")
        if (
            cycle.chunked_encoding is None
            and cycle.scope["method"] != "HEAD"
            and status_code not in (204, 304)
        ):
            cycle.chunked_encoding = True
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        return b"".join(content)


class OneWriteHTTPProtocol(_Base):
    """uvicorn's HTTP protocol (httptools when installed, as uvicorn's ``auto`` picks)
    writing through a :class:`TurnWriteTransport`, each cycle a :class:`LeanHeadCycle`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        held = TurnWriteTransport(transport, self.loop)
        super().connection_made(held)  # type: ignore[arg-type]

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        """uvicorn's, the cycle made a :class:`LeanHeadCycle` first (the same object and
        state: the subclass only adds behaviour)."""
        if _LEAN and type(cycle) is _Cycle:
            cycle.__class__ = LeanHeadCycle
        super()._start_asgi_task(cycle, app)
