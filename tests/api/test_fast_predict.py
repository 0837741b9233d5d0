"""The one-row fast path (app.fast_predict) answers exactly as the FastAPI route does.

Two apps over one data folder, one with the fast path (the default) and one without
(``fast_predict=False``: every request takes FastAPI's router), get the same requests,
good and bad; status, every header and the bytes of each answer must be equal, and so
must the metrics and access log lines the requests leave.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.fast_predict import FastPredictMiddleware
from app.routes import predictions
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, diabetes_frame, forest, iris_frame, records

ROWS = records(iris_frame().iloc[::25], IRIS_FEATURES)  # 6 rows
ONE = ROWS[:1]
REG_ROWS = records(diabetes_frame().iloc[:2], list(diabetes_frame().columns[:-1]))
ID = {"X-Request-ID": "fast-path-test"}
KEYS = {"reader": "read", "trainer": "train"}


class Case:
    """One request: path suffix after /v1/models/, body bytes, headers, and how it is sent."""

    def __init__(
        self,
        label: str,
        path: str,
        body: bytes | dict[str, Any] | list[Any],
        headers: dict[str, str] | None = None,
        *,
        method: str = "POST",
        chunked: bool = False,
    ) -> None:
        self.label = label
        self.path = path
        self.body = body if isinstance(body, bytes) else orjson.dumps(body)
        self.headers = {"Content-Type": "application/json", **ID, **(headers or {})}
        self.method = method
        self.chunked = chunked

    async def send(self, client: httpx.AsyncClient) -> httpx.Response:
        content: Any = self.body
        if self.chunked:

            async def parts() -> AsyncIterator[bytes]:
                yield self.body[:5]
                yield self.body[5:]

            content = parts()
        return await client.request(
            self.method, f"/v1/models/{self.path}", content=content, headers=self.headers
        )


def arrow_stream(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def arrow_file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def parquet_file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


PROBA = {"return_proba": True}
ARROW = {"Content-Type": "application/vnd.apache.arrow.stream"}
ONE_TABLE = pa.Table.from_pylist(ONE)
_QUERY_PROBA = "iris/versions/1/predict?return_proba=true"
CASES = [
    Case("one row, proba", "iris/versions/1/predict", {"instances": ONE, "options": PROBA}),
    Case("rows", "iris/versions/1/predict", {"instances": ROWS}),
    Case(
        "columnar",
        "iris/versions/latest/predict",
        {"instances": {"columns": IRIS_FEATURES, "data": [[5.1, 3.5, 1.4, 0.2]]}},
    ),
    Case("alias", "iris/versions/prod/predict", {"instances": ONE, "options": PROBA}),
    Case(
        "weighted by key",
        "iris/versions/split/predict",
        {"instances": ONE},
        {"X-Routing-Key": "k1"},
    ),
    Case(
        "votes (a thread)",
        "iris/versions/1/predict",
        {"instances": ONE, "options": {"return_votes": True}},
    ),
    Case(
        "soft voting", "iris/versions/1/predict", {"instances": ONE, "options": {"voting": "soft"}}
    ),
    Case(
        "regression std",
        "reg/versions/1/predict",
        {"instances": REG_ROWS, "options": {"return_std": True}},
    ),
    Case("extra column", "iris/versions/1/predict", {"instances": [{**ONE[0], "colour": "red"}]}),
    Case(
        "charset",
        "iris/versions/1/predict",
        {"instances": ONE},
        {"Content-Type": "application/json; charset=utf-8"},
    ),
    Case(
        "+json",
        "iris/versions/1/predict",
        {"instances": ONE},
        {"Content-Type": "application/vnd.x+json"},
    ),
    Case(
        "bad cell", "iris/versions/1/predict", {"instances": [{**ONE[0], "sepal_length": "long"}]}
    ),
    Case("missing column", "iris/versions/1/predict", {"instances": [{"sepal_length": 1.0}]}),
    Case("too many rows", "iris/versions/1/predict", {"instances": ROWS * 10}),
    Case(
        "unknown option", "iris/versions/1/predict", {"instances": ONE, "options": {"probas": True}}
    ),
    Case(
        "bad option type",
        "iris/versions/1/predict",
        {"instances": ONE, "options": {"return_proba": "yes!"}},
    ),
    Case("no instances", "iris/versions/1/predict", {"rows": ONE}),
    Case("a list body", "iris/versions/1/predict", [ONE]),
    Case("not JSON", "iris/versions/1/predict", b'{"instances": [1, 2'),
    Case("NaN", "iris/versions/1/predict", b'{"instances": [{"sepal_length": NaN}]}'),
    Case("not UTF-8", "iris/versions/1/predict", b'{"instances": "\xff"}'),
    Case("empty body", "iris/versions/1/predict", b""),
    Case("arrow, options in the query", _QUERY_PROBA, arrow_stream(ONE_TABLE), ARROW),
    Case(
        "arrow file, rows",
        "iris/versions/prod/predict",
        arrow_file(pa.Table.from_pylist(ROWS)),
        {"Content-Type": "application/vnd.apache.arrow.file"},
    ),
    Case(
        "parquet",
        _QUERY_PROBA,
        parquet_file(ONE_TABLE),
        {"Content-Type": "application/x-parquet; x=y"},
    ),
    Case(
        "arrow, bad cell",
        "iris/versions/1/predict",
        arrow_stream(pa.Table.from_pylist([{**ONE[0], "sepal_length": "long"}])),
        ARROW,
    ),
    Case("arrow, not Arrow", "iris/versions/1/predict", b"ARROW1 not really", ARROW),
    Case(
        "arrow, votes in the query",
        "iris/versions/1/predict?return_votes=1&other=x",
        arrow_stream(ONE_TABLE),
        ARROW,
    ),
    Case("arrow, unknown model", "nope/versions/1/predict", arrow_stream(ONE_TABLE), ARROW),
    Case(
        "json, options in the query and the body",
        "iris/versions/1/predict?return_proba=true&return_votes=true",
        {"instances": ONE, "options": {"return_votes": False}},
    ),
    Case("repeated option", _QUERY_PROBA + "&return_proba=false", {"instances": ONE}),
    Case("unknown model", "nope/versions/1/predict", {"instances": ONE}),
    Case("unknown version", "iris/versions/9/predict", {"instances": ONE}),
    Case("unknown alias", "iris/versions/staging/predict", {"instances": ONE}),
    Case("bad name", "-iris/versions/1/predict", {"instances": ONE}),
    Case("bad ref", "iris/versions/0/predict", {"instances": ONE}),
    Case("escaped slash", "iris%2Fx/versions/1/predict", {"instances": ONE}),
    Case("query string", _QUERY_PROBA, {"instances": ONE}),
    Case("bad query option", "iris/versions/1/predict?return_proba=maybe", {"instances": ONE}),
    Case(
        "arrow, bad query option",
        "iris/versions/1/predict?voting=most",
        arrow_stream(ONE_TABLE),
        ARROW,
    ),
    Case(
        "text body", "iris/versions/1/predict", {"instances": ONE}, {"Content-Type": "text/plain"}
    ),
    Case("no content type", "iris/versions/1/predict", {"instances": ONE}, {"Content-Type": ""}),
    Case("chunked", "iris/versions/1/predict", {"instances": ONE}, chunked=True),
    Case("big body", "iris/versions/1/predict", {"instances": ROWS * 30}),
    Case("GET", "iris/versions/1/predict", b"", method="GET"),
    Case(
        "bad request id",
        "iris/versions/1/predict",
        {"instances": ONE},
        {"X-Request-ID": "no spaces"},
    ),
]


def _keyed(label: str, authorization: str | None, instances: Any = ONE) -> Case:
    headers = {} if authorization is None else {"Authorization": authorization}
    return Case(label, "iris/versions/1/predict", {"instances": instances}, headers)


AUTH_CASES = [
    _keyed("no key", None),
    _keyed("unknown key", "Bearer guess"),
    _keyed("not bearer", "Basic reader"),
    _keyed("bearer, no key", "Bearer "),
    _keyed("read key", "Bearer reader"),
    _keyed("lower case scheme", "bearer trainer"),
    _keyed("read key, bad row", "Bearer reader", [{"x": 1}]),
]
AUTH_STATUSES = {
    "no key": 401,
    "unknown key": 401,
    "not bearer": 401,
    "bearer, no key": 401,
    "read key": 200,
    "lower case scheme": 200,
    "read key, bad row": 422,
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A data folder with iris versions 1 and 2 (forests), alias prod (with a shadow),
    weighted alias split, and a regression forest reg."""
    data = tmp_path_factory.mktemp("fast") / "data"

    async def setup() -> None:
        async for _, api in started(make_settings(data)):
            dataset = await api.iris()
            await api.train("iris", forest(dataset, n_estimators=5))
            await api.train("iris", forest(dataset, n_estimators=3, random_state=3))
            put = await api.client.put(
                "/v1/models/iris/aliases/prod", json={"version": 1, "shadow": 2}
            )
            assert put.status_code == 200, put.text
            split = {"versions": {"1": 0.5, "2": 0.5}}
            assert (await api.client.put("/v1/models/iris/aliases/split", json=split)).is_success
            frame = diabetes_frame()
            reg = await api.upload_frame(frame, "diabetes")
            await api.train("reg", forest(reg, n_estimators=4, target="progression"))

    asyncio.run(setup())
    yield data


