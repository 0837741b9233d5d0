"""The server's HTTP protocol (:mod:`app.server.http_protocol`): each answer in one write.

uvicorn's own protocol and ours serve the same requests from a real ASGI app over a
socket-like transport that records each ``write``: the bytes a client receives are the
same, in the same order; ours hands a small answer to the socket in one write where
uvicorn's takes two (head, then body).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from uvicorn.importer import import_from_string
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.server import launcher
from app.server.http_protocol import PROTOCOL, OneWriteHTTPProtocol

BIG = 200_000  # bytes: above what the protocol joins


async def _answer(request: Request) -> Response:
    size = int(request.query_params.get("size", "60"))
    headers = {"connection": "close"} if "close" in request.query_params else None
    return Response(b"x" * size, media_type="application/json", headers=headers)


async def _client(request: Request) -> Response:
    """The scope as the app sees it after uvicorn's proxy headers middleware."""
    client = request.scope.get("client")
    return Response(f"{client} {request.scope['scheme']}".encode(), media_type="text/plain")


async def _odd(request: Request) -> Response:
    """Heads off the common way: streamed (chunked), empty, odd headers, a bad header."""
    kind = request.query_params["kind"]
    if kind == "stream":
        return StreamingResponse(iter([b"ab", b"cd"]), media_type="text/plain")
    if kind == "no_content":
        return Response(status_code=204)
    if kind == "many":
        headers = {"Connection": "keep-alive, Close", "X-Odd": "a\tb", "Content-Language": "fr"}
        return Response(b"{}", status_code=418, headers=headers)
    return Response(b"{}", headers={"x-bad": "a\x01b"})  # uvicorn refuses the value


APP = Starlette(
    routes=[
        Route("/answer", _answer, methods=["GET", "POST"]),
        Route("/odd", _odd, methods=["GET", "POST", "HEAD"]),
        Route("/client", _client, methods=["GET"]),
    ]
)


class RecordingTransport(asyncio.Transport):
    """A connected socket's transport that keeps what is written, write by write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self.events.append("write")

    def close(self) -> None:
        self.closed = True
        self.events.append("close")

    def is_closing(self) -> bool:
        return self.closed

    peer = ("127.0.0.1", 5000)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peer, "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def _serve(
    protocol_class: type[asyncio.Protocol],
    *requests: bytes,
    access_log: bool = False,
    peer: tuple[str, int] = ("127.0.0.1", 5000),
) -> RecordingTransport:
    """``requests`` sent one after the other on one connection served by ``protocol_class``,
    uvicorn's access log off (as the service's logging leaves it) unless ``access_log``."""
    config = uvicorn.Config(APP, http=protocol_class, log_config=None, lifespan="off")
    config.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Sat, 28 Nov 2026 14:00:00 GMT"), (b"server", b"uvicorn")]
    loop = asyncio.new_event_loop()
    transport = RecordingTransport()
    transport.peer = peer
    try:
        protocol: Any = protocol_class(  # type: ignore[call-arg]
            config=config, server_state=state, app_state={}, _loop=loop
        )
        protocol.access_log = access_log
        protocol.connection_made(transport)
        for request in requests:
            protocol.data_received(request)
            loop.run_until_complete(_settled(state))
        protocol.connection_lost(None)
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    return transport


async def _settled(state: ServerState) -> None:
    """Until every request's task has ended (a loaded host may take its time), and one
    loop turn more (what the turn's end sends)."""
    await asyncio.sleep(0)
    for _ in range(500):
        if not state.tasks:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.01)


def _post(path: str, body: bytes = b"{}") -> bytes:
    head = f"POST {path} HTTP/1.1\r\nhost: t\r\ncontent-length: {len(body)}\r\n\r\n"
    return head.encode() + body


