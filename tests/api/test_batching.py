"""Adaptive batching in the service: concurrent requests of one version share an engine call
(on the event loop within one turn, in worker threads while the engine is busy), answers
are unchanged, a failing request fails alone, and /metrics shows the batch sizes."""

from __future__ import annotations

import asyncio
import random
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import pytest_asyncio
from pydantic import ValidationError

from app.batching import Batcher
from app.metrics import Metrics
from app.server.arrivals import Arrivals
from app.settings import Settings
from ensembles.errors import PredictionInputError
from ensembles.inference import Columns, PredictOptions, check_rows
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame
from tests.api.test_predict_tables import ARROW, PARQUET, arrow_stream, parquet_file
from tests.unit.datasets import frame
from tests.unit.inference.test_batches import assert_same, request_columns, servable

PROBA = PredictOptions(return_proba=True)
# A wait the tests never reach: a batch then closes at the end of its loop turn (or at the
# row cap) however slowly a loaded machine runs the turn, so the counts below are exact.
NO_CAP = 1000.0
VOTES = PredictOptions(return_votes=True, return_proba=True)  # the members' tallies


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def one_row_parts(kind: str, n: int) -> list[Columns]:
    return [request_columns(kind, [7 * i % 150]) for i in range(n)]


# --- the batcher, with real models ------------------------------------------------------


async def test_requests_of_one_loop_turn_share_one_engine_call() -> None:
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics)
    server = servable("forest")
    parts = one_row_parts("forest", 9)
    answers = await asyncio.gather(*(batcher.predict(server, p, PROBA) for p in parts))
    for answer, part in zip(answers, parts, strict=True):
        assert_same(answer, server.predict(part, PROBA))
    # The first of the turn alone (a lone request never waits), the other eight joined.
    assert sample(metrics, "ensemble_batch_requests_count") == 2
    assert sample(metrics, "ensemble_batch_requests_bucket", le="1.0") == 1
    assert sample(metrics, "ensemble_batch_requests_sum") == 9
    assert sample(metrics, "ensemble_batch_rows_sum") == 9


async def test_a_batch_holds_at_most_max_rows_and_larger_requests_go_alone() -> None:
    metrics = Metrics()
    batcher = Batcher(4, NO_CAP, metrics)
    server = servable("forest")
    parts = [*one_row_parts("forest", 6), request_columns("forest", list(range(5)))]
    answers = await asyncio.gather(*(batcher.predict(server, p, PROBA) for p in parts))
    for answer, part in zip(answers, parts, strict=True):
        assert_same(answer, server.predict(part, PROBA))
    # Calls: the first alone, then the one-row ones as 4 + 1, and the 5-row one alone.
    assert sample(metrics, "ensemble_batch_rows_count") == 4
    assert sample(metrics, "ensemble_batch_rows_bucket", le="4.0") == 3
    assert sample(metrics, "ensemble_batch_rows_bucket", le="2.0") == 2
    assert sample(metrics, "ensemble_batch_requests_sum") == 7


async def test_requests_with_other_options_or_models_are_not_joined() -> None:
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics)
    forest_model, boosting = servable("forest"), servable("boosting")
    calls = [
        (forest_model, request_columns("forest", [1]), PROBA),
        (forest_model, request_columns("forest", [2]), PredictOptions()),
        (forest_model, request_columns("forest", [3]), PROBA),
        (boosting, request_columns("boosting", [4]), PROBA),
        (forest_model, request_columns("forest", [5]), PROBA),
        (boosting, request_columns("boosting", [6]), PROBA),
    ]
    answers = await asyncio.gather(*(batcher.predict(*call) for call in calls))
    for answer, (server, part, options) in zip(answers, calls, strict=True):
        assert_same(answer, server.predict(part, options))
    # Each key's first alone; then forest probabilities [3, 5] joined, boosting [6] alone.
    assert sample(metrics, "ensemble_batch_requests_count") == 5
    assert sample(metrics, "ensemble_batch_requests_bucket", le="1.0") == 4


def as_objects(columns: Columns, bad: bool = False) -> Columns:
    """The columns as object arrays (as unchecked cells would be); ``bad``: a string in
    the first, which no engine call takes."""
    out = {name: array.astype(object) for name, array in columns.items()}
    if bad:
        out[next(iter(out))][0] = "oops"
    return out


