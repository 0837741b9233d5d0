"""What every path and every response must be, over every route the app has (the routes
are read from ``app.routes``, included routers flattened by FastAPI's
``iter_route_contexts``, so a new route is covered the day it is added): an encoded
``/`` or ``\\`` in a path is refused, ``HEAD`` answers as ``GET`` without the body, every
answer says ``nosniff``, SVG carries the pages' content policy, redirects stay relative.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from app.edge import own_relative
from app.pages.templating import CONTENT_SECURITY_POLICY
from tests.api.conftest import make_settings, started
from tests.api.support import Api, forest, iris_csv

MODULE = pytest.mark.asyncio(loop_scope="module")
MODEL = "iris-rf"
ALIAS = "prod"
_PARAM = re.compile(r"\{(\w+)(?::\w+)?\}")


@dataclass(frozen=True)
class Served:
    app: FastAPI
    api: Api
    values: dict[str, str]  # a path parameter -> a value that exists


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """One app with a dataset, a trained model, an alias and its job, for every route."""
    data = Path(tmp_path_factory.mktemp("edge")) / "data"
    async for app, api in started(make_settings(data)):
        files = {"file": ("t.csv", iris_csv().encode(), "text/csv")}
        upload = await api.client.post("/v1/datasets", files=files)
        assert upload.status_code == 201, upload.text
        dataset = upload.json()["id"]
        version = await api.train(MODEL, forest(dataset, n_estimators=3))
        alias = await api.client.put(f"/v1/models/{MODEL}/aliases/{ALIAS}", json={"version": 1})
        assert alias.status_code == 200, alias.text
        values = {
            "name": MODEL,
            "ref": "1",
            "alias": ALIAS,
            "dataset_id": dataset,
            "job_id": version["job_id"],
            "plot": version["plots"][0],
            "version": "1",
        }
        yield Served(app, api, values)


def _routes(app: FastAPI) -> Iterator[tuple[str, set[str]]]:
    """Every HTTP route: its path template and methods."""
    for route in iter_route_contexts(app.routes):
        if route.path is not None and route.methods:
            yield route.path, set(route.methods)


def _fill(template: str, values: dict[str, str]) -> str:
    return _PARAM.sub(lambda m: values.get(m.group(1), "x"), template)


def _path(template: str, values: dict[str, str]) -> str:
    if template.startswith("/docs/assets/"):
        return template.replace("{name}", "favicon.png")
    return _fill(template, values)


def _get_paths(served: Served) -> list[str]:
    return [_path(path, served.values) for path, methods in _routes(served.app) if "GET" in methods]


# ----------------------------------------------------------------- encoded separators


@MODULE
async def test_an_encoded_slash_does_not_reach_another_route(served: Served) -> None:
    client = served.api.client
    version = await client.get(f"/v1/models/{MODEL}%2Fversions%2F1")
    assert version.status_code == 404, version.text
    problem = version.json()
    assert problem["code"] == "not_found"
    assert problem["instance"] == f"/v1/models/{MODEL}%2Fversions%2F1"
    assert problem["errors"][0]["loc"] == ["path"]
    assert f"'{MODEL}%2Fversions%2F1'" in problem["detail"]
    deleted = await client.delete(f"/v1/models/{MODEL}%2Faliases%2F{ALIAS}")
    assert deleted.status_code == 404, deleted.text
    still = await client.get(f"/v1/models/{MODEL}/versions/{ALIAS}")
    assert still.status_code == 200, "the alias was deleted through an encoded slash"
    for spelling in ("%2f", "%5C", "%5c"):
        answer = await client.get(f"/v1/models/{MODEL}{spelling}versions{spelling}1")
        assert answer.status_code == 404, (spelling, answer.text)


@MODULE
async def test_an_encoded_slash_is_refused_on_every_route(served: Served) -> None:
    """Each parameter of each route in turn holds ``a%2Fb``; /v2 answers its own shape."""
    client = served.api.client
    checked = 0
    for template, methods in _routes(served.app):
        for param in _PARAM.findall(template):
            path = _fill(template, {**served.values, param: f"{served.values.get(param)}%2F1"})
            checked += 1
            for method in sorted(methods):
                answer = await client.request(method, path)
                where = f"{method} {path}: {answer.text[:200]}"
                assert answer.status_code == 404, where
                if path.startswith("/v2"):
                    assert answer.headers["content-type"] == "application/json", where
                    assert "%2F" in answer.json()["error"], where
                else:
                    assert answer.json()["instance"] == path, where
    assert checked >= 30


@MODULE
async def test_encoded_characters_that_are_no_separator_still_route(served: Served) -> None:
    answer = await served.api.client.get(f"/v1/models/{MODEL}?q=a%2Fb")
    assert answer.status_code == 200, answer.text
    spaced = await served.api.client.get("/v1/models/a%20b")
    assert spaced.status_code == 422, spaced.text  # the name's pattern, as before


# ----------------------------------------------------------------------------- HEAD


@MODULE
async def test_head_answers_as_get_on_every_get_route(served: Served) -> None:
    client = served.api.client
    paths = _get_paths(served)
    assert {"/", "/healthz", "/metrics", "/docs", "/v2", f"/v1/models/{MODEL}"} <= set(paths)
    for path in paths:
        got = await client.get(path)
        head = await client.head(path)
        where = f"HEAD {path}: {head.status_code}, GET {got.status_code}"
        assert head.status_code == got.status_code, where
        assert head.status_code != 405, where
        assert head.content == b"", where
        assert head.headers.get("content-type") == got.headers.get("content-type"), where
        if got.status_code == 200 and "content-length" in got.headers and path != "/metrics":
            assert head.headers["content-length"] == str(len(got.content)), where


@MODULE
async def test_head_is_refused_where_get_is(served: Served) -> None:
    client = served.api.client
    refused = await client.head(f"/v1/models/{MODEL}/versions/1/predict")
    assert refused.status_code == 405
    assert "GET" not in refused.headers["allow"] and "HEAD" not in refused.headers["allow"]
    allowed = await client.post("/healthz")
    assert allowed.status_code == 405
    assert allowed.headers["allow"] == "GET, HEAD, OPTIONS"
    assert (await client.head("/no/such/path")).status_code == 404


@MODULE
async def test_head_requests_are_counted_by_route(served: Served) -> None:
    await served.api.client.head("/healthz")
    text = (await served.api.client.get("/metrics")).text
    assert 'ensemble_http_requests_total{method="HEAD",route="/healthz",status="200"}' in text


# -------------------------------------------------------------------------- headers


@MODULE
async def test_every_answer_says_nosniff(served: Served) -> None:
    client = served.api.client
    answers = [await client.get(path) for path in _get_paths(served)]
    answers += [
        await client.get("/no/such/path"),
        await client.post("/healthz"),
        await client.post("/v1/datasets", content=b"x" * 10, headers={"content-type": "a/b"}),
        await client.get(f"/v1/models/{MODEL}%2Fversions%2F1"),
        await client.get("/v2/models/nope"),
        await client.get("/docs/"),
    ]
    for answer in answers:
        where = f"{answer.request.method} {answer.request.url}: {answer.status_code}"
        assert answer.headers.get("x-content-type-options") == "nosniff", where


@MODULE
async def test_a_plot_as_svg_carries_the_pages_content_policy(served: Served) -> None:
    path = f"/v1/models/{MODEL}/versions/1/plots/{served.values['plot']}"
    svg = await served.api.client.get(path)
    assert svg.status_code == 200, svg.text
    assert svg.headers["content-type"].startswith("image/svg+xml")
    assert svg.headers["content-security-policy"] == CONTENT_SECURITY_POLICY


@MODULE
async def test_a_redirect_names_a_path_never_the_host_it_was_sent_to(served: Served) -> None:
    client = served.api.client
    evil = {"Host": "evil.example.com"}
    docs = await client.get("/docs/", headers=evil)
    assert docs.status_code == 307
    assert docs.headers["location"] == "/docs"
    redirected = 0
    for path in [p for p in _get_paths(served) if p != "/"]:
        answer = await client.get(path + "/?a=1", headers=evil)
        if 300 <= answer.status_code < 400:
            redirected += 1
            assert answer.headers["location"] == f"{path}?a=1", path
    assert redirected >= 10


def test_a_relative_location_never_reads_as_another_host() -> None:
    assert own_relative("http://h.example/docs?x=1", "h.example") == "/docs?x=1"
    assert own_relative("http://h.example//evil.example.com/", "h.example") == (
        "/evil.example.com/"
    )
    assert own_relative("http://h.example/\\evil.example.com", "h.example") == ("/evil.example.com")
    assert own_relative("https://elsewhere.example/a", "h.example") == (
        "https://elsewhere.example/a"
    )
    assert own_relative("/docs", "h.example") == "/docs"


def test_the_transport_keeps_the_encoded_slash() -> None:
    """The tests above mean something only if the client sends ``%2F`` as it is."""
    assert httpx.URL("http://t/v1/models/a%2Fb").raw_path == b"/v1/models/a%2Fb"
