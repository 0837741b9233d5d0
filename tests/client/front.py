"""A fault-injecting front for the real app: answers chosen requests itself (a 503 with
``Retry-After``, a 429) or corrupts a response on its way out, and records every request.
Everything it lets through is answered by the real service."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass
class Fault:
    method: str
    path_part: str
    status: int
    times: int
    retry_after: str | None = None


@dataclass
class Front:
    app: App
    faults: list[Fault] = field(default_factory=list)
    corrupt: str | None = None  # a path part whose response bodies get one byte flipped
    seen: list[tuple[str, str]] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.seen.append((scope["method"], scope["path"]))
        for fault in self.faults:
            if fault.times and scope["method"] == fault.method and fault.path_part in scope["path"]:
                fault.times -= 1
                await self._answer(fault, send)
                return
        if self.corrupt and self.corrupt in scope["path"]:
            await self.app(scope, receive, _flipping(send))
            return
        await self.app(scope, receive, send)

    @staticmethod
    async def _answer(fault: Fault, send: Send) -> None:
        body = json.dumps(
            {"type": "about:blank", "title": "Injected", "status": fault.status,
             "code": "injected", "detail": f"injected {fault.status}"}
        ).encode()  # fmt: skip
        headers = [(b"content-type", b"application/problem+json")]
        if fault.retry_after is not None:
            headers.append((b"retry-after", fault.retry_after.encode()))
        await send({"type": "http.response.start", "status": fault.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _flipping(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            body = bytearray(message["body"])
            body[len(body) // 2] ^= 0xFF
            message = {**message, "body": bytes(body)}
        await send(message)

    return wrapped