async def _answers(
    data: Path, fast: bool, cases: list[Case], caplog: pytest.LogCaptureFixture, **settings: Any
) -> tuple[list[Any], list[dict[str, Any]], dict[str, float], int | None, Any]:
    """Each case's (status, headers, bytes), the access log lines, the request and
    prediction counters, how many the fast path answered and the OpenAPI document, from a
    fresh app over ``data``."""
    caplog.clear()
    answers = []
    async for app, api in started(
        make_settings(data, fast_predict=fast, max_predict_rows=20, **settings)
    ):
        assert any(m.cls is FastPredictMiddleware for m in app.user_middleware) == fast
        for case in cases:
            response = await case.send(api.client)
            headers = [(k, _made(k, v)) for k, v in response.headers.multi_items()]
            answers.append((response.status_code, headers, response.content))
        lines = [
            {k: _made(k, v) for k, v in r.fields.items() if k != "duration_ms"}  # type: ignore[attr-defined]
            for r in caplog.records
            if r.name == "app.access"
        ]
        scrape = (await api.client.get("/metrics")).text
        document = (await api.client.get("/openapi.json")).json()
        answered = _fast_path(app.middleware_stack)
        assert (answered is not None) == fast
    return answers, lines, _counters(scrape), answered, document


def _fast_path(layer: Any) -> int | None:
    """How many requests the app's fast path answered (None: it has none)."""
    while layer is not None:
        if isinstance(layer, FastPredictMiddleware):
            return layer.answered
        layer = getattr(layer, "app", None)
    return None


