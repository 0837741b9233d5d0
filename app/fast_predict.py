"""The one-row fast path: ``POST /v1/models/{name}/versions/{ref}/predict`` with a small
JSON body, answered without FastAPI's routing, request object and dependency resolution.

Those cost a one-row prediction more than the prediction itself (figures:
docs/performance.md). This middleware sits inside :class:`app.middleware.RequestMiddleware`
and :class:`app.edge.HeadersMiddleware`, so the request id, metrics, access log and
security headers are theirs as for any request (when those are the app's outermost
layers, :mod:`app.front` calls the three directly, skipping FastAPI's and Starlette's
own), and serves only what it can answer
exactly as the FastAPI route does (:func:`app.routes.predictions.predict`): the same
path patterns, the same ``read`` check of the API key, the same service call
(:func:`app.services.predictions.predict_version`), the same response and background
shadow, the same problem for an error (the app's own exception handler). Small table
bodies (Arrow IPC, Parquet; up to 64 KiB: a one-row Parquet file is 19 kB) are served
too, with the route's own reading of the options in the query string
(:func:`app.routes.predictions.query_options`; a JSON body's options still win over
them): FastAPI's router cost a one-row Arrow request as much again as the rest of it.
Anything else goes on to FastAPI untouched, the body it read replayed: a path the route
would refuse or that holds an escape, query options the route would refuse, a root
path, a body of another type, unsized or larger, a missing, unknown or too weak key, a
client gone before the body arrived.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any, Final, NamedTuple

from fastapi.routing import APIRoute
from starlette.background import BackgroundTask
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.bodies import TABLE_MEDIA_TYPES, TableFormat, is_json
from app.deps import read_allowed
from app.problems import InvalidRequestError
from app.routes import predictions
from app.schemas.models import MODEL_NAME, VERSION_REF
from app.schemas.predictions import PredictOptionsIn
from app.services.container import Services
from app.services.predictions import (
    INLINE_MAX_BYTES,
    TABLE_INLINE_MAX_BYTES,
    predict_table,
    predict_version,
)
from ensembles import EnsembleError

PREDICT_PATH: Final = "/v1/models/{name}/versions/{ref}/predict"
_PATH: Final = re.compile(r"/v1/models/([^/]+)/versions/([^/]+)/predict")
_NAME: Final = re.compile(MODEL_NAME)
_REF: Final = re.compile(VERSION_REF)
_WANTED: Final = frozenset(
    {b"content-type", b"content-length", b"authorization", b"x-routing-key", b"transfer-encoding"}
)
_KEPT: Final = 64  # query strings, paths and media types whose reading is kept
_KEPT_LENGTH: Final = 256  # longer ones are read each time
Handler = Callable[[Request, Exception], Awaitable[Response]]


class Served(NamedTuple):
    """What the route would read of a request this path serves."""

    name: str
    ref: str
    key: str | None  # the routing key of a weighted alias
    size: int  # the body's announced length
    fmt: TableFormat | None  # None: a JSON body
    options: PredictOptionsIn | None  # given in the query string
    services: Services  # the app's (read once: Starlette's State is a Python lookup)


class FastPredictMiddleware:
    """Small JSON prediction requests answered here; every other request passes on."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_body = min(INLINE_MAX_BYTES, max_bytes)  # a JSON body's
        # A table body's: a one-row Parquet file is 19 kB (the service decides whether
        # it is answered inline, as for the route).
        self.max_table_body = min(TABLE_INLINE_MAX_BYTES, max_bytes)
        self.answered = 0  # requests this path answered itself (the tests read it)
        self._queries: dict[bytes, PredictOptionsIn | None] = {}  # see _query_options
        self._routes: dict[str, tuple[str, str] | None] = {}  # see _route
        self._media: dict[bytes, tuple[bool, TableFormat | None]] = {}  # see _media_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        params = self.served(scope)
        if params is None:
            await self.app(scope, receive, send)
            return
        await self.serve(scope, receive, send, params)

    async def serve(self, scope: Scope, receive: Receive, send: Send, params: Served) -> None:
        """The answer to a request :meth:`served` took: the route's, or, when the body is
        not the small one announced, the next layer's (the body read replayed)."""
        messages, body = await _read_body(receive, params.size)
        if body is None:
            await self.app(scope, _replay(messages, receive), send)
            return
        await self._predict(scope, receive, send, params, body)

    def served(self, scope: Scope) -> Served | None:
        """What the route would read, when this path serves the request (``scope["app"]``
        set, as Starlette sets it before any middleware runs)."""
        if scope["type"] != "http" or scope["method"] != "POST":
            return None
        path = scope["path"]
        found = self._routes[path] if path in self._routes else self._route(path)
        if found is None or scope.get("root_path") or b"%" in (scope.get("raw_path") or b"%"):
            return None
        name, ref = found
        headers = _first_headers(scope)
        length = headers.get(b"content-length", b"")
        if b"transfer-encoding" in headers or not length.isdigit():
            return None
        size = int(length)
        typed = headers.get(b"content-type", b"")
        media = self._media[typed] if typed in self._media else self._media_of(typed)
        fmt = media[1]
        if not media[0] or size > (self.max_body if fmt is None else self.max_table_body):
            return None
        services: Services | None = getattr(scope["app"].state, "services", None)
        if services is None or not read_allowed(
            services.settings, _text(headers.get(b"authorization"))
        ):
            return None
        query = scope.get("query_string")
        try:
            options = self._query_options(query) if query else None
        except InvalidRequestError:
            return None  # the route's 422
        key = _text(headers.get(b"x-routing-key"))
        return Served(name, ref, key, size, fmt, options, services)

    def _route(self, path: str) -> tuple[str, str] | None:
        """The name and reference of a path the route takes (None: another path, or one
        the route refuses), worked out once per path: the three regular expressions
        cost each one-row request about 2 us (a client sends the same few paths)."""
        found = _PATH.fullmatch(path)
        route = None
        if found is not None:
            name, ref = found.groups()
            if _NAME.fullmatch(name) is not None and _REF.fullmatch(ref) is not None:
                route = (name, ref)
        _keep(self._routes, path, route)
        return route

    def _media_of(self, content_type: bytes) -> tuple[bool, TableFormat | None]:
        """Whether a body of this ``Content-Type`` is taken, and as which table format
        (None: JSON), worked out once per header value, as :meth:`_route`."""
        media = content_type.decode("latin-1").split(";")[0].strip().lower()
        fmt = TABLE_MEDIA_TYPES.get(media)
        taken = (fmt is not None or is_json(media), fmt)
        _keep(self._media, content_type, taken)
        return taken

    def _query_options(self, query: bytes) -> PredictOptionsIn | None:
        """The options of a query string, read by the route's own function once per
        string: clients send the same few (``?return_proba=true``), and parsing the query
        and validating its options cost a one-row Arrow request about 15 us each time.
        Only accepted strings are kept, short ones, at most ``_KEPT`` (then
        forgotten at once); the options are never modified after they are made, so
        requests share them.
        """
        if query in self._queries:
            return self._queries[query]
        options = predictions.query_options(QueryParams(query))  # None: no parameters ("&")
        _keep(self._queries, query, options)
        return options

    async def _predict(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        params: Served,
        body: bytes,
    ) -> None:
        """The route's answer, with what Starlette's router leaves in the scope."""
        name, ref, key, _, fmt, options, services = params
        self.answered += 1
        application = scope["app"]
        scope["route"] = ROUTE
        scope["endpoint"] = ROUTE.endpoint
        scope["path_params"] = {"name": name, "ref": ref}
        try:
            if fmt is None:
                answer = await predict_version(services, name, ref, body, options, key)
            else:
                given = options or PredictOptionsIn()
                answer = await predict_table(services, name, ref, body, fmt, given, key)
        except EnsembleError as exc:
            handler = _handler_of(application.exception_handlers, exc)
            response = await handler(Request(scope, receive), exc)
            await response(scope, receive, send)
            return
        # What Starlette's ``Response(content, media_type="application/json")`` sends.
        content = answer.content
        length = str(len(content)).encode("latin-1")
        headers = [(b"content-length", length), (b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})
        if answer.shadow is not None:
            await BackgroundTask(services.shadows.offer_later, answer.shadow)()


