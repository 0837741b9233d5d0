"""ASGI middleware: a bound on request bodies, enforced while they are read."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.problems import BodyTooLargeError, problem_body, problem_response
from ensembles import Problem


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
                body = problem_body(exc.code, exc.detail, problems=exc.problems)
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
