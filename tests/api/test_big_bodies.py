"""Big columnar JSON bodies through the real service: numbers read straight into a matrix
answer exactly as the same rows sent as records, options merge as for any body, and a bad
cell deep inside is named by row and column with the message a small body gets."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi import FastAPI

from app.services.predictions import _key, _takes_more_than_numbers
from app.services.routing import target_inline
from app.settings import Settings
from ensembles.inference.row_parts import RowParts
from ensembles.inference.servable import Servable
from tests.api.conftest import started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame, locs

N = 10_000


def iris_rows(n: int = N) -> list[list[Any]]:
    """Iris rows resampled, some cells written as ints."""
    frame = iris_frame()[IRIS_FEATURES]
    rows: list[list[Any]] = frame.iloc[np.arange(n) % len(frame)].to_numpy().tolist()
    for row in rows[::13]:
        row[0] = round(row[0])
    return rows


def columnar(rows: list[list[Any]], columns: list[str] = IRIS_FEATURES, **extra: Any) -> bytes:
    return json.dumps({"instances": {"columns": columns, "data": rows}, **extra}).encode()


async def post(api: Api, model: str, body: bytes, query: str = "") -> Any:
    return await api.client.post(
        f"/v1/models/{model}/versions/1/predict{query}",
        content=body,
        headers={"content-type": "application/json"},
    )


@pytest.fixture
async def iris_model(api: Api) -> str:
    dataset = await api.iris()
    await api.train("big", forest(dataset, n_estimators=10))
    return "big"


async def test_a_big_columnar_body_answers_as_its_rows_sent_as_records(
    api: Api, iris_model: str
) -> None:
    rows = iris_rows()
    options = {"return_proba": True}
    answers = []
    for cell in (rows[5][1], 2**64):  # a big int is exact only as an int: read one by one
        rows[5][1] = cell
        big = await post(api, iris_model, columnar(rows, options=options))
        assert big.status_code == 200, big.text[:300]
        records = [dict(zip(IRIS_FEATURES, row, strict=True)) for row in rows]
        same = await api.predict(iris_model, 1, {"instances": records, "options": options})
        assert same.status_code == 200
        assert big.json() == same.json()
        answers.append(same.json())
    rows = iris_rows()
    # Columns in another order, an extra column, options from the query string.
    order = [3, 1, 0, 2]
    shuffled = [[row[j] for j in order] + [1] for row in rows]
    header = [IRIS_FEATURES[j] for j in order] + ["extra"]
    moved = await post(api, iris_model, columnar(shuffled, header), "?return_proba=true")
    assert moved.status_code == 200
    assert moved.json()["probabilities"] == answers[0]["probabilities"]
    assert moved.json()["warnings"] == ["extra columns ignored: extra"]


@pytest.mark.parametrize("cell", [None, "5.1", True, 10**39, 1e39, [5.1]], ids=repr)
async def test_a_bad_cell_deep_in_a_big_body_is_named_as_in_a_small_one(
    api: Api, iris_model: str, cell: Any
) -> None:
    rows = iris_rows()
    rows[9_876][2] = cell
    big = await post(api, iris_model, columnar(rows))
    small = await post(api, iris_model, columnar([rows[0], rows[9_876]]))
    assert big.status_code == small.status_code == 422, big.text[:300]
    assert locs(big) == [["instances", 9_876, "petal_length"]]
    assert locs(small) == [["instances", 1, "petal_length"]]
    assert big.json()["errors"][0]["msg"] == small.json()["errors"][0]["msg"]


async def test_bad_options_and_bad_json_in_a_big_body_are_reported_as_ever(
    api: Api, iris_model: str
) -> None:
    rows = iris_rows()
    bad_option = await post(api, iris_model, columnar(rows, options={"return_proba": "often"}))
    assert bad_option.status_code == 422
    assert locs(bad_option) == [["options", "return_proba"]]
    not_json = await post(api, iris_model, columnar(rows)[:-1])
    assert not_json.status_code == 422
    unknown = await post(api, "nothing", columnar(rows))
    assert unknown.status_code == 404


async def mixed_model(api: Api) -> pd.DataFrame:
    """A model "mixed-big" of an int, a boolean and a string feature; its table."""
    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "member": rng.random(n) < 0.5,
            "city": rng.choice(["oslo", "rome", "lima"], n),
            "y": rng.choice(["p", "q"], n),
        }
    )
    dataset = await api.upload_frame(frame, "mixed-big")
    body = {
        "dataset_id": dataset,
        "target": "y",
        "ensemble": {"kind": "random_forest", "params": {"n_estimators": 5}},
    }
    await api.train("mixed-big", body)
    return frame


async def test_a_model_with_string_and_boolean_features_reads_big_bodies_cell_by_cell(
    api: Api,
) -> None:
    frame = await mixed_model(api)
    columns = ["age", "member", "city"]
    rows = frame[columns].iloc[np.arange(N) % len(frame)].to_numpy().tolist()
    big = await post(api, "mixed-big", columnar(rows, columns))
    assert big.status_code == 200, big.text[:300]
    records = [dict(zip(columns, row, strict=True)) for row in rows]
    assert big.json() == (await api.predict("mixed-big", 1, {"instances": records})).json()
    rows[9_000][2] = 5
    rows[9_001][0] = 31.5  # an int column takes a float (as a number)
    bad = await post(api, "mixed-big", columnar(rows, columns))
    assert bad.status_code == 422
    assert locs(bad) == [["instances", 9_000, "city"]]
    assert bad.json()["errors"][0]["msg"] == "expected a string, got 5"
    numbers = [[1, 0, 2]] * N  # numbers only, for a model that takes strings: cell by cell
    refused = await post(api, "mixed-big", columnar(numbers, columns))
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["msg"] == "expected a boolean, got 0"


async def test_a_model_in_memory_that_takes_strings_skips_the_matrix_s_attempt(
    api: Api, app: FastAPI, iris_model: str
) -> None:
    """Its big bodies go straight to orjson (simdjson's parse was 10 ms of waste each);
    one not in memory yet has the matrix tried first, as every body had."""
    services = app.state.services
    frame = await mixed_model(api)
    assert not _takes_more_than_numbers(services, "mixed-big", "1", None)  # not loaded
    rows = frame[["age", "member", "city"]].to_numpy().tolist()
    first = await post(api, "mixed-big", columnar(rows * 50, ["age", "member", "city"]))
    assert first.status_code == 200, first.text[:300]
    assert _takes_more_than_numbers(services, "mixed-big", "1", None)
    big = await post(api, iris_model, columnar(iris_rows()))
    assert big.status_code == 200
    assert not _takes_more_than_numbers(services, iris_model, "1", None)  # numbers only


async def test_a_big_body_answered_on_two_threads_is_answered_as_on_one(
    settings_for: Callable[..., Settings],
) -> None:
    """ENSEMBLE_PREDICT_THREADS reaches the versions the service loads; the same body, cut
    into parts on two threads, gets the very answer one thread gives."""
    body = columnar(iris_rows(), options={"return_proba": True})
    answers = []
    for threads in (2, 1):
        settings = settings_for(predict_threads=threads, predict_part_rows=1_000)
        async for app, api in started(settings):
            if threads == 2:
                await api.train("big", forest(await api.iris(), n_estimators=10))
            answer = await post(api, "big", body)
            assert answer.status_code == 200, answer.text[:300]
            answers.append(answer.content)
            chosen = target_inline(app.state.services, "big", "1", None)
            assert chosen is not None
            servable = app.state.services.cache.peek(_key(chosen.record))
            assert isinstance(servable, Servable)
            assert servable.row_parts == RowParts(threads, 1_000)
    assert answers[0] == answers[1]
