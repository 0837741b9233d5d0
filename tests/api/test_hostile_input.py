"""Hostile bodies and numbers: every route answers 4xx, never 5xx.

JSON nested 100,000 levels deep made the standard library's decoder raise RecursionError
(a 500) on uploads and training; a version number beyond 64 bits overflowed SQLite (a 500)
on alias and delete; a list nested 1,000 levels deep (valid for orjson) overflowed the
``repr`` of a problem message.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.api.conftest import serve_copy, train_once
from tests.api.support import IRIS_FEATURES, Api, forest, locs

DEEP_ARRAY = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"a":' * 100_000 + "1" + "}" * 100_000
INSIDE_A_FIELD = '{"name": "x", "records": ' + DEEP_ARRAY + "}"
HOSTILE_BODIES = {"array": DEEP_ARRAY, "object": DEEP_OBJECT, "inside a field": INSIDE_A_FIELD}
JSON_ROUTES = [
    ("POST", "/v1/datasets"),
    ("POST", "/v1/models/m/versions"),
    ("POST", "/v1/models/m/versions?wait=true"),
    ("POST", "/v1/models/iris-rf/versions/1/predict"),
    ("PUT", "/v1/models/iris-rf/aliases/production"),
]
JSON = {"content-type": "application/json"}


async def _train(api: Api) -> str:
    dataset = await api.iris()
    await api.train("iris-rf", forest(dataset, n_estimators=3))
    return dataset


@pytest.fixture(scope="module")
def trained_data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A data folder with version 1 of iris-rf, trained once for the module; its dataset."""
    folder = tmp_path_factory.mktemp("hostile") / "data"
    return folder, train_once(folder, _train)


@pytest_asyncio.fixture
async def trained(tmp_path: Path, trained_data: tuple[Path, str]) -> AsyncIterator[tuple[Api, str]]:
    """An app of the test's own serving iris-rf version 1 (a copy of the module's folder),
    and the version's dataset."""
    folder, dataset = trained_data
    async for _, api in serve_copy(folder, tmp_path):
        yield api, dataset


@pytest.mark.parametrize(("method", "path"), JSON_ROUTES, ids=str)
@pytest.mark.parametrize("shape", list(HOSTILE_BODIES))
async def test_deeply_nested_json_is_a_422_at_the_body(
    trained: tuple[Api, str], method: str, path: str, shape: str
) -> None:
    api, _ = trained
    response = await api.client.request(method, path, content=HOSTILE_BODIES[shape], headers=JSON)
    assert response.status_code == 422, response.text
    assert locs(response) == [["body"]]
    assert "JSON" in response.json()["errors"][0]["msg"]


@pytest.mark.parametrize(("method", "path"), JSON_ROUTES, ids=str)
async def test_bytes_that_are_not_utf8_are_a_422(
    trained: tuple[Api, str], method: str, path: str
) -> None:
    api, _ = trained
    response = await api.client.request(method, path, content=b'{"a": "\xff"}', headers=JSON)
    assert response.status_code == 422, response.text  # the alias route answered 400


async def test_a_list_nested_a_thousand_levels_inside_a_field_is_named(
    trained: tuple[Api, str],
) -> None:
    """Within orjson's depth limit the body parses; the problem message quotes the value
    briefly instead of overflowing ``repr``."""
    api, dataset = trained
    deep = "[" * 1000 + "1" + "]" * 1000
    spec = '{"kind": "random_forest", "params": {"n_estimators": ' + deep + "}}"
    body = f'{{"dataset_id": "{dataset}", "target": "species", "ensemble": {spec}}}'
    response = await api.client.post("/v1/models/m/versions", content=body, headers=JSON)
    assert response.status_code == 422, response.text
    assert locs(response) == [["ensemble", "params", "n_estimators"]]
    assert "[[[[...]]]]" in response.json()["errors"][0]["msg"]
    others = ", ".join(f'"{c}": 1.0' for c in IRIS_FEATURES[1:])
    cell = f'{{"instances": [{{"{IRIS_FEATURES[0]}": {deep}, {others}}}]}}'
    response = await api.client.post(
        "/v1/models/iris-rf/versions/1/predict", content=cell, headers=JSON
    )
    assert response.status_code == 422, response.text
    assert locs(response) == [["instances", 0, "sepal_length"]]


BIG_NUMBERS = ["9223372036854775808", "1" + "0" * 15, "1" + "0" * 18, "9" * 400, "0", "-1"]


@pytest.mark.parametrize("number", BIG_NUMBERS, ids=lambda n: n[:20])
async def test_version_numbers_out_of_range_are_a_422_on_every_route(
    trained: tuple[Api, str], number: str
) -> None:
    api, _ = trained
    alias = await api.client.put(
        "/v1/models/iris-rf/aliases/production", content=f'{{"version": {number}}}', headers=JSON
    )
    assert alias.status_code == 422, alias.text
    for method in ("GET", "DELETE"):
        response = await api.client.request(method, f"/v1/models/iris-rf/versions/{number}")
        assert response.status_code == 422, (method, response.text)
        assert locs(response) == [["path", "ref"]]
    predict = await api.predict("iris-rf", number, {"instances": []})
    assert predict.status_code == 422, predict.text


async def test_the_highest_version_number_is_a_404(trained: tuple[Api, str]) -> None:
    api, _ = trained
    highest = "9" * 15
    alias = await api.client.put(
        "/v1/models/iris-rf/aliases/production", json={"version": int(highest)}
    )
    assert alias.status_code == 404, alias.text
    for method in ("GET", "DELETE"):
        response = await api.client.request(method, f"/v1/models/iris-rf/versions/{highest}")
        assert response.status_code == 404, (method, response.text)