def _made(name: str, value: Any) -> Any:
    """A request id the service made (the caller's was refused) as one placeholder: new
    ids differ between the two apps by design."""
    is_id = name.lower().replace("_", "-") in ("x-request-id", "request-id")
    if is_id and value != ID["X-Request-ID"]:
        assert re.fullmatch("[0-9a-f]{32}", value), value
        return "<made>"
    return value


COUNTED = (
    "ensemble_http_requests_total",
    "ensemble_predictions_total",
    "ensemble_prediction_rows_total",
    "ensemble_http_request_duration_seconds_count",
)


def _counters(text: str) -> dict[str, float]:
    """Request and prediction counts, and the latency histograms' counts, by labels."""
    return {
        f"{s.name}{sorted(s.labels.items())}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name in COUNTED
    }


def _assert_same(cases: list[Case], fast: list[Any], routed: list[Any]) -> None:
    for case, one, other in zip(cases, fast, routed, strict=True):
        assert one == other, case.label


@pytest.mark.parametrize("keys", [False, True], ids=["open", "api keys"])
async def test_the_fast_path_answers_as_the_route(
    folder: Path, keys: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="app.access")
    cases = AUTH_CASES if keys else CASES
    settings: dict[str, Any] = {"api_keys": KEYS} if keys else {}
    fast, fast_log, fast_counts, answered, document = await _answers(
        folder, True, cases, caplog, **settings
    )
    routed, routed_log, routed_counts, _, routed_document = await _answers(
        folder, False, cases, caplog, **settings
    )
    _assert_same(cases, fast, routed)
    assert fast_log == routed_log
    assert fast_counts == routed_counts
    assert document == routed_document and "/v1/models/{name}/versions/{ref}/predict" in str(
        document["paths"]
    )
    statuses = {case.label: answer[0] for case, answer in zip(cases, fast, strict=True)}
    if keys:  # the refusals come from the route, every key may read
        assert statuses == AUTH_STATUSES
        assert answered == 3  # the keys that may read; the refusals are the route's
        return
    # The cases cover what they say: answers, problems, and what only the route serves.
    assert statuses["one row, proba"] == statuses["votes (a thread)"] == 200
    assert statuses["bad cell"] == statuses["not JSON"] == statuses["bad ref"] == 422
    assert (statuses["unknown model"], statuses["too many rows"]) == (404, 413)
    assert (statuses["text body"], statuses["GET"], statuses["escaped slash"]) == (415, 405, 404)
    assert fast_counts  # requests were counted
    assert statuses["arrow, options in the query"] == statuses["parquet"] == 200
    assert statuses["arrow, bad cell"] == statuses["arrow, bad query option"] == 422
    # What the fast path answered itself (the rest went on to the route): every case up to
    # "unknown alias", "query string" and "bad request id".
    assert answered == [c.label for c in cases].index("unknown alias") + 3


