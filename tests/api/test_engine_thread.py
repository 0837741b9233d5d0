"""The batches of the event loop answered on a thread beside it (app/engine_thread.py):
the same answers, the loop free meanwhile, the request id of the lines written, an
interrupted answer failing its requests instead of holding them, a lone request still
answered on the loop, and the setting."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from app.batching import _BESIDE_FROM, Batcher
from app.engine_thread import EngineThread
from app.logs import REQUEST_ID
from app.metrics import Metrics
from app.settings import Settings
from ensembles.inference import Servable
from tests.api.test_batching import (
    NO_CAP,
    PROBA,
    answered_alone,
    one_row_parts,
    record_of,
    sample,
    waiting_requests,
)
from tests.unit.inference.test_batches import assert_same, servable


def watched_predicts(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, str | None]]:
    """Each ``Servable.predict`` call as it runs, and each lone record its lane answers
    (``Servable.predict_record``, one row): its thread, its row count and the request
    id of its context."""
    calls: list[tuple[int, int, str | None]] = []
    original = Servable.predict
    original_record = Servable.predict_record

    def predict(self: Servable, columns: Any, options: Any) -> Any:
        rows = len(next(iter(columns.values()))) if isinstance(columns, dict) else len(columns)
        calls.append((threading.get_ident(), rows, REQUEST_ID.get()))
        return original(self, columns, options)

    def predict_record(self: Servable, instances: Any, options: Any, max_rows: Any) -> Any:
        found = original_record(self, instances, options, max_rows)
        if found is not None:
            calls.append((threading.get_ident(), 1, REQUEST_ID.get()))
        return found

    monkeypatch.setattr(Servable, "predict", predict)
    monkeypatch.setattr(Servable, "predict_record", predict_record)
    return calls


async def test_a_joined_batch_is_answered_beside_the_loop_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = servable("forest")
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics, engine_thread=True)
    batch = [[record_of(7 * i % 150)] for i in range(9)]
    calls = watched_predicts(monkeypatch)
    answers = await asyncio.gather(*(batcher.predict_record(server, r, PROBA, None) for r in batch))
    monkeypatch.undo()
    loop_thread = threading.get_ident()
    # The first of the turn alone, on the loop (nothing else was waiting); the eight
    # others in one call, on the engine thread.
    assert [(thread == loop_thread, rows) for thread, rows, _ in calls] == [(True, 1), (False, 8)]
    for (prediction, warnings), request in zip(answers, batch, strict=True):
        want, want_warnings = answered_alone(server, request[0], PROBA)
        assert_same(prediction, want)
        assert warnings == want_warnings
    assert sample(metrics, "ensemble_batch_requests_sum") == 9
    # Checked columns (tables: Arrow, columnar JSON) stay on the loop, joined as before.
    calls = watched_predicts(monkeypatch)
    parts = one_row_parts("forest", 5)
    predictions = await asyncio.gather(*(batcher.predict(server, p, PROBA) for p in parts))
    monkeypatch.undo()
    assert [(thread == loop_thread, rows) for thread, rows, _ in calls] == [(True, 1), (True, 4)]
    for prediction, part in zip(predictions, parts, strict=True):
        assert_same(prediction, server.predict(part, PROBA))
    batcher.close()


async def test_the_loop_runs_other_work_while_a_batch_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batch's predict, once it runs, waits for a coroutine of the loop: on the loop
    that coroutine cannot run (the wait gives up, and the test fails); beside it, it does."""
    server = servable("forest")
    batcher = Batcher(64, NO_CAP, Metrics(), waiting_requests(8), engine_thread=True)
    original = Servable.predict
    entered, released = threading.Event(), threading.Event()
    waited: list[bool] = []

    def predict(self: Servable, columns: Any, options: Any) -> Any:
        entered.set()
        waited.append(released.wait(timeout=10))
        return original(self, columns, options)

    async def release() -> None:
        while not entered.is_set():
            await asyncio.sleep(0.001)
        released.set()

    monkeypatch.setattr(Servable, "predict", predict)
    records = [[record_of(11 * i)] for i in range(4)]
    requests = [batcher.predict_record(server, r, PROBA, None) for r in records]
    answers = await asyncio.gather(*requests, release())
    monkeypatch.undo()
    assert waited == [True]
    for answer, record in zip(answers[:4], records, strict=True):
        assert answer is not None
        assert_same(answer[0], answered_alone(server, record[0], PROBA)[0])
    batcher.close()


