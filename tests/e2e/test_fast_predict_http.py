"""The one-row fast path behind a real uvicorn: the same bytes on the wire as the route.

Two servers over one data folder, one with the fast path (the default) and one without
(``ENSEMBLE_FAST_PREDICT=false``), get the same raw HTTP requests; everything they send
back is equal but the ``date`` header and the request ids the service makes (in the header
and in problems).
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable

from tests.api.support import forest, iris_csv
from tests.e2e.server import Server

ROW = b'{"instances": [{"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}], "options": {"return_proba": true}}'  # noqa: E501
BODIES = [ROW, b'{"instances": [{"sepal_length": "long"}]}', b'{"instances": [', b""]


def _raw(server: Server, path: str, body: bytes, content_type: bytes) -> bytes:
    """The whole answer to one POST, the volatile headers blanked."""
    request = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".encode()
        + b"Content-Type: "
        + content_type
        + f"\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        connection.sendall(request)
        received = b""
        while chunk := connection.recv(65536):
            received += chunk
    received = re.sub(rb"(?im)^date: .*\r\n", b"date: -\r\n", received)
    return re.sub(rb"\b[0-9a-f]{32}\b", b"<request id>", received)  # header and problems


def test_the_fast_path_sends_the_routes_bytes(servers: Callable[..., Server]) -> None:
    fast = servers()
    with fast.client() as client:
        upload = client.post(
            "/v1/datasets",
            files={"file": ("iris.csv", iris_csv().encode(), "text/csv")},
            data={"name": "iris"},
        )
        assert upload.status_code == 201, upload.text
        trained = client.post(
            "/v1/models/iris/versions?wait=true", json=forest(upload.json()["id"], 5)
        )
        assert trained.status_code == 201, trained.text
    routed = servers(ENSEMBLE_FAST_PREDICT="false")
    for path in ("/v1/models/iris/versions/1/predict", "/v1/models/iris/versions/7/predict"):
        for body in BODIES:
            for media in (b"application/json", b"text/csv"):
                one, other = (_raw(s, path, body, media) for s in (fast, routed))
                assert one == other, (path, body, media)
                assert one.startswith(b"HTTP/1.1 "), one
    answer = _raw(fast, "/v1/models/iris/versions/1/predict", ROW, b"application/json")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and b'"probabilities":' in answer