def _predict_route() -> APIRoute:
    """The route this path stands in for (FastAPI leaves it in the scope, for the metrics
    and the access log)."""
    for route in predictions.router.routes:
        if (
            isinstance(route, APIRoute)
            and route.path == PREDICT_PATH
            and "POST" in (route.methods or ())
        ):
            return route
    raise LookupError(f"no POST {PREDICT_PATH} route")


ROUTE: Final = _predict_route()


def _keep(kept: dict[Any, Any], key: str | bytes, value: object) -> None:
    """``kept[key] = value`` for a short key, at most ``_KEPT`` of them (then forgotten
    at once): what a client sends again and again is read once, and nobody can make the
    service keep much. The values are never modified once made, so requests share them."""
    if len(key) <= _KEPT_LENGTH:
        if len(kept) >= _KEPT:
            kept.clear()
        kept[key] = value


def _first_headers(scope: Scope) -> dict[bytes, bytes]:
    """The first value of each header this path reads (Starlette's ``headers.get``)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        lowered = name.lower()
        if lowered in _WANTED and lowered not in found:
            found[lowered] = value
    return found


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")


async def _read_body(receive: Receive, size: int) -> tuple[list[Message], bytes | None]:
    """The messages received and the body; None when it is not the announced small body
    (a client gone, more bytes than announced): FastAPI then reads the same messages."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    received = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, None
        chunk = message.get("body", b"")
        received += len(chunk)
        if received > size:
            return messages, None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return messages, b"".join(chunks) if received == size else None


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` giving ``messages`` first."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


def _handler_of(handlers: dict[object, Handler], exc: Exception) -> Handler:
    """The app's exception handler for ``exc``, found as Starlette finds it (by class)."""
    for cls in type(exc).__mro__:
        if cls in handlers:
            return handlers[cls]
    raise exc
