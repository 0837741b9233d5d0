"""One HTTP call as data, and what to do with its answer: shared by the sync and async
clients, which only differ in how they send a call and how they wait.

An operation of the client (upload, train and wait, predict, ...) is a generator that
yields :class:`Call` and :class:`Pause` steps and receives each call's response; the
sync and async sessions (``ensemble_client.sessions``) drive the same generators, so
request building, answer parsing and multi-step logic (polling a job) exist once.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote

import httpx

from ensemble_client.errors import ApiError, InvalidArgumentError, api_error

T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class Call:
    """An HTTP request to the service, relative to its base URL.

    ``idempotent`` calls (reads, deletes, alias moves, predictions) are retried on 429 and
    503; others (uploads, training submissions, cancels) never are: a retry could do the
    thing twice. ``ok`` are the statuses returned to the operation instead of raised.
    """

    method: str
    path: str
    params: Mapping[str, str] | None = None
    json: Any = None
    content: bytes | None = None
    files: Mapping[str, tuple[str, bytes, str]] | None = None
    data: Mapping[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    idempotent: bool = False
    ok: tuple[int, ...] = (200,)
    timeout: float | None = None

    def request_kwargs(self, headers: Mapping[str, str]) -> dict[str, Any]:
        """Keyword arguments for ``httpx.Client.request`` / ``AsyncClient.request``, with
        the session's ``headers`` (the API key) added."""
        kwargs: dict[str, Any] = {"headers": {**headers, **self.headers}}
        if self.params:
            kwargs["params"] = dict(self.params)
        if self.json is not None:
            kwargs["json"] = self.json
        if self.content is not None:
            kwargs["content"] = self.content
        if self.files is not None:
            kwargs["files"] = dict(self.files)
        if self.data is not None:
            kwargs["data"] = dict(self.data)
        if self.timeout is not None:
            kwargs["timeout"] = self.timeout
        return kwargs


@dataclass(frozen=True)
class Pause:
    """Wait this long before the next step (polling a job)."""

    seconds: float


Step = Call | Pause
Operation = Generator[Step, Any, T]


def segment(value: str | int, what: str = "name") -> str:
    """A value as one URL path segment; ``what`` names it in the error.

    Quoting is not enough: servers decode ``%2F`` before routing, so ``x/aliases/y`` would
    reach another route. A ``/``, an empty value, ``.`` or ``..`` is refused instead
    (``InvalidArgumentError``); names are otherwise validated by the server.
    """
    text = str(value)
    if "/" in text:
        raise InvalidArgumentError(f"{what} {text!r} contains '/', which no {what} has")
    if text in ("", ".", ".."):
        raise InvalidArgumentError(f"{what} {text!r} cannot be one part of a URL path")
    return quote(text, safe="")


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of idempotent calls on 429 and 503: ``Retry-After`` when the server gives
    one (capped at ``max_wait``), else exponential backoff from ``backoff`` seconds."""

    max_retries: int = 3
    backoff: float = 0.5
    max_wait: float = 30.0

    def delay(self, call: Call, response: httpx.Response, attempt: int) -> float | None:
        """Seconds to wait before retrying ``call`` (attempt 0 was the first), or None."""
        if response.status_code not in RETRY_STATUSES or not call.idempotent:
            return None
        if attempt >= self.max_retries:
            return None
        given = retry_after(response)
        wait = given if given is not None else self.backoff * 2**attempt
        return max(0.0, min(wait, self.max_wait))


def retry_after(response: httpx.Response, now: float | None = None) -> float | None:
    """The ``Retry-After`` header in seconds (a number of seconds or an HTTP date)."""
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def checked(call: Call, response: httpx.Response) -> httpx.Response:
    """The response if its status is one the call expects, else the problem raised."""
    if response.status_code in call.ok:
        return response
    raise error_of(response)


def error_of(response: httpx.Response) -> ApiError:
    return api_error(
        response.status_code,
        response.content,
        response.headers.get("content-type", ""),
        retry_after=retry_after(response),
    )
