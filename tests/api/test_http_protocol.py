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
from starlette.responses import Response
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


APP = Starlette(routes=[Route("/answer", _answer, methods=["GET", "POST"])])


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

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0


def _serve(protocol_class: type[asyncio.Protocol], *requests: bytes) -> RecordingTransport:
    """``requests`` sent one after the other on one connection served by ``protocol_class``."""
    config = uvicorn.Config(APP, http=protocol_class, log_config=None, lifespan="off")
    config.load()
    state = ServerState()
    state.default_headers = [(b"date", b"Sat, 28 Nov 2026 14:00:00 GMT"), (b"server", b"uvicorn")]
    loop = asyncio.new_event_loop()
    transport = RecordingTransport()
    try:
        protocol: Any = protocol_class(  # type: ignore[call-arg]
            config=config, server_state=state, app_state={}, _loop=loop
        )
        protocol.connection_made(transport)
        for request in requests:
            protocol.data_received(request)
            loop.run_until_complete(asyncio.sleep(0.05))
        protocol.connection_lost(None)
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    return transport


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
