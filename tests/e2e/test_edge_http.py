"""The edge of the app behind a real uvicorn: its ``raw_path``, its handling of HEAD
(headers only on the wire) and a ``Host`` header a caller chose."""

from __future__ import annotations

import socket
from collections.abc import Callable

from tests.e2e.server import Server


def _raw(server: Server, request: bytes) -> bytes:
    """Everything the server sends back to ``request`` until it closes the connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    return received


def test_encoded_slash_head_and_redirects_on_a_real_server(
    servers: Callable[..., Server],
) -> None:
    server = servers()
    with server.client() as client:
        slashed = client.get("/v1/models/iris-rf%2Fversions%2F2")
        assert slashed.status_code == 404, slashed.text
        assert slashed.json()["instance"] == "/v1/models/iris-rf%2Fversions%2F2"
        assert client.get("/v2/models/a%2fb").json()["error"].startswith("no such path")
        got = client.get("/metrics")
        docs = client.get("/docs/", headers={"Host": "evil.example.com"})
    assert docs.status_code == 307 and docs.headers["location"] == "/docs"
    for answer in (slashed, got, docs):
        assert answer.headers["x-content-type-options"] == "nosniff"
    head = _raw(server, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, _, rest = head.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status == b"HTTP/1.1 200 OK", head
    assert b"content-length: 15" in headers.lower(), head  # {"status":"ok"}, as GET sends
    assert body == b"", head
