"""Weighted aliases and shadows: routing by weight and by key, the 422s, shadow counts."""

from __future__ import annotations

import asyncio
import io
import math
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ensembles.routing import choose_version
from tests.api.conftest import make_settings, serve_copy, started, train_once
from tests.api.support import (
    IRIS_FEATURES,
    Api,
    diabetes_frame,
    forest,
    iris_frame,
    locs,
    records,
)

ALIAS = "/v1/models/iris/aliases/prod"
ROWS = records(iris_frame().iloc[::15], IRIS_FEATURES)  # 10 rows, every class


async def _train_versions(api: Api) -> None:
    dataset = await api.iris()
    await api.train("iris", forest(dataset, n_estimators=3))
    await api.train("iris", forest(dataset, n_estimators=5, random_state=7))
    renamed = iris_frame().rename(columns={"petal_length": "petal_len"})
    other = await api.upload_frame(renamed, "iris-renamed")
    await api.train("iris", forest(other, n_estimators=3))


@pytest.fixture(scope="module")
def trained_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data folder holding the three versions, trained once for the module (three jobs,
    each in a worker process: most of what a test here cost when each trained its own)."""
    folder = tmp_path_factory.mktemp("rollout") / "data"
    train_once(folder, _train_versions)
    return folder


@pytest.fixture
async def versions(tmp_path: Path, trained_data: Path) -> AsyncIterator[Api]:
    """iris versions 1 and 2 (forests of different sizes and seeds), and 3, trained on a
    table whose petal length is named differently: rows for 1 and 2 miss its column
    (each test's app serves its own copy of the module's trained folder)."""
    async for _, api in serve_copy(trained_data, tmp_path):
        yield api


async def _put(api: Api, body: dict[str, Any], alias: str = ALIAS) -> httpx.Response:
    return await api.client.put(alias, json=body)


async def _predict(api: Api, key: str | None = None, ref: str = "prod") -> dict[str, Any]:
    headers = {"X-Routing-Key": key} if key is not None else {}
    response = await api.client.post(
        f"/v1/models/iris/versions/{ref}/predict", json={"instances": ROWS}, headers=headers
    )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _within_binomial(count: int, n: int, p: float) -> None:
    """``count`` of ``n`` draws of probability ``p`` lies within 4 standard deviations
    (a chance of about 6e-5 to fail for a correct router)."""
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(count - n * p) <= 4 * sigma, (count, n * p, 4 * sigma)


# ---------------------------------------------------------------------------- weights


async def test_weights_split_requests_within_binomial_bounds(versions: Api) -> None:
    api = versions
    put = await _put(api, {"versions": {"1": 0.7, "2": 0.3}})
    assert put.status_code == 200, put.text
    assert put.json() == {
        "model": "iris",
        "alias": "prod",
        "version": 1,
        "versions": {"1": 0.7, "2": 0.3},
    }
    n = 300
    answered = Counter([(await _predict(api))["version"] for _ in range(n)])
    assert set(answered) == {1, 2}
    _within_binomial(answered[2], n, 0.3)
    # Keys spread the same way: the hash is uniform over keys.
    keyed = Counter([(await _predict(api, f"customer-{i}"))["version"] for i in range(n)])
    _within_binomial(keyed[2], n, 0.3)


async def test_a_routing_key_always_meets_the_same_version(versions: Api) -> None:
    api = versions
    assert (await _put(api, {"versions": {"1": 0.5, "2": 0.5}})).status_code == 200
    seen: dict[str, int] = {}
    for key in (f"k{i}" for i in range(20)):
        first = (await _predict(api, key))["version"]
        assert first == choose_version([(1, 0.5), (2, 0.5)], key)  # a pure function of the key
        for _ in range(3):
            assert (await _predict(api, key))["version"] == first
        seen[key] = first
    assert set(seen.values()) == {1, 2}
    # The answer is the answering version's own.
    key = next(k for k, v in seen.items() if v == 2)
    direct = await _predict(api, ref="2")
    assert (await _predict(api, key))["predictions"] == direct["predictions"]


async def test_v2_through_a_weighted_alias(versions: Api) -> None:
    api = versions
    assert (await _put(api, {"versions": {"1": 0.5, "2": 0.5}})).status_code == 200
    body = {
        "inputs": [
            {
                "name": name,
                "datatype": "FP64",
                "shape": [len(ROWS)],
                "data": [r[name] for r in ROWS],
            }
            for name in IRIS_FEATURES
        ]
    }
    versions_seen = set()
    for key in (f"user-{i}" for i in range(12)):
        response = await api.client.post(
            "/v2/models/iris/versions/prod/infer", json=body, headers={"X-Routing-Key": key}
        )
        assert response.status_code == 200, response.text
        answered = int(response.json()["model_version"])
        assert answered == choose_version([(1, 0.5), (2, 0.5)], key)
        assert answered == (await _predict(api, key))["version"]  # /v1 agrees
        versions_seen.add(answered)
    assert versions_seen == {1, 2}


async def test_get_shows_weights_and_a_plain_body_brings_it_back(versions: Api) -> None:
    api = versions
    assert (await _put(api, {"versions": {"2": 0.25, "1": 0.75}, "shadow": 2})).status_code == 200
    got = await api.client.get(ALIAS)
    assert got.json() == {
        "model": "iris",
        "alias": "prod",
        "version": 1,
        "versions": {"1": 0.75, "2": 0.25},
        "shadow": 2,
    }
    model = (await api.client.get("/v1/models/iris")).json()
    assert model["aliases"] == {"prod": 1}
    for number in (1, 2):  # both versions show the alias that sends them traffic
        version = (await api.client.get(f"/v1/models/iris/versions/{number}")).json()
        assert version["aliases"] == ["prod"]
    for number in (1, 2):  # neither can be deleted while the alias uses it
        deleted = await api.client.delete(f"/v1/models/iris/versions/{number}")
        assert deleted.status_code == 409 and "prod" in deleted.json()["detail"]
    plain = await _put(api, {"version": 2})
    assert plain.json() == {"model": "iris", "alias": "prod", "version": 2}
    assert (await api.client.get(ALIAS)).json() == plain.json()
    assert (await api.client.get(f"{ALIAS}/shadow")).status_code == 404
    assert (await api.client.get("/v1/models/iris/versions/1")).json()["aliases"] == []
    assert (await api.client.delete("/v1/models/iris/versions/1")).status_code == 204
    assert (await api.client.delete(ALIAS)).status_code == 204
    assert (await api.client.get(ALIAS)).status_code == 404


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"versions": {"1": 0.5, "2": 0.4}}, ["versions"]),  # sums to 0.9
        ({"versions": {"1": 0.5, "2": 0.5 + 1e-6}}, ["versions"]),
        ({"versions": {"1": 1.0, "2": 0.0}}, ["versions", "2"]),
        ({"versions": {"1": 1.5, "2": -0.5}}, ["versions", "2"]),
        ({"versions": {str(v): 0.1 for v in range(1, 12)}}, ["versions"]),
        ({"versions": {"1": 0.5, "9": 0.5}}, ["versions", "9"]),
        ({"versions": {"1": 0.5, "three": 0.5}}, ["versions", "three"]),
        ({"versions": {"1": 0.5, "2.0": 0.5}}, ["versions", "2.0"]),
        ({"versions": {"1": "half", "2": 0.5}}, ["versions", "1"]),
        ({"versions": {}}, ["versions"]),
        ({"version": 1, "shadow": 9}, ["shadow"]),
        ({"versions": {"1": 1.0}, "shadow": 9}, ["shadow"]),
        ({"version": 1, "versions": {"1": 1.0}}, ["version"]),
        ({"shadow": 2}, ["version"]),
    ],
)
async def test_bad_weights_are_a_422_naming_the_field(
    versions: Api, body: dict[str, Any], where: list[Any]
) -> None:
    api = versions
    assert (await _put(api, {"version": 1})).status_code == 200
    response = await _put(api, body)
    assert response.status_code == 422, response.text
    assert where in locs(response)
    assert (await api.client.get(ALIAS)).json()["version"] == 1  # nothing changed


async def test_weights_summing_to_one_within_the_tolerance_are_taken(versions: Api) -> None:
    api = versions
    thirds = {"1": 0.1 + 0.2, "2": 0.7}  # 0.30000000000000004 + 0.7
    assert (await _put(api, {"versions": thirds})).status_code == 200
    ten = {"1": 0.5, "2": 0.5}
    assert (await _put(api, {"versions": ten})).status_code == 200
    unknown_model = await api.client.put(
        "/v1/models/nope/aliases/prod", json={"versions": {"1": 1.0}}
    )
    assert unknown_model.status_code == 404


# ---------------------------------------------------------------------------- shadows


async def _stats(api: Api, alias: str = ALIAS, expected: int | None = None) -> dict[str, Any]:
    """The shadow's counts once ``expected`` requests reached it (answered, failed or
    dropped): the shadow thread works after the answers are sent."""
    deadline = time.monotonic() + 60
    while True:
        response = await api.client.get(f"{alias}/shadow")
        assert response.status_code == 200, response.text
        stats: dict[str, Any] = response.json()
        if expected is None or stats["requests"] + stats["dropped"] >= expected:
            return stats
        assert time.monotonic() < deadline, stats
        await asyncio.sleep(0.05)


async def test_a_shadow_never_answers_and_its_agreement_is_counted(versions: Api) -> None:
    api = versions
    assert (await _put(api, {"version": 1, "shadow": 2})).status_code == 200
    primary = await _predict(api, ref="1")
    shadow = await _predict(api, ref="2")
    for _ in range(5):
        answer = await _predict(api)
        assert answer["version"] == 1
        assert answer["predictions"] == primary["predictions"]
    stats = await _stats(api, expected=5)
    same = sum(a == b for a, b in zip(primary["predictions"], shadow["predictions"], strict=True))
    assert stats["shadow"] == 2 and stats["since"].endswith("Z")
    assert (stats["requests"], stats["rows"], stats["compared"]) == (5, 50, 50)
    assert stats["label_agreement"] == pytest.approx(same / len(ROWS))
    assert (stats["errors"], stats["dropped"]) == (0, 0)
    assert "mean_abs_difference" not in stats
    # The same shadow set again keeps its counts; another one starts from zero.
    assert (await _put(api, {"versions": {"1": 1.0}, "shadow": 2})).status_code == 200
    assert (await _stats(api))["requests"] == 5
    assert (await _put(api, {"version": 1, "shadow": 1})).status_code == 200
    assert (await _stats(api))["requests"] == 0


async def test_a_failing_shadow_is_counted_never_seen(versions: Api) -> None:
    api = versions
    # Version 3 wants a column the rows do not have: every shadow prediction fails.
    assert (await _put(api, {"versions": {"1": 0.5, "2": 0.5}, "shadow": 3})).status_code == 200
    for i in range(6):
        answer = await _predict(api, f"k{i}")
        assert answer["version"] in (1, 2)
    stats = await _stats(api, expected=6)
    assert (stats["requests"], stats["errors"], stats["compared"]) == (6, 6, 0)
    assert stats["label_agreement"] is None


async def test_a_regression_shadow_gives_the_mean_absolute_difference(api: Api) -> None:
    frame = diabetes_frame()
    dataset = await api.upload_frame(frame, "diabetes")
    features = [c for c in frame.columns if c != "progression"]
    for trees in (3, 6):
        body = {
            "dataset_id": dataset,
            "target": "progression",
            "ensemble": {"kind": "random_forest", "params": {"n_estimators": trees}},
            "random_state": 0,
        }
        await api.train("diabetes", body)
    alias = "/v1/models/diabetes/aliases/prod"
    assert (await _put(api, {"version": 1, "shadow": 2}, alias)).status_code == 200
    rows = {"instances": records(frame.head(7), features)}
    answers = []
    for ref in ("1", "2", "prod", "prod"):
        response = await api.client.post(f"/v1/models/diabetes/versions/{ref}/predict", json=rows)
        answers.append(response.json()["predictions"])
    stats = await _stats(api, alias, expected=2)
    expected = sum(abs(a - b) for a, b in zip(answers[0], answers[1], strict=True)) / 7
    assert (stats["requests"], stats["rows"], stats["errors"]) == (2, 14, 0)
    assert stats["mean_abs_difference"] == pytest.approx(expected)
    assert "label_agreement" not in stats


async def test_a_full_shadow_queue_drops_and_counts(tmp_path: Any) -> None:
    settings = make_settings(tmp_path / "data", shadow_queue=1)
    async for _, api in started(settings):
        dataset = await api.iris()
        await api.train("iris", forest(dataset, n_estimators=3))
        # A big shadow: its first load alone outlasts the flood.
        await api.train("iris", forest(dataset, n_estimators=300))
        assert (await _put(api, {"version": 1, "shadow": 2})).status_code == 200
        n = 60
        answers = await asyncio.gather(*(_predict(api) for _ in range(n)))
        assert all(answer["version"] == 1 for answer in answers)
        stats = await _stats(api, expected=n)
        assert stats["requests"] + stats["dropped"] == n
        assert stats["dropped"] >= 1 and stats["requests"] >= 1
        assert stats["errors"] == 0


# ---------------------------------------------------------------------------- metrics


async def test_predictions_are_counted_by_version_and_alias(versions: Api) -> None:
    api = versions
    assert (await _put(api, {"versions": {"1": 0.5, "2": 0.5}})).status_code == 200
    first_key: dict[int, str] = {}
    for key in (f"m{i}" for i in range(20)):
        first_key.setdefault(choose_version([(1, 0.5), (2, 0.5)], key), key)
    for key in first_key.values():
        assert (await _predict(api, key))["version"] in (1, 2)
    await _predict(api, ref="1")
    text = (await api.client.get("/metrics")).text
    counted = {
        (s.labels["version"], s.labels["alias"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "ensemble_predictions_total" and s.labels["model"] == "iris"
    }
    assert counted == {("1", ""): 1, ("1", "prod"): 1, ("2", "prod"): 1}


async def test_the_model_report_shows_each_alias_with_its_weights(versions: Api) -> None:
    api = versions
    assert (await _put(api, {"versions": {"1": 0.75, "2": 0.25}, "shadow": 3})).status_code == 200
    assert (await _put(api, {"version": 2}, "/v1/models/iris/aliases/stable")).status_code == 200
    html = (await api.client.get("/v1/models/iris/report")).text
    assert "prod → v1 0.75 · v2 0.25 · shadow v3" in html
    assert "stable → v2" in html


async def test_a_table_body_reaches_the_shadow_too(versions: Api) -> None:
    api = versions
    assert (await _put(api, {"version": 1, "shadow": 2})).status_code == 200
    buffer = io.BytesIO()
    iris_frame()[IRIS_FEATURES].head(12).to_parquet(buffer, index=False)
    response = await api.client.post(
        "/v1/models/iris/versions/prod/predict",
        content=buffer.getvalue(),
        headers={"Content-Type": "application/vnd.apache.parquet"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["version"] == 1
    stats = await _stats(api, expected=1)
    assert (stats["requests"], stats["rows"], stats["compared"], stats["errors"]) == (1, 12, 12, 0)
