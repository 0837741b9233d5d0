"""Sending calls: the one place that differs between the sync and the async client.

A session owns an httpx client (or borrows one), sends :class:`~ensemble_client.calls.Call`
steps with retries, and drives operation generators to their result. Everything else,
building requests and reading answers, is shared (``ensemble_client.operations``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import TypeVar

import httpx

from ensemble_client.calls import Call, Operation, Pause, RetryPolicy, checked
from ensemble_client.errors import InvalidArgumentError, ServerUnreachableError

T = TypeVar("T")
log = logging.getLogger("ensemble_client")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT_S = 60.0


def base_url(url: str | None) -> str:
    """The service's base URL: the argument, else ``ENSEMBLE_URL``, else the default;
    ``InvalidArgumentError`` unless it is an http(s) URL with a host."""
    given = url or os.environ.get("ENSEMBLE_URL") or DEFAULT_URL
    chosen = given if "://" in given else f"http://{given}"
    chosen = chosen.rstrip("/")
    _check_url(chosen, given)
    return chosen


def _check_url(url: str, given: str) -> None:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        reason = str(exc)
    else:
        if parsed.scheme not in ("http", "https"):
            reason = f"the scheme is {parsed.scheme!r}"
        elif not parsed.host:
            reason = "it has no host"
        elif parsed.port is not None and not 0 < parsed.port < 65536:
            reason = f"port {parsed.port} is not from 1 to 65535"
        else:
            return
    raise InvalidArgumentError(
        f"the service URL {given!r} cannot be used ({reason}): give an http:// or https:// "
        "URL such as http://127.0.0.1:8000 (ENSEMBLE_URL)"
    )


def auth_headers(api_key: str | None) -> dict[str, str]:
    """``Authorization: Bearer`` from the argument, else ``ENSEMBLE_API_KEY``;
    ``InvalidArgumentError`` for a key that cannot be a header (never quoted: a secret)."""
    key = api_key if api_key is not None else os.environ.get("ENSEMBLE_API_KEY")
    if not key:
        return {}
    bad = next((i for i, char in enumerate(key) if not " " <= char <= "~"), None)
    if bad is not None or key != key.strip():
        where = (
            "has a space at an end"
            if bad is None
            else f"has {_kind(key[bad])} at position {bad + 1}"
        )
        raise InvalidArgumentError(
            f"the API key {where}: a key is printable ASCII, sent as an HTTP header "
            "(ENSEMBLE_API_KEY)"
        )
    return {"Authorization": f"Bearer {key}"}


def _kind(char: str) -> str:
    """A character of a secret, described without showing it."""
    if char in "\r\n":
        return "a line break"
    return "a control character" if char < " " or char == "\x7f" else "a non-ASCII character"


def _unreachable(url: str, exc: httpx.TransportError) -> ServerUnreachableError:
    if isinstance(exc, httpx.TimeoutException):
        reason = f"no answer in time ({type(exc).__name__})"
    else:
        reason = str(exc) or type(exc).__name__
    return ServerUnreachableError(url, reason)


def _log_retry(call: Call, status: int, delay: float, attempt: int) -> None:
    log.info(
        "retrying %s %s in %.3g s (status %d, attempt %d)",
        call.method,
        call.path,
        delay,
        status,
        attempt + 1,
    )


class Session:
    """Synchronous: ``httpx.Client`` and ``time.sleep``."""

    def __init__(
        self,
        url: str | None,
        api_key: str | None,
        *,
        timeout: float,
        retry: RetryPolicy,
        http: httpx.Client | None = None,
    ) -> None:
        self.url = base_url(url) if http is None else str(http.base_url).rstrip("/")
        self.retry = retry
        self._owned = http is None
        self.http = http or httpx.Client(base_url=self.url, timeout=timeout)
        self.auth = auth_headers(api_key)  # per request: a borrowed client stays as it was

    def send(self, call: Call) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self.http.request(
                    call.method, call.path, **call.request_kwargs(self.auth)
                )
            except httpx.TransportError as exc:
                raise _unreachable(self.url, exc) from None
            delay = self.retry.delay(call, response, attempt)
            if delay is None:
                return checked(call, response)
            _log_retry(call, response.status_code, delay, attempt)
            time.sleep(delay)
            attempt += 1

    def run(self, operation: Operation[T]) -> T:
        """Drive an operation: send its calls, sleep its pauses, return its result."""
        try:
            step = next(operation)
            while True:
                if isinstance(step, Pause):
                    time.sleep(step.seconds)
                    step = operation.send(None)
                else:
                    step = operation.send(self.send(step))
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            operation.close()  # an interrupted wait closes its progress bar

    def close(self) -> None:
        if self._owned:
            self.http.close()


class AsyncSession:
    """Asynchronous: ``httpx.AsyncClient`` and ``asyncio.sleep``."""

    def __init__(
        self,
        url: str | None,
        api_key: str | None,
        *,
        timeout: float,
        retry: RetryPolicy,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = base_url(url) if http is None else str(http.base_url).rstrip("/")
        self.retry = retry
        self._owned = http is None
        self.http = http or httpx.AsyncClient(base_url=self.url, timeout=timeout)
        self.auth = auth_headers(api_key)  # per request: a borrowed client stays as it was

    async def send(self, call: Call) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self.http.request(
                    call.method, call.path, **call.request_kwargs(self.auth)
                )
            except httpx.TransportError as exc:
                raise _unreachable(self.url, exc) from None
            delay = self.retry.delay(call, response, attempt)
            if delay is None:
                return checked(call, response)
            _log_retry(call, response.status_code, delay, attempt)
            await asyncio.sleep(delay)
            attempt += 1

    async def run(self, operation: Operation[T]) -> T:
        try:
            step = next(operation)
            while True:
                if isinstance(step, Pause):
                    await asyncio.sleep(step.seconds)
                    step = operation.send(None)
                else:
                    step = operation.send(await self.send(step))
        except StopIteration as stop:
            result: T = stop.value
            return result
        finally:
            operation.close()

    async def close(self) -> None:
        if self._owned:
            await self.http.aclose()