async def test_a_failing_request_does_not_fail_its_batch_on_the_event_loop() -> None:
    """A cell no engine takes makes the joined call fail; then each request is answered
    alone, the failing one with its own error, the others as if never joined."""
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics)
    server = servable("forest")
    parts = [as_objects(p, bad=i == 2) for i, p in enumerate(one_row_parts("forest", 6))]
    answers = await asyncio.gather(
        *(batcher.predict(server, p, PROBA) for p in parts), return_exceptions=True
    )
    assert isinstance(answers[2], ValueError)
    for i, (answer, part) in enumerate(zip(answers, parts, strict=True)):
        if i != 2:
            assert not isinstance(answer, BaseException), answer
            assert_same(answer, server.predict(part, PROBA))
    # The joined call failed (not counted), then the five good ones were answered alone.
    assert sample(metrics, "ensemble_batch_requests_count") == 5


async def test_rows_left_one_matrix_are_joined_and_fail_alone_on_the_event_loop() -> None:
    """Checked rows not yet made columns (``MatrixRows``: one-row Arrow bodies) share a
    call, and answer as their columns would; when the joined call fails, each is made
    columns and answered alone, the failing one with its own error."""
    from ensembles.inference.cells import MatrixRows

    server = servable("forest")
    names = server.signature.feature_names
    columns = one_row_parts("forest", 6)
    matrices = [np.column_stack([part[n] for n in names]) for part in columns]
    for good in (True, False):
        metrics = Metrics()
        batcher = Batcher(64, NO_CAP, metrics)
        parts = [MatrixRows(names, m if good else m.astype(object)) for m in matrices]
        if not good:
            parts[2].matrix[0, 0] = "oops"
        answers = await asyncio.gather(
            *(batcher.predict(server, p, PROBA) for p in parts), return_exceptions=True
        )
        for i, (answer, part) in enumerate(zip(answers, columns, strict=True)):
            if not good and i == 2:
                assert isinstance(answer, ValueError)
                continue
            assert not isinstance(answer, BaseException), answer
            assert_same(answer, server.predict(part, PROBA))
        # Good: the first alone, five joined; else the joined call failed (not counted).
        assert sample(metrics, "ensemble_batch_requests_count") == (2 if good else 5)


def record_of(i: int) -> dict[str, Any]:
    """Row ``i`` of iris as a request's one record (for ``servable("forest")``)."""
    features = frame("iris").drop(columns="target")
    return features.iloc[[i]].to_dict(orient="records")[0]  # type: ignore[return-value]