def test_a_small_answer_leaves_in_one_write_with_uvicorns_bytes() -> None:
    requests = (_post("/answer"), _post("/answer?size=3"), _post("/answer?size=0"))
    theirs = _serve(HttpToolsProtocol, *requests)
    ours = _serve(OneWriteHTTPProtocol, *requests)
    assert b"".join(ours.writes) == b"".join(theirs.writes)
    assert len(theirs.writes) == 6  # head and body of each answer
    assert len(ours.writes) == 3
    for write in ours.writes:
        assert write.startswith(b"HTTP/1.1 200 OK\r\n")


def test_a_big_answer_is_not_held_and_closing_sends_what_is_held_first() -> None:
    requests = (_post(f"/answer?size={BIG}"), _post("/answer?close=1"))
    theirs = _serve(HttpToolsProtocol, *requests)
    ours = _serve(OneWriteHTTPProtocol, *requests)
    assert b"".join(ours.writes) == b"".join(theirs.writes)
    assert len(ours.writes[1]) == BIG  # the big body on its own, after its head
    assert ours.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert ours.events.index("close") == len(ours.writes)  # every answer, then the close
    assert b"connection: close" in ours.writes[-1]


def test_a_malformed_request_gets_uvicorns_400_and_the_close() -> None:
    theirs = _serve(HttpToolsProtocol, b"NOT HTTP\r\n\r\n")
    ours = _serve(OneWriteHTTPProtocol, b"NOT HTTP\r\n\r\n")
    assert b"".join(ours.writes) == b"".join(theirs.writes)
    assert ours.writes[0].startswith(b"HTTP/1.1 400 Bad Request")
    assert ours.events.index("close") == len(ours.writes) == 1


def test_the_server_runs_this_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m app`` hands uvicorn the protocol by name; uvicorn resolves it."""
    given: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: given.update(options))
    launcher._uvicorn(launcher.load_settings(), "127.0.0.1", 8000, 1)
    assert given["http"] == PROTOCOL
    assert import_from_string(PROTOCOL) is OneWriteHTTPProtocol
    assert given["access_log"] is False  # the service writes its own request lines


def test_odd_heads_are_uvicorns_to_the_byte() -> None:
    """Streamed, empty, HEAD, closing, unusual status and headers, a refused header: the
    same bytes (and the same close) as uvicorn's own protocol."""
    requests = [
        _post("/odd?kind=stream"),
        _post("/odd?kind=no_content"),
        b"HEAD /odd?kind=stream HTTP/1.1\r\nhost: t\r\n\r\n",
        b"GET /answer?size=5 HTTP/1.0\r\nhost: t\r\n\r\n",
    ]
    for request in requests:
        theirs = _serve(HttpToolsProtocol, request)
        ours = _serve(OneWriteHTTPProtocol, request)
        assert b"".join(ours.writes) == b"".join(theirs.writes), request
        assert ours.closed == theirs.closed
    for request in (_post("/odd?kind=many"), _post("/odd?kind=bad"), _post("/answer?close=1")):
        theirs = _serve(HttpToolsProtocol, request, _post("/answer"))
        ours = _serve(OneWriteHTTPProtocol, request, _post("/answer"))
        assert b"".join(ours.writes) == b"".join(theirs.writes), request
        assert ours.closed == theirs.closed


def test_each_answer_asks_the_transport_nothing_through_getattr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """uvicorn asks ``is_closing`` after every answer: the held transport answers it
    itself (through ``__getattr__`` the normal lookup failed first, an AttributeError
    made and dropped inside Python); what it does not hold is still the real one's."""
    from app.server.http_protocol import TurnWriteTransport

    asked: list[str] = []
    forward = TurnWriteTransport.__getattr__

    def counted(self: TurnWriteTransport, name: str) -> Any:
        asked.append(name)
        return forward(self, name)

    monkeypatch.setattr(TurnWriteTransport, "__getattr__", counted)
    ours = _serve(OneWriteHTTPProtocol, _post("/answer"), _post("/answer?size=3"))
    assert len(ours.writes) == 2
    assert [name for name in asked if name != "get_extra_info"] == []
    held = TurnWriteTransport(RecordingTransport(), asyncio.new_event_loop())
    assert held.is_closing() is False
    held.close()
    assert held.is_closing() is True


