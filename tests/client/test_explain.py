"""``explain=True`` in the client (sync and async) and ``ensemble predict --explain
[--top K]`` over the real app: the contributions come with the predictions and add up,
the CLI prints each row's largest contributions readably."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from app.main import create_app
from ensemble_client import AsyncClient, Client, Explanations
from ensemble_client.cli import cli
from ensemble_client.cli.app import State
from tests.api.conftest import make_settings
from tests.api.support import IRIS_FEATURES, iris_frame

FOREST = {"kind": "random_forest", "params": {"n_estimators": 8}}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    app = create_app(make_settings(tmp_path_factory.mktemp("explain") / "data"))
    with TestClient(app, base_url="http://test") as client:
        Client(http=client).datasets.upload(iris_frame(), name="iris")
        Client(http=client).models.train(
            "iris-rf", dataset="iris", target="species", ensemble=FOREST, random_state=0,
            progress=False,
        )  # fmt: skip
        yield client


def test_the_client_returns_the_contributions_with_the_predictions(http: httpx.Client) -> None:
    rows = iris_frame()[IRIS_FEATURES].iloc[[0, 60, 120]]
    frame = Client(http=http).models.predict("iris-rf", rows, explain=True, proba=True)
    explained = frame.attrs["explanations"]
    assert isinstance(explained, Explanations)
    assert explained.features == IRIS_FEATURES and explained.exact
    for i, (_, row) in enumerate(frame.iterrows()):
        for label in ("setosa", "versicolor", "virginica"):
            contributions = explained.contributions[i][label]
            assert isinstance(contributions, dict) and isinstance(explained.base_values, dict)
            total = explained.base_values[label] + sum(contributions.values())
            assert total == pytest.approx(row[f"proba_{label}"], abs=1e-6)
    top = Client(http=http).models.predict_result("iris-rf", rows, explain=True, top=1)
    assert top.explanations is not None
    first = top.explanations.contributions[0]["setosa"]
    assert isinstance(first, dict) and set(first) >= {"(other)"} and len(first) == 2
    plain = Client(http=http).models.predict_result("iris-rf", rows)
    assert plain.explanations is None


def test_the_async_client_explains_too(http: httpx.Client) -> None:
    transport = httpx.ASGITransport(app=http.app)  # type: ignore[attr-defined]
    rows = iris_frame()[IRIS_FEATURES].head(2)

    async def ask() -> Explanations | None:
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as ahttp:
            answer = await AsyncClient(http=ahttp).models.predict_result(
                "iris-rf", rows, explain=True
            )
            return answer.explanations

    explained = asyncio.run(ask())
    assert explained is not None and explained.method == "tree_shap"


def run(http: httpx.Client, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), obj=State(_client=Client(http=http)))


def test_the_cli_prints_each_rows_largest_contributions(http: httpx.Client, tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    iris_frame()[IRIS_FEATURES].iloc[[0, 120]].to_csv(path, index=False)
    result = run(http, "predict", "iris-rf", str(path), "--explain", "--top", "2")
    assert result.exit_code == 0, result.output
    out = result.output
    assert "why: tree_shap (exact) in probability space" in out
    assert "largest contributions" in out and "(other)" in out
    lines = [line for line in out.splitlines() if "setosa" in line and "petal" in line]
    assert lines, out
    as_json = run(http, "--json", "predict", "iris-rf", str(path), "--explain")
    assert as_json.exit_code == 0 and '"explanations"' in as_json.output