def counted_row_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the one-by-one checks of records (``check_rows``' fast way, and the lane of
    lone records' check, ``one_row.record_cells``), as they run."""
    from ensembles.inference import rows as rows_module
    from ensembles.inference import servable as servable_module

    calls: list[int] = []
    original = rows_module._numeric_records
    lone = servable_module.record_cells

    def counting(records: Any, names: Any) -> Any:
        calls.append(len(records))
        return original(records, names)

    def counting_lone(lane: Any, instances: Any, max_rows: Any) -> Any:
        calls.append(len(instances))
        return lone(lane, instances, max_rows)

    monkeypatch.setattr(rows_module, "_numeric_records", counting)
    monkeypatch.setattr(servable_module, "record_cells", counting_lone)
    return calls


def answered_alone(server: Any, record: object, options: PredictOptions) -> Any:
    """What a request of ``record`` gets alone: its prediction and warnings, or its error."""
    try:
        checked = check_rows(server.signature, [record])
    except Exception as exc:
        return exc
    return server.predict(checked.columns, options), checked.warnings


async def test_one_record_requests_of_a_turn_are_checked_together_in_one_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The records of a loop turn's batch are checked by one call, not one each (the
    first of the turn is checked and answered alone, at once), and answered by one."""
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics)
    server = servable("forest")
    batch = [[record_of(7 * i % 150)] for i in range(9)]
    calls = counted_row_checks(monkeypatch)
    answers = await asyncio.gather(*(batcher.predict_record(server, r, PROBA, None) for r in batch))
    assert calls == [1]  # the first of the turn; the other eight were checked together
    monkeypatch.undo()
    for (prediction, warnings), request in zip(answers, batch, strict=True):
        want, want_warnings = answered_alone(server, request[0], PROBA)
        assert_same(prediction, want)
        assert warnings == want_warnings == []
    assert sample(metrics, "ensemble_batch_requests_count") == 2
    assert sample(metrics, "ensemble_batch_requests_sum") == 9


async def test_odd_records_in_a_batch_are_checked_alone_and_fail_alone() -> None:
    """A bad cell, an extra column, a missing one, a bool, an int a float64 would round:
    the batch's records are then checked one by one, each getting its own problems or
    warnings, and the good ones (by dtype) still share a call."""
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics)
    server = servable("forest")
    first, *rest = (record_of(11 * i % 150) for i in range(8))
    odd = [
        {**rest[0], "sepal length (cm)": "x"},
        {**rest[1], "colour": 3},
        {k: v for k, v in rest[2].items() if k != "petal width (cm)"},
        {**rest[3], "petal length (cm)": True},
        {**rest[4], "petal length (cm)": 2**53 + 1},
        rest[5],
        rest[6],
    ]
    requests = [[first], *([record] for record in odd)]
    answers = await asyncio.gather(
        *(batcher.predict_record(server, r, PROBA, None) for r in requests),
        return_exceptions=True,
    )
    for answer, request in zip(answers, requests, strict=True):
        want = answered_alone(server, request[0], PROBA)
        if isinstance(want, Exception):
            assert isinstance(answer, PredictionInputError)
            assert isinstance(want, PredictionInputError)
            assert str(answer) == str(want) and answer.problems == want.problems
        else:
            assert not isinstance(answer, BaseException), answer
            assert_same(answer[0], want[0])
            assert answer[1] == want[1]
    assert answers[2][1] == ["extra columns ignored: colour"]  # type: ignore[index]
    # The first alone; then the four good ones of the rest (the extra column, the int
    # the careful way reads as a float64, two plain ones) in one call.
    assert sample(metrics, "ensemble_batch_requests_count") == 2
    assert sample(metrics, "ensemble_batch_requests_sum") == 5


def waiting_requests(count: int) -> Arrivals:
    """The server's count of requests of this turn yet to run, as the protocol keeps it."""
    arrivals = Arrivals()
    arrivals.waiting = count
    return arrivals


async def test_the_first_of_a_turn_joins_the_batch_when_others_are_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the server has taken other requests of the turn that are yet to run, the
    first one opens the batch instead of being answered alone: the turn's requests share
    one check and one engine call, answers unchanged; with nothing waiting it is answered
    at once, alone, as before."""
    server = servable("forest")
    batch = [[record_of(5 * i % 150)] for i in range(9)]
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics, waiting_requests(8))
    calls = counted_row_checks(monkeypatch)
    answers = await asyncio.gather(*(batcher.predict_record(server, r, PROBA, None) for r in batch))
    assert calls == []  # no record checked alone: all nine together
    monkeypatch.undo()
    for (prediction, warnings), request in zip(answers, batch, strict=True):
        want, want_warnings = answered_alone(server, request[0], PROBA)
        assert_same(prediction, want)
        assert warnings == want_warnings
    assert sample(metrics, "ensemble_batch_requests_count") == 1
    assert sample(metrics, "ensemble_batch_requests_sum") == 9
    # Checked columns (tables, several rows) the same way: one call for the turn.
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics, waiting_requests(1))
    parts = one_row_parts("forest", 5)
    predictions = await asyncio.gather(*(batcher.predict(server, p, PROBA) for p in parts))
    for prediction, part in zip(predictions, parts, strict=True):
        assert_same(prediction, server.predict(part, PROBA))
    assert sample(metrics, "ensemble_batch_requests_count") == 1
    # Nothing waiting: the first alone, at once.
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics, waiting_requests(0))
    await asyncio.gather(*(batcher.predict(server, p, PROBA) for p in parts))
    assert sample(metrics, "ensemble_batch_requests_count") == 2


async def test_a_bad_first_request_that_joined_fails_alone() -> None:
    """The first of a turn, joined because others were waiting, with a bad cell: its own
    problems, and its batch-mates their answers (the batch then checked one by one)."""
    server = servable("forest")
    first = {**record_of(3), "sepal length (cm)": "x"}
    requests = [[first], *([record_of(9 * i % 150)] for i in range(1, 6))]
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics, waiting_requests(5))
    answers = await asyncio.gather(
        *(batcher.predict_record(server, r, PROBA, None) for r in requests),
        return_exceptions=True,
    )
    want = answered_alone(server, first, PROBA)
    assert isinstance(want, PredictionInputError)
    assert isinstance(answers[0], PredictionInputError)
    assert str(answers[0]) == str(want) and answers[0].problems == want.problems
    for answer, request in zip(answers[1:], requests[1:], strict=True):
        assert not isinstance(answer, BaseException), answer
        assert_same(answer[0], answered_alone(server, request[0], PROBA)[0])
    assert sample(metrics, "ensemble_batch_requests_count") == 1  # the five good ones
    assert sample(metrics, "ensemble_batch_requests_sum") == 5


async def test_requests_whose_answers_are_summed_over_rows_are_answered_alone() -> None:
    """Soft votes, linear members and std would move by an ulp if joined (numpy's sums
    over the batch's shape): those requests never share a call."""
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics)
    calls = [
        *(
            (servable("regressor"), p, PredictOptions(return_std=True))
            for p in one_row_parts("regressor", 3)
        ),
        *(
            (servable("hard_voting"), p, PredictOptions(voting="soft", return_proba=True))
            for p in one_row_parts("hard_voting", 3)
        ),
        *((servable("weighted_voting"), p, PROBA) for p in one_row_parts("weighted_voting", 3)),
    ]
    answers = await asyncio.gather(*(batcher.predict(*call) for call in calls))
    for answer, (server, part, options) in zip(answers, calls, strict=True):
        assert_same(answer, server.predict(part, options))
    assert sample(metrics, "ensemble_batch_requests_count") == 9