def test_requests_of_a_turn_are_counted_until_their_app_call_begins() -> None:
    """Requests whose bytes arrive in one loop turn are parsed before any of their tasks
    runs: when each app call begins, the count holds the turn's requests still to run
    (:mod:`app.server.arrivals`, read by the batcher), and ends at zero."""
    from app.server.arrivals import ARRIVALS

    seen: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(ARRIVALS.waiting)
        headers = [(b"content-length", b"2")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"ok"})

    config = uvicorn.Config(app, log_config=None, lifespan="off")
    config.load()
    state = ServerState()
    loop = asyncio.new_event_loop()
    transports = [RecordingTransport() for _ in range(3)]
    try:
        protocols: list[Any] = [
            OneWriteHTTPProtocol(config=config, server_state=state, app_state={}, _loop=loop)
            for _ in transports
        ]
        for protocol, transport in zip(protocols, transports, strict=True):
            protocol.connection_made(transport)
        assert ARRIVALS.waiting == 0
        for protocol in protocols:  # three clients' bytes, one turn
            protocol.data_received(_post("/answer"))
        assert ARRIVALS.waiting == 3
        loop.run_until_complete(_settled(state))
        assert seen == [2, 1, 0]
        protocols[0].data_received(_post("/answer"))  # a lone one
        loop.run_until_complete(_settled(state))
        assert seen == [2, 1, 0, 0]
        assert ARRIVALS.waiting == 0
        for protocol in protocols:
            protocol.connection_lost(None)
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    for transport in transports:
        assert b"".join(transport.writes).endswith(b"\r\n\r\nok")


def test_uvicorns_own_answer_to_too_many_requests_is_not_counted() -> None:
    """Over ``limit_concurrency`` uvicorn answers 503 itself, without the app: nothing
    counted, nothing left waiting."""
    from app.server.arrivals import ARRIVALS

    config = uvicorn.Config(APP, log_config=None, lifespan="off", limit_concurrency=1)
    config.load()
    state = ServerState()
    loop = asyncio.new_event_loop()
    transport = RecordingTransport()
    try:
        protocol: Any = OneWriteHTTPProtocol(
            config=config, server_state=state, app_state={}, _loop=loop
        )
        protocol.connection_made(transport)
        protocol.data_received(_post("/answer"))
        loop.run_until_complete(_settled(state))
        protocol.connection_lost(None)
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert b"".join(transport.writes).startswith(b"HTTP/1.1 503")
    assert ARRIVALS.waiting == 0


def test_the_proxy_headers_are_uvicorns_for_every_client() -> None:
    """uvicorn's ``ProxyHeadersMiddleware`` is called only for a request it changes
    (a trusted client's forwarded headers): the app sees the same client and scheme as
    under uvicorn's own protocol, for a trusted client and one not trusted, with and
    without the headers, on one connection."""

    def get(headers: str = "") -> bytes:
        return f"GET /client HTTP/1.1\r\nhost: t\r\n{headers}\r\n".encode()

    requests = (
        get(),
        get("x-forwarded-for: 10.1.2.3, 10.0.0.9\r\n"),
        get("X-Forwarded-Proto: https\r\n"),
        get("x-forwarded-for: 10.1.2.3\r\nx-forwarded-proto: https\r\n"),
        get(),
    )
    for peer in (("127.0.0.1", 5000), ("10.9.9.9", 5001)):
        theirs = _serve(HttpToolsProtocol, *requests, peer=peer)
        ours = _serve(OneWriteHTTPProtocol, *requests, peer=peer)
        assert b"".join(ours.writes) == b"".join(theirs.writes)
        answers = b"".join(ours.writes)
        if peer[0] == "127.0.0.1":
            assert b"('10.0.0.9', 0) http" in answers and b"https" in answers
        else:
            assert b"10.0.0.9" not in answers and b"https" not in answers
