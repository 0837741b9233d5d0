"""ASGI middleware at the edge of the app: what every path and every response must be,
whatever route (present or future) serves it.

* :class:`PathMiddleware` refuses a path whose segment holds an encoded ``/`` or ``\\``
  (``%2F``, ``%5C``): Starlette routes the decoded path, so ``iris-rf%2Fversions%2F2``
  would reach the version route, yet no name contains either. It also answers ``HEAD``
  on every ``GET`` route as ``GET`` without the body (FastAPI's routes take only the
  methods they name).
* :class:`HeadersMiddleware` sets ``X-Content-Type-Options: nosniff`` on every response,
  the pages' content policy on every SVG (an image opened on its own is a document that
  could run script), and turns a redirect the app makes to its own address into a
  relative one: Starlette builds that address from the ``Host`` header, which the
  caller chooses.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

from fastapi.responses import JSONResponse
from starlette.datastructures import URL
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.pages.templating import CONTENT_SECURITY_POLICY
from app.problems import is_oip, problem_body, problem_response
from ensembles import Problem

_ENCODED_SEPARATOR: Final = re.compile(rb"%(?:2f|5c)", re.IGNORECASE)
_NOSNIFF: Final = (b"x-content-type-options", b"nosniff")
_POLICY: Final = (b"content-security-policy", CONTENT_SECURITY_POLICY.encode())


class PathMiddleware:
    """Encoded separators refused (404 naming the segment), ``HEAD`` served as ``GET``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = bytes(scope.get("raw_path") or b"").split(b"?", 1)[0]
        if _ENCODED_SEPARATOR.search(raw):
            await _separator_refused(raw.decode("latin-1"), scope["path"])(scope, receive, send)
            return
        if scope["method"] == "HEAD" and _get_route_matches(scope):
            await self._head_as_get(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _head_as_get(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ``GET`` answer, headers and all (Content-Length too), without its body.

        The route runs on a copy of the scope (the server reads the method of its own to
        know that no body follows); what routing adds (the route, for the metrics and
        the access log) is copied back."""
        as_get = {**scope, "method": "GET"}

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {**message, "body": b""}
            await send(message)

        try:
            await self.app(as_get, receive, headers_only)
        finally:
            scope.update({key: value for key, value in as_get.items() if key != "method"})


def _get_route_matches(scope: Scope) -> bool:
    application = scope.get("app")  # set by Starlette before any middleware runs
    if application is None:
        return False
    as_get = {**scope, "method": "GET"}
    return any(route.matches(as_get)[0] == Match.FULL for route in application.router.routes)


def _separator_refused(raw_path: str, path: str) -> JSONResponse:
    segment = next(s for s in raw_path.split("/") if _ENCODED_SEPARATOR.search(s.encode("latin-1")))
    why = f"the segment '{segment}' holds an encoded '/' or '\\' (%2F, %5C); no name has one"
    detail = f"no such path: {raw_path}: {why}"
    if is_oip(path):
        return JSONResponse({"error": detail}, status_code=404)
    body = problem_body("not_found", detail, problems=[Problem(("path",), why)], instance=raw_path)
    return problem_response(body)


class HeadersMiddleware:
    """``nosniff`` everywhere, the content policy on SVG, relative redirects."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, secured(scope, send))


def secured(scope: Scope, send: Send) -> Send:
    """``send`` with the answer's headers made safe (see :class:`HeadersMiddleware`)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            secure(scope, message)
        await send(message)

    return sending


def secure(scope: Scope, message: Message) -> None:
    """The headers of ``message`` (an ``http.response.start``) made safe, in place."""
    # One pass over the raw headers, as this runs for every answer (Starlette's
    # MutableHeaders cost ~10 us a response, 1.5% of a one-row prediction).
    headers: list[tuple[bytes, bytes]] = list(message.get("headers", ()))
    nosniff = policy = svg = False
    location = -1
    for index, (name, value) in enumerate(headers):
        lowered = name.lower()
        if lowered == _NOSNIFF[0]:
            nosniff = True
        elif lowered == b"content-type":
            svg = value.lower().startswith(b"image/svg+xml")
        elif lowered == _POLICY[0]:
            policy = True
        elif lowered == b"location":
            location = index
    if not nosniff:
        headers.append(_NOSNIFF)
    if svg and not policy:
        headers.append(_POLICY)
    if location >= 0 and 300 <= int(message["status"]) < 400:
        relative = own_relative(headers[location][1].decode("latin-1"), URL(scope=scope).netloc)
        headers[location] = (b"location", relative.encode("latin-1"))
    message["headers"] = headers


def own_relative(location: str, own_netloc: str) -> str:
    """``location`` as a path on this service when it names this service's address (the
    ``Host`` the request sent), else unchanged. Leading slashes are folded into one, so
    the path can never read as another host (``//evil.example.com``)."""
    parts = urlsplit(location)
    if not parts.scheme or parts.netloc.lower() != own_netloc.lower():
        return location
    path = "/" + parts.path.lstrip("/\\")
    return f"{path}?{parts.query}" if parts.query else path
