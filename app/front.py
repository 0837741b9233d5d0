"""The app's front door: a one-row prediction answered before FastAPI's own layers.

The fast path (:mod:`app.fast_predict`) already skips FastAPI's routing, but a request
it serves still went through every layer outside it: FastAPI's ``__call__``, Starlette's
``__call__``, ``ServerErrorMiddleware`` (and its ``send`` wrapper), FastAPI's exception
telemetry and body-limit layers, then :class:`app.edge.HeadersMiddleware` and
:class:`app.middleware.RequestMiddleware` (issue 24: about 20 us of a one-row request).
:class:`ServiceApp` is FastAPI with a ``__call__`` that hands such a request to the same
objects the stack holds, in the same order, without the layers that do nothing to it:

* the stack's :class:`~app.fast_predict.FastPredictMiddleware` decides (``served``) and
  answers (``serve``: the route's answer, or its next layer with the body replayed);
* the stack's :class:`~app.middleware.RequestMiddleware` observes it (``observe``: the
  request id, the metrics, the access line, a 500 problem for an unexpected error);
* :func:`app.edge.secure` sets the headers :class:`~app.edge.HeadersMiddleware` sets;
* an exception that still escapes (the answer already started) is handled as
  ``ServerErrorMiddleware`` handles it: the app's 500 handler sees it, and it is raised
  on to the server.

The front door is open only when the stack is what it was written for (those layers in
that order, nothing else outside the fast path: :meth:`Front.of`), FastAPI's
OpenTelemetry hooks are off for the request and the app has no ``root_path``; otherwise,
and for every request the fast path does not take, the whole stack runs as before.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from fastapi import FastAPI
from starlette._utils import is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.edge import HeadersMiddleware, secure
from app.fast_predict import FastPredictMiddleware, Served
from app.middleware import RequestMiddleware

__all__ = ["Front", "ServiceApp"]


def _passive_layers() -> tuple[type, ...]:
    """FastAPI's own layers between ``ServerErrorMiddleware`` and the app's middleware
    that do nothing to a request served here: the exception telemetry (it records only
    for a request its OpenTelemetry hooks took, and the door is shut while they are on)
    and the body limit (it acts only for a scope that carries a limit, or with the app's
    ``max_body_size``, which inserts a layer of its own and so shuts the door)."""
    found: list[type] = []
    for module, name in (
        ("fastapi.telemetry._asgi", "ExceptionTelemetryMiddleware"),
        ("fastapi._body_limit", "AppBodyLimitMiddleware"),
    ):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):  # a FastAPI without them
            continue
    return tuple(found)


_PASSIVE: Final = _passive_layers()
_MAX_LAYERS: Final = 32  # a stack deeper than this is not walked


@dataclass(frozen=True)
class Front:
    """The stack's objects that answer a request at the front door."""

    errors: ServerErrorMiddleware
    request: RequestMiddleware
    fast: FastPredictMiddleware

    @classmethod
    def of(cls, stack: ASGIApp) -> Front | None:
        """The front of ``stack`` when it is ``ServerErrorMiddleware``, FastAPI's passive
        layers, then exactly :class:`HeadersMiddleware`, :class:`RequestMiddleware` and
        :class:`FastPredictMiddleware`; None for any other stack (the fast path off, a
        layer added outside it, another order)."""
        layers: list[Any] = []
        layer: Any = stack
        while layer is not None and len(layers) < _MAX_LAYERS:
            layers.append(layer)
            layer = getattr(layer, "app", None)
        if not layers or type(layers[0]) is not ServerErrorMiddleware:
            return None
        rest = layers[1:]
        while rest and type(rest[0]) in _PASSIVE:
            rest = rest[1:]
        kinds = [type(layer) for layer in rest[:3]]
        if kinds != [HeadersMiddleware, RequestMiddleware, FastPredictMiddleware]:
            return None
        return cls(layers[0], rest[1], rest[2])

    async def serve(self, scope: Scope, receive: Receive, send: Send, params: Served) -> None:
        """The stack's answer to a request the fast path took, through its objects."""
        started = False

        def edge(message: Message) -> None:  # HeadersMiddleware's, noting the start
            nonlocal started
            started = True
            secure(scope, message)

        try:
            inner = partial(self.fast.serve, params=params)
            await self.request.observe(scope, receive, send, inner, edge)
        except Exception as exc:
            response = await self._error_response(scope, exc)
            if not started:
                await response(scope, receive, send)
            raise

    async def _error_response(self, scope: Scope, exc: Exception) -> Response:
        """What ``ServerErrorMiddleware`` answers an exception that reached it with (and
        its handler's effects, the log line): Starlette 1.x's choice, from its own
        methods."""
        errors = self.errors
        request = Request(scope)
        if errors.debug:
            return await run_in_threadpool(errors.debug_response, request, exc)
        handler: Any = errors.handler  # Starlette types it for websockets too
        if handler is None:
            return errors.error_response(request, exc)
        if is_async_callable(handler):
            response: Response = await handler(request, exc)
            return response
        answer: Response = await run_in_threadpool(handler, request, exc)
        return answer


class ServiceApp(FastAPI):
    """FastAPI, with the one-row fast path answered at its front door (see the module).

    ``front`` is the door (None: shut; set when the stack is built, on the first
    request); a test may shut it to compare answers with the whole stack's."""

    front: Front | None = None

    def build_middleware_stack(self) -> ASGIApp:
        stack = super().build_middleware_stack()
        self.front = Front.of(stack)
        return stack

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        front = self.front
        if front is None or scope["type"] != "http" or self.root_path or self._telemetry_on():
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self  # as Starlette sets it: the fast path reads the app's state
        params = front.fast.served(scope)
        if params is None:
            await super().__call__(scope, receive, send)
            return
        await front.serve(scope, receive, send, params)

    def _telemetry_on(self) -> bool:
        """FastAPI's own check, made for every request by its ``__call__``."""
        telemetry = getattr(self, "_native_telemetry", None)
        return telemetry is not None and bool(telemetry.enabled())
