"""Request bodies read by hand: the routes whose problems must all be reported at once,
or whose bodies are too large to parse on the event loop."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from app.problems import InvalidRequestError, UnsupportedMediaTypeError
from ensembles import Problem


def check_json_media_type(request: Request) -> None:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaTypeError(
            f"cannot take a {media or 'untyped'} body",
            [Problem(("body",), "send application/json")],
        )


async def read_json_bytes(request: Request) -> bytes:
    """The raw body of a JSON request (415 for another media type)."""
    check_json_media_type(request)
    return await request.body()


async def read_json(request: Request) -> Any:
    """The parsed body of a small JSON request whose schema is checked by hand."""
    body = await read_json_bytes(request)
    return _loads(body)


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidRequestError(
            "the body is not valid JSON", [Problem(("body",), f"invalid JSON: {exc}")]
        ) from None