def test_worker_threads_join_the_call_running_for_their_key() -> None:
    """Forest votes come from the members (a worker thread's work): requests queue behind
    the running call and go together; the bad one fails alone."""
    metrics = Metrics()
    batcher = Batcher(64, NO_CAP, metrics)
    server = servable("forest")
    parts = [as_objects(p, bad=i == 5) for i, p in enumerate(one_row_parts("forest", 13))]
    outcomes: list[Any] = [None] * len(parts)
    start = threading.Barrier(len(parts))

    def ask(i: int) -> None:
        start.wait()
        try:
            outcomes[i] = batcher.predict_blocking(server, parts[i], VOTES)
        except ValueError as exc:
            outcomes[i] = exc

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(parts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert isinstance(outcomes[5], ValueError)
    for i, (outcome, part) in enumerate(zip(outcomes, parts, strict=True)):
        if i != 5:
            assert_same(outcome, server.predict(part, VOTES))
    assert batcher._lanes == {}  # every lane closed once its queue was answered


async def test_a_wait_of_zero_switches_batching_off() -> None:
    metrics = Metrics()
    batcher = Batcher(64, 0.0, metrics)
    server = servable("forest")
    parts = one_row_parts("forest", 4)
    await asyncio.gather(*(batcher.predict(server, p, PROBA) for p in parts))
    assert not batcher.enabled
    assert sample(metrics, "ensemble_batch_requests_count") == 4
    assert sample(metrics, "ensemble_batch_requests_sum") == 4


# --- settings ---------------------------------------------------------------------------


def test_batch_settings_defaults_environment_and_bounds(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Settings()
    assert (defaults.batch_max_rows, defaults.batch_max_wait_ms) == (64, 1.0)
    monkeypatch.setenv("ENSEMBLE_BATCH_MAX_ROWS", "16")
    monkeypatch.setenv("ENSEMBLE_BATCH_MAX_WAIT_MS", "0")
    assert (Settings().batch_max_rows, Settings().batch_max_wait_ms) == (16, 0.0)
    for name, value in [
        ("batch_max_rows", 0),
        ("batch_max_wait_ms", -1),
        ("batch_max_wait_ms", 5000),
    ]:
        with pytest.raises(ValidationError, match=name):
            Settings(**{name: value})


# --- through the HTTP API ---------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def iris_api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[Any, Api]]:
    settings = make_settings(tmp_path_factory.mktemp("batching"), batch_max_wait_ms=NO_CAP)
    async for app, api in started(settings):
        dataset = await api.iris()
        await api.train("iris-rf", forest(dataset, n_estimators=10))
        yield app, api


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    frame = iris_frame()[IRIS_FEATURES]
    return frame.iloc[start : start + n].to_dict(orient="records")  # type: ignore[return-value]


@pytest.mark.asyncio(loop_scope="module")
async def test_concurrent_api_requests_are_batched_with_unchanged_answers(
    iris_api: tuple[Any, Api],
) -> None:
    app, api = iris_api
    url = "/v1/models/iris-rf/versions/1/predict"
    bodies: list[tuple[str, Any]] = []
    for i in range(10):
        bodies.append(
            ("json", {"instances": rows(1 + i % 3, 10 * i), "options": {"return_proba": True}})
        )
    bodies.insert(4, ("json", {"instances": [{**rows(1)[0], "sepal_length": "x"}]}))
    table = iris_frame()[IRIS_FEATURES].iloc[40:42].reset_index(drop=True)
    bodies.insert(7, ("arrow", arrow_stream(pa_table(table))))

    async def send(kind: str, body: Any) -> Any:
        if kind == "arrow":
            headers = {"content-type": ARROW}
            return await api.client.post(url + "?return_proba=true", content=body, headers=headers)
        return await api.client.post(url, json=body)

    alone = [await send(*body) for body in bodies]  # one by one: no batch-mates
    before = await batch_counts(api)
    together = await asyncio.gather(*(send(*body) for body in bodies))
    after = await batch_counts(api)
    for one, joined in zip(alone, together, strict=True):
        assert joined.status_code == one.status_code
        if one.status_code == 200:
            assert joined.content == one.content  # byte for byte
        else:  # a problem names its own request
            assert joined.json()["errors"] == one.json()["errors"]
    assert together[4].status_code == 422
    assert together[4].json()["errors"][0]["loc"] == ["instances", 0, "sepal_length"]
    calls, requests = after[0] - before[0], after[1] - before[1]
    assert requests == len(bodies) - 1  # every good request counted once
    assert calls < requests  # and some shared a call
    assert app.state.services.batcher.enabled


def assert_answered_as_alone(alone: list[Any], together: list[Any]) -> None:
    """Each request answered in a batch as it was alone: the same bytes, or the same
    problem but for its request id."""
    for one, joined in zip(alone, together, strict=True):
        assert joined.status_code == one.status_code
        if one.status_code == 200:
            assert joined.content == one.content  # byte for byte
        else:
            assert {**joined.json(), "request_id": ""} == {**one.json(), "request_id": ""}


def odd_record(rng: random.Random, start: int) -> dict[str, Any]:
    """A one-record body's record: mostly a good row, else one a lone check refuses or
    warns about (or takes the careful way)."""
    record: dict[str, Any] = rows(1, start)[0]
    column = rng.choice(IRIS_FEATURES)
    change = rng.choice(["good"] * 6 + ["text", "bool", "none", "extra", "missing", "int", "big"])
    if change == "text":
        record[column] = "x"
    elif change == "bool":
        record[column] = True
    elif change == "none":
        record[column] = None
    elif change == "extra":
        record["colour"] = 1
    elif change == "missing":
        del record[column]
    elif change == "int":
        record[column] = int(record[column])
    elif change == "big":
        record[column] = 2**53 + 1
    return record


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("seed", range(6))
async def test_concurrent_one_record_requests_get_their_lone_answers(
    iris_api: tuple[Any, Api], seed: int
) -> None:
    """Random mixes of one-record bodies (good ones, odd cells, extra and missing
    columns), sent at once: each gets, byte for byte, what it gets sent alone."""
    _, api = iris_api
    rng = random.Random(seed)
    bodies = []
    for _ in range(rng.randint(2, 14)):
        body: dict[str, Any] = {"instances": [odd_record(rng, rng.randrange(150))]}
        if rng.random() < 0.7:
            body["options"] = {"return_proba": True}
        bodies.append(body)
    alone = [await api.predict("iris-rf", 1, body) for body in bodies]
    together = await asyncio.gather(*(api.predict("iris-rf", 1, body) for body in bodies))
    assert_answered_as_alone(alone, together)


@pytest.mark.asyncio(loop_scope="module")
async def test_concurrent_one_record_requests_are_checked_once_per_batch(
    iris_api: tuple[Any, Api], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ten one-record requests at once: the first is checked alone (answered at once),
    the nine others together, not one check each."""
    _, api = iris_api
    body = {"instances": rows(1, 20), "options": {"return_proba": True}}
    await api.predict("iris-rf", 1, body)  # the version resolved, the model loaded
    calls = counted_row_checks(monkeypatch)
    answers = await asyncio.gather(*(api.predict("iris-rf", 1, body) for _ in range(10)))
    assert {a.status_code for a in answers} == {200}
    assert calls == [1]


def pa_table(frame: Any) -> Any:
    import pyarrow as pa

    return pa.Table.from_pandas(frame, preserve_index=False)


async def batch_counts(api: Api) -> tuple[float, float]:
    text = (await api.client.get("/metrics")).text
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("ensemble_batch_requests_count", "ensemble_batch_requests_sum"):
            values[name] = float(value)
    return values["ensemble_batch_requests_count"], values["ensemble_batch_requests_sum"]


async def test_batching_switched_off_answers_each_request_alone(
    settings_for: Callable[..., Settings],
) -> None:
    async for app, api in started(settings_for(batch_max_wait_ms=0)):
        dataset = await api.iris()
        await api.train("iris-rf", forest(dataset, n_estimators=5))
        body = {"instances": rows(1), "options": {"return_proba": True}}
        answers = await asyncio.gather(*(api.predict("iris-rf", 1, body) for _ in range(6)))
        assert {a.status_code for a in answers} == {200}
        assert len({a.content for a in answers}) == 1
        calls, requests = await batch_counts(api)
        assert calls == requests == 6
        assert not app.state.services.batcher.enabled
        # A one-row table body of a layout seen before: read from its bytes, answered alone.
        table = pa.table({c: [v] for c, v in rows(1)[0].items()})
        url = "/v1/models/iris-rf/versions/1/predict?return_proba=true"
        for media, content in ((ARROW, arrow_stream(table)), (PARQUET, parquet_file(table))):
            for _ in range(2):  # learnt, then read from its bytes
                typed = {"content-type": media}
                answer = await api.client.post(url, content=content, headers=typed)
                assert answer.status_code == 200, answer.text
                assert answer.content == answers[0].content


def test_a_batch_open_for_max_wait_takes_no_more_requests() -> None:
    """The wait cap: a request finding the batch open for the whole
    wait flushes it and starts the next one (no clock is read here: times are given)."""
    from app.batching import _Open

    batcher = Batcher(64, 1.0, Metrics())
    server = servable("forest")
    batch = _Open(server, PROBA, opened=10.0, rows=1)
    assert batcher._fits(batch, server, 1, now=10.0009)
    assert not batcher._fits(batch, server, 1, now=10.0011)
    assert not batcher._fits(batch, server, 64, now=10.0)  # over the row cap


async def engine_calls_for_one_turn(requests: int) -> float:
    """The engine calls a 1 ms, 64-row batcher makes for ``requests`` one-row forest
    requests of one loop turn, each answer checked to be its lone one."""
    metrics = Metrics()
    batcher = Batcher(64, 1.0, metrics)
    server = servable("forest")
    parts = one_row_parts("forest", requests)
    answers = await asyncio.gather(*(batcher.predict(server, p, PROBA) for p in parts))
    for answer, part in zip(answers, parts, strict=True):
        assert_same(answer, server.predict(part, PROBA))
    assert sample(metrics, "ensemble_batch_requests_sum") == requests
    return sample(metrics, "ensemble_batch_requests_count")


async def test_a_tick_of_the_loops_coarse_clock_does_not_cut_a_young_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The wait is timed on a fine clock, not the loop's: uvloop's ``loop.time()`` counts
    whole milliseconds, and a 1 ms batch whose turn crossed the end of one was cut at
    once, however young (issue 24).  Here the loop's clock moves 2 ms at every
    reading while the batch's own clock stands still: the turn's nine requests share two
    calls, as with no cap (the first alone, eight joined)."""
    loop = asyncio.get_running_loop()
    ticks = iter(range(1_000_000))
    monkeypatch.setattr(loop, "time", lambda: 0.002 * next(ticks))
    monkeypatch.setattr("app.batching._now", lambda: 5.0, raising=False)
    assert await engine_calls_for_one_turn(9) == 2


async def test_a_batch_is_cut_at_max_wait_on_its_own_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cap still holds: on a clock that moves 0.6 ms at every reading, a 1 ms batch
    takes the request that finds it 0.6 ms old and is flushed by the next one (1.2 ms):
    nine requests are the first alone, then joined two by two (4 + 1 calls), answers
    unchanged."""
    readings = iter(range(1_000_000))
    monkeypatch.setattr("app.batching._now", lambda: 0.0006 * next(readings), raising=False)
    assert await engine_calls_for_one_turn(9) == 5


def arrow_row(i: int, change: str = "good") -> bytes:
    """A one-row Arrow body as pandas writes it (iris row ``i``), or an odd one."""
    table = iris_frame()[IRIS_FEATURES].iloc[i : i + 1].reset_index(drop=True)
    if change == "nan":
        table.iloc[0, 1] = float("nan")
    elif change == "inf":
        table.iloc[0, 2] = float("inf")
    elif change == "big":
        table.iloc[0, 0] = 1e39
    elif change == "shuffled":
        table = table[list(reversed(IRIS_FEATURES))]
    elif change == "extra":
        table = table.assign(colour=1.5)
    elif change == "text":
        table = table.astype({IRIS_FEATURES[3]: str})
    return arrow_stream(pa_table(table))


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("seed", range(4))
async def test_concurrent_one_row_arrow_requests_are_joined_by_their_matrices(
    iris_api: tuple[Any, Api], monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """One-row Arrow bodies of a loop turn (good rows, shuffled and extra columns, NaN,
    infinities, numbers beyond float32, a string column), each read from its bytes as
    one sent before: each gets, byte for byte, its lone answer or problem, and the good
    ones are joined by their matrices (``MatrixRows``) without a dict of column views
    made for each (one per engine call at most; before, one per request)."""
    from ensembles.inference import cells

    app, api = iris_api
    url = "/v1/models/iris-rf/versions/1/predict?return_proba=true"
    rng = random.Random(seed)
    changes = ["good"] * 6 + ["nan", "inf", "big", "shuffled", "extra", "text"]
    bodies = [arrow_row(rng.randrange(150), rng.choice(changes)) for _ in range(12)]
    bodies[0] = arrow_row(rng.randrange(150))

    async def send(body: bytes) -> Any:
        return await api.client.post(url, content=body, headers={"content-type": ARROW})

    alone = [await send(body) for body in bodies]  # (the layouts learnt)
    made: list[int] = []
    make = cells.MatrixColumns.__init__

    def counted(self: Any, names: Any, matrix: Any) -> None:
        made.append(len(matrix))
        make(self, names, matrix)

    monkeypatch.setattr(cells.MatrixColumns, "__init__", counted)
    batcher = app.state.services.batcher
    given: list[str] = []
    predict = batcher.predict

    async def seen(servable: Any, columns: Any, options: PredictOptions) -> Any:
        given.append(type(columns).__name__)
        return await predict(servable, columns, options)

    monkeypatch.setattr(batcher, "predict", seen)
    before = await batch_counts(api)
    together = await asyncio.gather(*(send(body) for body in bodies))
    calls = (await batch_counts(api))[0] - before[0]
    assert_answered_as_alone(alone, together)
    good = sum(one.status_code == 200 for one in alone)
    assert 0 < calls < good  # some shared a call
    assert given == ["MatrixRows"] * good  # the refused ones never reached the batcher
    assert len(made) <= calls


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("query", ["", "?return_proba=true", "?return_votes=true"])
async def test_a_lone_one_row_arrow_request_takes_the_row_lane_with_the_same_bytes(
    iris_api: tuple[Any, Api], monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """A one-row Arrow body read from its bytes and answered alone (or in a batch of its
    own) is answered by the servable's lane of lone rows (``Servable.predict_row``),
    byte for byte as without it (the row's columns predicted); odd bodies get their
    problems as before."""
    from ensembles.inference.servable import Servable

    _, api = iris_api
    url = f"/v1/models/iris-rf/versions/1/predict{query}"
    changes = ["good", "shuffled", "extra", "nan", "big", "text"]
    bodies = [arrow_row(i, change) for i in (0, 60, 120, 77) for change in changes]

    async def send(body: bytes) -> Any:
        return await api.client.post(url, content=body, headers={"content-type": ARROW})

    for body in bodies:  # (the layouts learnt)
        await send(body)
    lane = Servable.predict_row
    taken: list[bool] = []

    def counted(self: Servable, *args: Any) -> Any:
        found = lane(self, *args)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(Servable, "predict_row", counted)
    through_lane = [await send(body) for body in bodies]
    monkeypatch.setattr(Servable, "predict_row", lambda self, *args: None)
    without = [await send(body) for body in bodies]
    assert_answered_as_alone(without, through_lane)
    good = sum(one.status_code == 200 for one in without)
    assert good >= 12  # good, shuffled and extra columns
    if query == "?return_votes=true":  # the members answer: never the lane's
        assert not any(taken)
    else:
        assert taken.count(True) == good
