"""The client against the app itself (httpx's ASGI transport): every /v1 endpoint, the
answers typed, problems as exceptions, retries, the artifact's checksum."""

from __future__ import annotations

import io
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import joblib
import numpy as np
import pandas as pd
import pytest
import pytest_asyncio

from app.main import create_app
from ensemble_client import (
    ArtifactIntegrityError,
    AsyncClient,
    ConflictError,
    Dataset,
    InvalidArgumentError,
    InvalidRequestError,
    NotFoundError,
    RateLimitedError,
    ServiceUnavailableError,
    Version,
)
from tests.api.conftest import make_settings
from tests.api.support import IRIS_FEATURES, iris_frame
from tests.client.front import Fault, Front

pytestmark = pytest.mark.asyncio(loop_scope="module")
FOREST = {"kind": "random_forest", "params": {"n_estimators": 15}}


@dataclass
class Served:
    client: AsyncClient
    front: Front
    iris: Dataset
    version: Version


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    app = create_app(make_settings(tmp_path_factory.mktemp("client") / "data"))
    front = Front(app)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(front, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            client = AsyncClient(http=http)
            iris = await client.datasets.upload(iris_frame(), name="iris")
            version = await client.models.train(
                "iris-rf", dataset=iris, target="species", ensemble=FOREST, random_state=0,
                progress=False,
            )  # fmt: skip
            yield Served(client, front, iris, version)


async def test_uploads_frames_files_and_records_alike(served: Served, tmp_path: Path) -> None:
    client, frame = served.client, iris_frame()
    frame.to_csv(tmp_path / "flowers.csv", index=False)
    frame.to_parquet(tmp_path / "flowers.parquet", index=False)
    from_csv = await client.datasets.upload(tmp_path / "flowers.csv")
    from_parquet = await client.datasets.upload(str(tmp_path / "flowers.parquet"), name="pq")
    from_records = await client.datasets.upload(frame.to_dict(orient="records"), name="rec")
    for dataset in (served.iris, from_csv, from_parquet, from_records):
        assert (dataset.n_rows, dataset.n_columns) == (150, 5)
        assert [c.dtype for c in dataset.columns] == ["float64"] * 4 + ["string"]
    assert from_csv.name == "flowers" and from_parquet.name == "pq"  # the stem by default
    # The same table, the same canonical bytes, however it was sent.
    assert len({d.sha256 for d in (served.iris, from_csv, from_parquet, from_records)}) == 1
    with pytest.raises(FileNotFoundError, match=r"nowhere\.csv"):
        await client.datasets.upload(tmp_path / "nowhere.csv")


async def test_datasets_by_id_or_newest_name_and_deleted(served: Served) -> None:
    client = served.client
    older = await client.datasets.upload(iris_frame().head(50), name="twice")
    newer = await client.datasets.upload(iris_frame().head(60), name="twice")
    assert (await client.datasets.resolve("twice")).id == newer.id
    assert (await client.datasets.resolve(older.id)).id == older.id
    assert (await client.datasets.get(older.id)).n_rows == 50
    listed = [d.id for d in await client.datasets.list()]
    assert listed.index(newer.id) < listed.index(older.id)  # newest first
    await client.datasets.delete(older.id)
    with pytest.raises(NotFoundError) as caught:
        await client.datasets.get(older.id)
    assert (caught.value.status, caught.value.code) == (404, "not_found")
    with pytest.raises(NotFoundError, match="no dataset has the id or the name 'nothing'"):
        await client.datasets.resolve("nothing")


async def test_train_returns_the_version_with_its_metrics(served: Served) -> None:
    version = served.version
    assert (version.model, version.version, version.kind) == ("iris-rf", 1, "random_forest")
    assert version.metrics.oob is not None and version.metrics.oob["n_scored"] == 120
    assert version.metrics.holdout is not None and version.metrics.holdout["accuracy"] > 0.8
    assert version.metrics.all_curves()[0].x[-1] == 15  # the OOB curve up to every member
    again = await served.client.versions.get("iris-rf", 1)
    assert again.model_dump() == version.model_dump()
    model = await served.client.models.get("iris-rf")
    assert model.latest_version == 1


async def test_problems_become_exceptions_with_their_locations(served: Served) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        await served.client.models.train(
            "iris-rf", dataset=served.iris.id, target="nope",
            ensemble="random_forest", params={"n_estimators": 0},
        )  # fmt: skip
    error = caught.value
    assert (error.status, error.code) == (422, "invalid_spec")
    assert [e.loc for e in error.errors] == [["target"], ["ensemble", "params", "n_estimators"]]
    assert "2 problems" in error.detail and "ensemble.params.n_estimators" in str(error)
    with pytest.raises(NotFoundError, match="model 'nobody' not found"):
        await served.client.versions.list("nobody")


async def test_predictions_as_a_frame_equal_the_stored_pipeline(served: Served) -> None:
    client = served.client
    rows = iris_frame()[IRIS_FEATURES].iloc[::7]
    frame = await client.models.predict("iris-rf", rows, proba=True, votes=True)
    pipeline = joblib.load(io.BytesIO(await client.models.download_artifact("iris-rf")))
    assert list(frame.index) == list(rows.index)
    assert frame["prediction"].tolist() == pipeline.predict(rows).tolist()
    classes = ["setosa", "versicolor", "virginica"]
    proba = frame[[f"proba_{c}" for c in classes]].to_numpy()
    np.testing.assert_array_equal(proba, pipeline.predict_proba(rows))
    assert (frame[[f"votes_{c}" for c in classes]].sum(axis=1) == 15).all()
    assert frame.attrs["version"] == 1 and frame.attrs["warnings"] == []
    # Records and a mapping of columns answer the same, without pandas on the way in.
    records = rows.to_dict(orient="records")
    result = await client.models.predict_result("iris-rf", records, ref=1, proba=True)
    assert result.predictions == frame["prediction"].tolist()
    columns = {k: list(v) for k, v in rows.to_dict(orient="list").items()}
    assert (await client.models.predict_result("iris-rf", columns)).predictions == (
        result.predictions
    )


async def test_big_frames_go_as_arrow_and_answer_the_same(served: Served) -> None:
    client = served.client
    rows = iris_frame()[IRIS_FEATURES].sample(40, random_state=1)
    holed = rows.copy()
    holed.loc[holed.index[3], "sepal_width"] = np.nan  # missing: refused by this model
    as_json = await client.models.predict("iris-rf", rows, proba=True)
    with pytest.raises(InvalidRequestError) as json_problem:
        await client.models.predict("iris-rf", holed)
    client.arrow_min_rows = 10
    before = len(served.front.seen)
    try:
        as_arrow = await client.models.predict("iris-rf", rows, proba=True)
        with pytest.raises(InvalidRequestError) as arrow_problem:
            await client.models.predict("iris-rf", holed)
    finally:
        client.arrow_min_rows = 1000
    pd.testing.assert_frame_equal(as_json, as_arrow)
    assert len(served.front.seen) == before + 2
    assert [e.loc for e in json_problem.value.errors] == [["instances", 3, "sepal_width"]]
    assert [e.loc for e in arrow_problem.value.errors] == [["instances", 3, "sepal_width"]]


async def test_aliases_versions_and_conflicts(served: Served) -> None:
    client = served.client
    second = await client.models.train(
        "iris-rf", dataset="iris", target="species", ensemble="extra_trees",
        params={"n_estimators": 5}, random_state=0, progress=False,
    )  # fmt: skip
    assert second.version == 2
    alias = await client.models.alias("iris-rf", "production", 2)
    assert (alias.alias, alias.version) == ("production", 2)
    assert (await client.versions.get("iris-rf", "production")).kind == "extra_trees"
    assert [v.version for v in await client.versions.list("iris-rf")] == [2, 1]
    with pytest.raises(ConflictError) as caught:
        await client.versions.delete("iris-rf", 2)
    assert caught.value.status == 409
    await client.models.remove_alias("iris-rf", "production")
    await client.versions.delete("iris-rf", 2)
    assert [v.version for v in await client.versions.list("iris-rf")] == [1]
    assert [m.name for m in await client.models.list()] == ["iris-rf"]


async def test_jobs_listed_cancelled_and_waited_for(served: Served) -> None:
    client = served.client
    job = await client.models.train(
        "iris-big", dataset="iris", target="species", ensemble="random_forest",
        params={"n_estimators": 5000}, wait=False,
    )  # fmt: skip
    assert job.status in ("queued", "running") and job.version == 1
    assert job.id in [j.id for j in await client.jobs.list(model="iris-big")]
    await client.jobs.cancel(job.id)
    ended = await client.jobs.wait(job.id, progress=False, poll_interval=0.05, timeout=60)
    assert ended.status == "cancelled"
    assert (await client.jobs.get(job.id)).finished
    with pytest.raises(ConflictError):
        await client.jobs.cancel(job.id)
    cancelled = await client.jobs.list(status="cancelled")
    assert job.id in [j.id for j in cancelled]


async def test_a_changed_artifact_is_refused(served: Served, tmp_path: Path) -> None:
    client = served.client
    data = await client.models.download_artifact("iris-rf", 1, to=tmp_path / "model.joblib")
    assert (tmp_path / "model.joblib").read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.joblib"]
    served.front.corrupt = "/artifact"
    try:
        with pytest.raises(ArtifactIntegrityError, match="differs from the announced"):
            await client.models.download_artifact("iris-rf", 1, to=tmp_path / "bad.joblib")
    finally:
        served.front.corrupt = None
    assert not (tmp_path / "bad.joblib").exists()


async def test_idempotent_calls_are_retried_after_retry_after(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    client, front = served.client, served.front
    front.faults = [Fault("GET", "/v1/models/iris-rf", 503, times=2, retry_after="0.01")]
    start = len(front.seen)
    with caplog.at_level(logging.INFO, logger="ensemble_client"):
        model = await client.models.get("iris-rf")
    assert model.name == "iris-rf" and len(front.seen) - start == 3
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "retrying GET /v1/models/iris-rf in 0.01 s"
    ] * 2
    # Exhausted: the 503 is raised after 1 + 3 attempts.
    front.faults = [Fault("GET", "/v1/models", 503, times=10, retry_after="0")]
    start = len(front.seen)
    with pytest.raises(ServiceUnavailableError) as caught:
        await client.models.list()
    assert len(front.seen) - start == 4 and caught.value.status == 503
    # A training submission is never repeated: a 429 is raised at once, with its wait.
    front.faults = [Fault("POST", "/versions", 429, times=5, retry_after="7")]
    start = len(front.seen)
    with pytest.raises(RateLimitedError) as limited:
        await client.models.train("iris-rf", dataset=served.iris, target="species",
                                  ensemble=FOREST, wait=False)  # fmt: skip
    front.faults = []
    assert len(front.seen) - start == 1 and limited.value.retry_after == 7.0


async def test_kinds_and_health(served: Served) -> None:
    catalog = await served.client.kinds()
    assert "random_forest" in [k.kind for k in catalog.ensemble_kinds]
    assert "decision_tree" in [k.kind for k in catalog.base_kinds]
    assert (await served.client.health()).status == "ok"
    ready = await served.client.ready()
    assert ready.checks["database"] == "ok"


async def test_a_name_never_becomes_more_path_segments(served: Served) -> None:
    """``x/aliases/y`` quoted is ``x%2Faliases%2Fy``, which servers decode before routing:
    refused (a ValueError naming it) before anything is sent."""
    client, front = served.client, served.front
    await client.models.alias("iris-rf", "y", 1)
    start = len(front.seen)
    refused = {
        "model name 'iris-rf/aliases/y' contains '/'": client.models.delete("iris-rf/aliases/y"),
        "model name 'iris-rf/versions/1' contains '/'": client.models.get("iris-rf/versions/1"),
        "version reference '1/artifact' contains '/'": client.versions.get("iris-rf", "1/artifact"),
        "alias '../y' contains '/'": client.models.remove_alias("iris-rf", "../y"),
        "job id '..' cannot be one part of a URL path": client.jobs.get(".."),
        "dataset id '' cannot be one part of a URL path": client.datasets.delete(""),
    }
    for message, call in refused.items():
        with pytest.raises(InvalidArgumentError) as caught:
            await call
        assert isinstance(caught.value, ValueError) and str(caught.value).startswith(message)
    assert len(front.seen) == start
    assert (await client.models.get("iris-rf")).aliases == {"y": 1}
    await client.models.remove_alias("iris-rf", "y")


async def test_a_dataset_name_with_a_slash_is_found_by_name(served: Served) -> None:
    """A dataset's name is free text: one that cannot be an id is looked for by name."""
    uploaded = await served.client.datasets.upload(iris_frame().head(30), name="iris/v2")
    assert (await served.client.datasets.resolve("iris/v2")).id == uploaded.id
    await served.client.datasets.delete(uploaded.id)
