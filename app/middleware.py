"""ASGI middleware: one observer of every request, and a bound on request bodies."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.logs import REQUEST_ID, REQUEST_ID_HEADER, request_id_from, write_info
from app.metrics import UNMATCHED, Metrics
from app.problems import BodyTooLargeError, problem_body, problem_response
from ensembles import Problem

access_log = logging.getLogger("app.access")
log = logging.getLogger("app")
_REQUEST_ID_KEY = REQUEST_ID_HEADER.lower().encode("latin-1")
_ACCESS_LINE = "%s %s %s %.1f ms"


class RequestMiddleware:
    """The outermost layer: a request id, the request's metrics and its log line.

    The id is the caller's ``X-Request-ID`` when it is a plausible one (letters, digits,
    ``._:-``, at most 128), else a new one; it is sent back in the same header and tags
    every log line written while the request is served. Metrics and the log line name
    the route template (``/v1/models/{name}``), never the raw path, so their label sets
    stay bounded. An unexpected exception becomes a 500 problem here, so that answer
    carries the request id too (the stack trace goes to the log, never to the client).
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.observe(scope, receive, send, self.app)

    async def observe(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        inner: ASGIApp,
        edge: Callable[[Message], None] | None = None,
    ) -> None:
        """``inner``'s answer to the HTTP request ``scope``, observed as this layer
        observes every request: the app's front door (:mod:`app.front`) calls it with the
        fast path as ``inner``, so its requests have the same id, metrics and line.

        ``edge``: called with the answer's start message after this layer's header is
        set, before it is sent: the front door's work of the layer outside this one
        (:func:`app.edge.secure`), without a ``send`` wrapper of its own (a coroutine
        more for each message of every request)."""
        request_id = request_id_from(_header(scope["headers"], _REQUEST_ID_KEY))
        token = REQUEST_ID.set(request_id)
        started = time.perf_counter()
        status = 500
        response_started = False

        async def sending(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = int(message["status"])
                response_started = True
                _set_header(message, _REQUEST_ID_KEY, request_id.encode("latin-1"))
                if edge is not None:
                    edge(message)
            await send(message)

        self.metrics.request_started()
        try:
            await inner(scope, receive, sending)
        except Exception:
            log.exception("unhandled error in %s %s", scope["method"], scope["path"])
            if response_started:
                raise
            detail = "an unexpected error occurred; it has been logged"
            body = problem_body("internal", detail, instance=scope["path"])
            await problem_response(body)(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            self.metrics.request_ended()
            self._record(scope, status, seconds, request_id)
            REQUEST_ID.reset(token)

    def _record(self, scope: Scope, status: int, seconds: float, request_id: str) -> None:
        route = getattr(scope.get("route"), "path", None) or UNMATCHED
        method = str(scope["method"])
        self.metrics.observe_request(method, route, status, seconds)
        if not access_log.isEnabledFor(logging.INFO):
            return  # no line to write: nothing to format
        duration_ms = round(seconds * 1000, 2)
        path = scope["path"]
        fields = {
            "event": "request",
            "method": method,
            "route": route,
            "path": path,
            "status": status,
            "duration_ms": duration_ms,
            "request_id": request_id,
        }
        # _ACCESS_LINE's text: an f-string formats it in a third of the time of "%".
        message = f"{method} {path} {status} {duration_ms:.1f} ms"
        if not write_info(access_log, message, (), fields):
            args = (method, path, status, duration_ms)
            access_log.info(_ACCESS_LINE, *args, extra={"fields": fields})


def _header(headers: Iterable[tuple[bytes, bytes]], key: bytes) -> str | None:
    """The first value of the (lower case) header ``key``, as Starlette's ``Headers.get``
    reads it, without building a ``Headers`` for every request."""
    for name, value in headers:
        if name == key:
            return value.decode("latin-1")
    return None


def _set_header(message: Message, key: bytes, value: bytes) -> None:
    """``MutableHeaders(scope=message)[key] = value`` in one pass: the first ``key``
    replaced and the others removed, else appended."""
    headers = message["headers"] = list(message.get("headers", ()))
    found = [index for index, (name, _) in enumerate(headers) if name == key]
    for index in reversed(found[1:]):
        del headers[index]
    if found:
        headers[found[0]] = (key, value)
    else:
        headers.append((key, value))


class BodyLimitMiddleware:
    """Refuse bodies over ``max_bytes`` with 413: at once by Content-Length, else as soon
    as the bytes received pass the bound (a chunked upload is never read to its end)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    def _error(self, size: str) -> BodyTooLargeError:
        msg = f"{size} bytes; the limit is {self.max_bytes} (ENSEMBLE_MAX_UPLOAD_BYTES)"
        return BodyTooLargeError("the request body is too large", [Problem(("body",), msg)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for key, value in scope.get("headers", []):
            if key == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                exc = self._error(value.decode())
                body = problem_body(
                    exc.code, exc.detail, problems=exc.problems, instance=scope["path"]
                )
                response = problem_response(body, {"Connection": "close"})
                await response(scope, receive, send)
                return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise self._error(f"more than {self.max_bytes}")
            return message

        await self.app(scope, limited, send)
