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

The transport answers ``is_closing`` itself: found through ``__getattr__``, uvicorn's
check after every answer first failed the normal lookup (an AttributeError made and
dropped) before the Python call; it is now the real transport's bound method, set on
the instance, so the check is a C call.  (uvicorn's response head was also made with its header
checks joined into two searches instead of two per header: measured alternating, it cost
more than the ten regular-expression calls it saved, and was dropped.)

The protocol also counts the requests it has taken whose app call has not begun
(:mod:`app.server.arrivals`): the batcher's way to know, at the first prediction of a
loop turn, that others came with it; and it calls uvicorn's ``ProxyHeadersMiddleware``
only for the requests it changes (:class:`_Begun`).

Passed to uvicorn as ``http=`` by :mod:`app.server.launcher` (a string, so server
processes started by uvicorn's supervisor import it too).
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from app.server.arrivals import ARRIVALS

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - uvicorn's own choice without httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

__all__ = ["PROTOCOL", "OneWriteHTTPProtocol", "TurnWriteTransport"]

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
        # The real transport's own method, bound: uvicorn asks after every answer, and
        # this skips a Python frame of ours (the method below is its documentation).
        self.is_closing = transport.is_closing  # type: ignore[method-assign]
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
        return self._transport.is_closing()

    def get_write_buffer_size(self) -> int:
        return int(self._transport.get_write_buffer_size()) + self._held_bytes

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHTTPProtocol(_Base):
    """uvicorn's HTTP protocol (httptools when installed, as uvicorn's ``auto`` picks)
    writing through a :class:`TurnWriteTransport`, and counting the requests whose app
    call has not begun (:mod:`app.server.arrivals`)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        held = TurnWriteTransport(transport, self.loop)
        self._begun = _Begun(self.app)
        super().connection_made(held)  # type: ignore[arg-type]

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        if app is self.app:  # (uvicorn's 503 for too many connections is not counted)
            ARRIVALS.waiting += 1
            app = self._begun
        super()._start_asgi_task(cycle, app)


_UNSEEN: Final = object()  # no client seen yet
_FORWARDED: Final = (b"x-forwarded-for", b"x-forwarded-proto")


class _Begun:
    """The app, its call uncounting the request (:mod:`app.server.arrivals`), and
    uvicorn's ``ProxyHeadersMiddleware`` called only for a request it changes.

    uvicorn wraps the app in that middleware (``proxy_headers``, on by default): for
    every request it ran a coroutine of its own and looked the client's address up in
    the trusted hosts (``_TrustedHosts.__contains__``, an LRU cache behind a Python call):
    ~3-4 us of a one-row request's CPU (issue 24.3).  It changes the scope only for a
    client it trusts that sent ``X-Forwarded-For`` or ``X-Forwarded-Proto``.  The
    client's address is the connection's, the same object in every scope of it
    (``HttpToolsProtocol.client``), so whether it is trusted is asked once per
    connection (of the middleware's own hosts); a request without those headers, or
    from a client not trusted, goes straight to the app the middleware wraps, and any
    other to the middleware itself: the same scope either way.
    """

    __slots__ = ("_client", "_hosts", "_trusted", "app", "inner")

    def __init__(self, app: Any) -> None:
        self.app = app
        self.inner = app.app if type(app) is ProxyHeadersMiddleware else None
        self._hosts: Any = getattr(app, "trusted_hosts", None)
        self._client: Any = _UNSEEN
        self._trusted = True

    def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        # Not a coroutine of its own: the app's, returned, is what uvicorn awaits.
        ARRIVALS.waiting -= 1
        inner = self.inner
        if inner is not None:
            client = scope.get("client")
            if client is not self._client:
                self._client = client
                self._trusted = (client[0] if client else None) in self._hosts
            if not self._trusted:
                return inner(scope, receive, send)
            for name, _ in scope["headers"]:
                if name in _FORWARDED:
                    return self.app(scope, receive, send)
            return inner(scope, receive, send)
        return self.app(scope, receive, send)
