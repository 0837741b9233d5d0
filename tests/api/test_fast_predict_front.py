"""The app's front door (app.front): what the fast path takes is answered before
FastAPI's own layers, by the stack's objects, and exactly as the whole stack answers it.

The request-by-request equality of the fast path with FastAPI's route is in
``test_fast_predict.py`` (whose fast app now answers at the front door); here the same
cases go to one app with its door open and then shut (every request through the whole
stack, the fast path inside it), and the layers the door skips are counted.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from starlette.middleware.errors import ServerErrorMiddleware
from starlette.types import Receive, Scope, Send

from app import fast_predict
from app.edge import HeadersMiddleware
from app.fast_predict import FastPredictMiddleware
from app.front import Front, ServiceApp
from app.middleware import RequestMiddleware
from tests.api.conftest import make_settings, started
from tests.api.test_fast_predict import (
    CASES,
    ONE,
    Case,
    _counters,
    _made,
    folder,  # noqa: F401 - the data folder fixture those cases read
)

LAYERS = (ServerErrorMiddleware, HeadersMiddleware, RequestMiddleware, FastPredictMiddleware)
_TIME = re.compile(r"[0-9.]+ ms$")  # an access line's duration
ONE_ROW = Case("one row", "iris/versions/1/predict", {"instances": ONE})


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Calls of each layer's ``__call__``, by class name, from now on."""
    calls = dict.fromkeys((layer.__name__ for layer in LAYERS), 0)
    for layer in LAYERS:
        real = layer.__call__

        def counted(
            self: Any, scope: Scope, receive: Receive, send: Send, *, _real: Any = real
        ) -> Any:
            calls[type(self).__name__] += 1
            return _real(self, scope, receive, send)

        monkeypatch.setattr(layer, "__call__", counted)
    return calls


async def test_the_front_door_skips_the_layers_outside_the_fast_path(
    folder: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = _counting(monkeypatch)
    async for app, api in started(make_settings(folder)):
        assert isinstance(app, ServiceApp)
        warm = await ONE_ROW.send(api.client)  # the stack is built by the first request
        assert warm.status_code == 200
        assert isinstance(app.front, Front)
        answered = app.front.fast.answered
        before = dict(calls)
        responses = [await ONE_ROW.send(api.client) for _ in range(5)]
        assert app.front.fast.answered == answered + 5
        assert calls == before  # no layer was called: the door answered
        assert all(r.status_code == 200 for r in responses)
        assert all(r.headers["x-content-type-options"] == "nosniff" for r in responses)
        assert all(r.headers["x-request-id"] == "fast-path-test" for r in responses)
        health = await api.client.get("/healthz")  # anything else: the whole stack
        assert health.status_code == 200
        assert all(calls[name] == before[name] + 1 for name in calls)


async def test_the_door_is_shut_without_the_fast_path(folder: Path) -> None:  # noqa: F811
    async for app, api in started(make_settings(folder, fast_predict=False)):
        assert (await ONE_ROW.send(api.client)).status_code == 200
        assert isinstance(app, ServiceApp) and app.front is None


async def _answers(
    folder: Path,  # noqa: F811
    door: bool,
    cases: list[Case],
    caplog: pytest.LogCaptureFixture,
) -> tuple[list[Any], list[Any], dict[str, float]]:
    """Each case's (status, headers, bytes), the log lines and the counters, from an app
    with its front door open or shut."""
    caplog.clear()
    answers = []
    async for app, api in started(make_settings(folder, max_predict_rows=20)):
        assert isinstance(app, ServiceApp)
        await api.client.get("/healthz")  # builds the stack, and the door
        assert app.front is not None
        if not door:
            app.front = None
        for case in cases:
            response = await case.send(api.client)
            headers = [(k, _made(k, v)) for k, v in response.headers.multi_items()]
            answers.append((response.status_code, headers, response.content))
        lines = [
            (r.name, r.levelname, _TIME.sub("<ms>", r.getMessage()), _fields(r))
            for r in caplog.records
            if r.name.startswith("app")
        ]
        counts = _counters((await api.client.get("/metrics")).text)
    return answers, lines, counts


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", {}) or {}
    return {k: _made(k, v) for k, v in fields.items() if k != "duration_ms"}


async def test_the_front_door_answers_as_the_whole_stack(
    folder: Path,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="app")
    open_door = await _answers(folder, True, CASES, caplog)
    shut_door = await _answers(folder, False, CASES, caplog)
    for case, one, other in zip(CASES, open_door[0], shut_door[0], strict=True):
        assert one == other, case.label
    assert open_door[1] == shut_door[1]  # access lines, warnings, in the same order
    assert open_door[2] == shut_door[2]


def _failing_predict(after_start: bool) -> Callable[..., Any]:
    """A fast path whose prediction fails, before or after the answer has started."""

    async def predict(
        self: FastPredictMiddleware, scope: Scope, receive: Receive, send: Send, *_: Any
    ) -> None:
        if after_start:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        raise RuntimeError("the engine broke")

    return predict


@pytest.mark.parametrize("after_start", [False, True], ids=["before", "after the start"])
async def test_an_unexpected_error_is_handled_as_the_stack_handles_it(
    folder: Path,  # noqa: F811
    after_start: bool,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before the answer starts: RequestMiddleware's 500 problem, with the request id and
    ``nosniff``; after: the app's 500 handler logs it too, and it goes on to the server,
    as ServerErrorMiddleware does."""
    caplog.set_level(logging.INFO, logger="app")
    monkeypatch.setattr(FastPredictMiddleware, "_predict", _failing_predict(after_start))
    open_door = await _answers(folder, True, [ONE_ROW], caplog)
    shut_door = await _answers(folder, False, [ONE_ROW], caplog)
    assert open_door == shut_door
    (status, headers, _), *_ = open_door[0]
    assert status == (200 if after_start else 500)
    if not after_start:
        assert ("x-content-type-options", "nosniff") in headers
    errors = [line[2] for line in open_door[1] if line[1] == "ERROR"]
    unhandled = "unhandled error in POST /v1/models/iris/versions/1/predict"
    assert errors == [unhandled] * (2 if after_start else 1)


class _CountedPattern:
    """A compiled pattern whose ``fullmatch`` calls are counted."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls = 0

    def fullmatch(self, text: str) -> re.Match[str] | None:
        self.calls += 1
        return self.pattern.fullmatch(text)


async def test_a_path_is_read_once_and_answers_as_the_first_time(
    folder: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path matches a path it has seen (and its name and reference) once; a
    path the route refuses is refused by the route each time, with the same answer."""
    counted = _CountedPattern(fast_predict._PATH)
    monkeypatch.setattr(fast_predict, "_PATH", counted)
    bad = Case("bad name", "-iris/versions/1/predict", {"instances": ONE})
    async for app, api in started(make_settings(folder)):
        good = [await ONE_ROW.send(api.client) for _ in range(4)]
        refused = [await bad.send(api.client) for _ in range(2)]
        assert isinstance(app, ServiceApp) and app.front is not None
        assert app.front.fast.answered == 4
    assert [r.status_code for r in good] == [200] * 4
    assert len({r.content for r in good}) == 1
    assert [r.status_code for r in refused] == [422] * 2
    assert refused[0].json()["errors"] == refused[1].json()["errors"]
    assert counted.calls == 2  # one for each path