async def test_the_batch_runs_in_the_context_of_the_request_that_opened_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on the loop, where the flush runs in the context of the request that opened
    the batch: the log lines written meanwhile carry that request's id."""
    server = servable("forest")
    batcher = Batcher(64, NO_CAP, Metrics(), waiting_requests(3), engine_thread=True)

    async def request(i: int) -> Any:
        REQUEST_ID.set(f"request-{i}")
        return await batcher.predict_record(server, [record_of(i)], PROBA, None)

    calls = watched_predicts(monkeypatch)
    await asyncio.gather(*(request(i) for i in range(4)))
    monkeypatch.undo()
    assert [(rows, request_id) for _, rows, request_id in calls] == [(4, "request-0")]
    batcher.close()


class Interrupted(BaseException):
    """Not an Exception: what a batch's answer cannot turn into a request's outcome."""


async def test_an_interrupted_batch_fails_its_requests_and_the_thread_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = servable("forest")
    batcher = Batcher(64, NO_CAP, Metrics(), waiting_requests(8), engine_thread=True)
    original = Servable.predict

    def interrupted(self: Servable, columns: Any, options: Any) -> Any:
        raise Interrupted

    records = [[record_of(5 * i)] for i in range(4)]
    monkeypatch.setattr(Servable, "predict", interrupted)
    answers = await asyncio.gather(
        *(batcher.predict_record(server, r, PROBA, None) for r in records),
        return_exceptions=True,
    )
    assert [str(a) for a in answers] == ["the batched prediction was interrupted"] * 4
    monkeypatch.setattr(Servable, "predict", original)
    again = await asyncio.gather(*(batcher.predict_record(server, r, PROBA, None) for r in records))
    for (prediction, _), record in zip(again, records, strict=True):
        assert_same(prediction, answered_alone(server, record[0], PROBA)[0])
    batcher.close()


async def test_a_lone_request_and_a_small_batch_are_answered_on_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One client's request, and a batch of fewer than ``_BESIDE_FROM`` requests, whose
    hand-over would cost more than it frees."""
    server = servable("forest")
    batcher = Batcher(64, NO_CAP, Metrics(), waiting_requests(0), engine_thread=True)
    calls = watched_predicts(monkeypatch)
    await batcher.predict_record(server, [record_of(3)], PROBA, None)
    await batcher.predict(server, one_row_parts("forest", 1)[0], PROBA)
    batcher = Batcher(64, NO_CAP, Metrics(), waiting_requests(8), engine_thread=True)
    records = [[record_of(i)] for i in range(_BESIDE_FROM - 1)]
    await asyncio.gather(*(batcher.predict_record(server, r, PROBA, None) for r in records))
    monkeypatch.undo()
    assert [(thread, rows) for thread, rows, _ in calls] == [
        (threading.get_ident(), 1),
        (threading.get_ident(), 1),
        (threading.get_ident(), _BESIDE_FROM - 1),
    ]
    batcher.close()


def test_the_thread_stops_when_closed() -> None:
    engine = EngineThread(name="engine-under-test")
    loop = asyncio.new_event_loop()
    done: list[Any] = []
    try:
        engine.run(lambda: [1, 2], loop, done.append)
        loop.run_until_complete(_until(lambda: bool(done)))
        assert done == [[1, 2]]
        engine.close()
        named = [t for t in threading.enumerate() if t.name == "engine-under-test"]
        for thread in named:
            thread.join(timeout=10)
        assert not any(t.is_alive() for t in named)
    finally:
        loop.close()


async def _until(ready: Any) -> None:
    while not ready():
        await asyncio.sleep(0.001)


def test_the_setting_defaults_on_and_builds_the_batcher(monkeypatch: pytest.MonkeyPatch) -> None:
    from app.services.container import Services

    assert Settings().batch_engine_thread is True
    monkeypatch.setenv("ENSEMBLE_BATCH_ENGINE_THREAD", "false")
    assert Settings().batch_engine_thread is False

    def batcher_of(settings: Settings) -> Batcher:
        services = Services(settings, None, None, None, Metrics(), None)  # type: ignore[arg-type]
        return services.batcher

    assert batcher_of(Settings(batch_engine_thread=True))._engine is not None
    assert batcher_of(Settings(batch_engine_thread=False))._engine is None
    # Batching off: no thread either.
    assert batcher_of(Settings(batch_engine_thread=True, batch_max_wait_ms=0))._engine is None
