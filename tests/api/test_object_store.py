"""The service with its datasets and artifacts in an object store (a real S3 API server).

Configured by settings only (``object_store``, ``s3_endpoint_url``): the same requests,
the same answers; nothing lands in the data folder but the database; a damaged object is
the usual integrity problem; a store that stops answering makes readiness and the
requests that need it answer 503, quickly.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import AsyncIterator
from pathlib import Path

import joblib
import numpy as np
import pytest

from ensembles.registry.stores import StoreConfig
from ensembles.registry.stores.location import parse_s3_url
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame, records
from tests.s3server import S3Server


def _keys(server: S3Server, store: StoreConfig) -> list[str]:
    location = parse_s3_url(str(store.url))
    listing = server.client().list_objects_v2(Bucket=location.bucket, Prefix=location.prefix)
    return sorted(item["Key"] for item in listing.get("Contents", []))


@pytest.fixture
async def s3_api(tmp_path: Path, s3_store: StoreConfig) -> AsyncIterator[Api]:
    settings = make_settings(
        tmp_path / "data", object_store=s3_store.url, s3_endpoint_url=s3_store.endpoint_url
    )
    async for _, api in started(settings):
        yield api


async def test_upload_train_and_predict_with_everything_in_the_bucket(
    s3_api: Api, s3_store: StoreConfig, s3_server: S3Server, tmp_path: Path
) -> None:
    dataset_id = await s3_api.iris()
    version = await s3_api.train("iris-s3", forest(dataset_id))
    rows = records(iris_frame().iloc[::10], IRIS_FEATURES)
    predicted = await s3_api.predict(
        "iris-s3", "latest", {"instances": rows, "options": {"return_proba": True}}
    )
    assert predicted.status_code == 200, predicted.text

    # The artifact served is the object in the bucket, byte for byte, and it answers the same.
    artifact = await s3_api.client.get("/v1/models/iris-s3/versions/1/artifact")
    assert artifact.status_code == 200
    sha256 = hashlib.sha256(artifact.content).hexdigest()
    assert sha256 == artifact.headers["X-Artifact-SHA256"] == version["artifact"]["sha256"]
    keys = _keys(s3_server, s3_store)
    assert [k for k in keys if k.endswith(".joblib")] == [
        f"service/artifacts/{keys[0].split('/')[2]}/1/{sha256}.joblib"
    ]
    assert any(k.startswith(f"service/datasets/{dataset_id}/") for k in keys)
    pipeline = joblib.load(io.BytesIO(artifact.content))
    frame = iris_frame().iloc[::10][IRIS_FEATURES]
    assert predicted.json()["predictions"] == list(pipeline.predict(frame))
    assert np.allclose(predicted.json()["probabilities"], pipeline.predict_proba(frame))
    data = tmp_path / "data"
    assert not (data / "artifacts").exists() and not (data / "datasets").exists()

    # Deleting takes the objects along.
    assert (await s3_api.client.delete("/v1/models/iris-s3")).status_code == 204
    assert (await s3_api.client.delete(f"/v1/datasets/{dataset_id}")).status_code == 204
    assert _keys(s3_server, s3_store) == []


async def test_a_tampered_object_is_the_integrity_problem(
    s3_api: Api, s3_store: StoreConfig, s3_server: S3Server
) -> None:
    version = await s3_api.train("iris-s3", forest(await s3_api.iris()))
    (key,) = [k for k in _keys(s3_server, s3_store) if k.endswith(".joblib")]
    bucket = parse_s3_url(str(s3_store.url)).bucket
    original = s3_server.client().get_object(Bucket=bucket, Key=key)["Body"].read()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0x01
    s3_server.client().put_object(Bucket=bucket, Key=key, Body=bytes(damaged))

    rows = records(iris_frame().iloc[:3], IRIS_FEATURES)
    response = await s3_api.predict("iris-s3", 1, {"instances": rows})
    assert response.status_code == 500
    problem = response.json()
    assert (
        problem["code"] == "integrity"
        and "model 'iris-s3' version 1 is damaged" in problem["detail"]
    )
    assert "Traceback" not in response.text
    download = await s3_api.client.get("/v1/models/iris-s3/versions/1/artifact")
    assert download.status_code == 500 and download.json()["code"] == "integrity"
    assert version["artifact"]["sha256"] == hashlib.sha256(original).hexdigest()


async def test_an_unreachable_store_gives_503s_naming_it_never_a_hang(tmp_path: Path) -> None:
    with S3Server(tmp_path / "own") as server:
        store = StoreConfig(url=f"s3://{server.new_bucket()}/svc", endpoint_url=server.endpoint)
        settings = make_settings(
            tmp_path / "data", object_store=store.url, s3_endpoint_url=store.endpoint_url
        )
        async for _, api in started(settings):
            dataset_id = await api.iris()
            await api.train("iris-s3", forest(dataset_id))
            assert (await api.client.get("/readyz")).status_code == 200
            server.stop()

            ready = await api.client.get("/readyz")
            assert ready.status_code == 503
            assert (
                "artifact_store: cannot write to the object store s3://" in ready.json()["detail"]
            )
            assert ready.json()["checks"]["database"] == "ok"

            rows = records(iris_frame().iloc[:3], IRIS_FEATURES)
            for response in (
                await api.predict("iris-s3", 1, {"instances": rows}),  # not loaded yet
                await api.upload_csv(iris_frame().to_csv(index=False)),
                await api.client.get("/v1/models/iris-s3/versions/1/artifact"),
            ):
                assert response.status_code == 503, response.text
                problem = response.json()
                assert problem["code"] == "storage"
                assert f"the object store {store.url} at {server.endpoint}" in problem["detail"]
            # What only needs the database still works.
            assert (await api.client.get(f"/v1/datasets/{dataset_id}")).status_code == 200