async def test_a_request_id_is_made_when_none_is_given(folder: Path) -> None:
    async for _, api in started(make_settings(folder)):
        body = {"instances": ONE}
        first = await api.client.post("/v1/models/iris/versions/1/predict", json=body)
        second = await api.client.post("/v1/models/iris/versions/1/predict", json=body)
        assert first.status_code == second.status_code == 200
        ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
        assert len(set(ids)) == 2 and all(len(i) == 32 for i in ids)
        assert first.headers["x-content-type-options"] == "nosniff"


async def test_a_query_string_is_read_once_and_answers_as_the_first_time(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The options of a query string the fast path has seen are not parsed again; a
    string without parameters (``?&``) and a refused one answer each time as the route."""
    read: list[str] = []
    real = predictions.query_options

    def counted(query: Any) -> Any:
        read.append(str(query))
        return real(query)

    monkeypatch.setattr(predictions, "query_options", counted)
    body, path = arrow_stream(ONE_TABLE), "/v1/models/iris/versions/1/predict"
    async for _, api in started(make_settings(folder)):
        answers = [
            await api.client.post(f"{path}?{query}", content=body, headers=ARROW)
            for query in ["return_proba=true"] * 3 + ["&"] * 2 + ["voting=most"] * 2
        ]
    assert [a.status_code for a in answers] == [200] * 5 + [422] * 2
    assert answers[0].content == answers[1].content == answers[2].content
    assert "probabilities" in orjson.loads(answers[0].content)
    assert answers[3].content == answers[4].content
    assert "probabilities" not in orjson.loads(answers[3].content)
    refused = [{k: v for k, v in a.json().items() if k != "request_id"} for a in answers[5:]]
    assert refused[0] == refused[1] and "voting" in str(refused[0])
    assert read.count("return_proba=true") == 1
