"""GET /v1/models/{name}/versions/{ref}/export/{format}: joblib, skops and ONNX.

Each export is checked the way a consumer uses it: the skops file loads with exactly the
types the header lists and predicts as the stored model; the ONNX graph runs on
onnxruntime, fed one column per input, and answers as the stored model. Computed formats
are kept beside the artifact (in the folder, or in the bucket) and served again from
there, also by another replica.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import onnxruntime
import pandas as pd
import pytest
import skops.io
from fastapi import FastAPI
from sklearn.metrics import accuracy_score, log_loss

from ensembles.export import fidelity_rows
from ensembles.export.onnx_format import feeds
from ensembles.registry.stores import StoreConfig
from ensembles.registry.stores.location import parse_s3_url
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, forest, iris_frame, locs
from tests.replicas import SharedBackends
from tests.s3server import S3Server

URL = "/v1/models/{}/versions/{}/export/{}"


async def export(api: Api, model: str, ref: object, fmt: str, **kw: Any) -> Any:
    return await api.client.get(URL.format(model, ref, fmt), **kw)


def checked(response: Any) -> bytes:
    assert response.status_code == 200, response.text
    data: bytes = response.content
    assert hashlib.sha256(data).hexdigest() == response.headers["X-Artifact-SHA256"]
    return data


def frame() -> pd.DataFrame:
    return iris_frame()[IRIS_FEATURES]


def fidelity(header: str) -> dict[str, str]:
    return dict(part.split("=", 1) for part in header.split("; "))


def exports_in(data_dir: Path) -> set[str]:
    return {p.name for p in (data_dir / "artifacts").rglob("*") if p.is_file()}


async def test_joblib_is_the_artifact_itself(api: Api) -> None:
    version = await api.train("iris", forest(await api.iris()))
    data = checked(await export(api, "iris", 1, "joblib"))
    artifact = await api.client.get("/v1/models/iris/versions/1/artifact")
    assert data == artifact.content
    assert hashlib.sha256(data).hexdigest() == version["artifact"]["sha256"]


async def test_skops_loads_with_exactly_the_listed_types_and_predicts_the_same(
    api: Api, tmp_path: Path
) -> None:
    await api.train("iris", forest(await api.iris()))
    await api.client.put("/v1/models/iris/aliases/production", json={"version": 1})
    response = await export(api, "iris", "production", "skops")
    data = checked(response)
    trusted = [t for t in response.headers["X-Skops-Untrusted-Types"].split(",") if t]
    assert trusted == ["sklearn.tree._tree.Tree"]
    with pytest.raises(skops.io.exceptions.UntrustedTypesFoundException):
        skops.io.loads(data)
    loaded = skops.io.loads(data, trusted=trusted)
    stored = joblib.load(io.BytesIO(checked(await export(api, "iris", 1, "joblib"))))
    assert list(loaded.predict(frame())) == list(stored.predict(frame()))
    assert np.array_equal(loaded.predict_proba(frame()), stored.predict_proba(frame()))
    assert response.headers["Content-Disposition"] == 'attachment; filename="iris-1.skops"'


async def test_a_computed_export_is_made_once_and_kept_beside_the_artifact(
    served: tuple[FastAPI, Api], tmp_path: Path
) -> None:
    app, api = served
    await api.train("iris", forest(await api.iris()))
    first = await asyncio.gather(*(export(api, "iris", 1, "skops") for _ in range(4)))
    assert app.state.exports.computed == {"skops": 1}  # the others waited and found it
    await asyncio.sleep(2.1)  # skops files carry their creation time (2 s resolution)...
    again = await export(api, "iris", "latest", "skops")
    assert len({checked(r) for r in [*first, again]}) == 1  # ...so this one was kept
    assert app.state.exports.computed == {"skops": 1}
    sha = again.headers["X-Artifact-SHA256"]
    folder = tmp_path / "data" / "artifacts"
    assert exports_in(tmp_path / "data") == {"1.joblib", f"{sha}.skops", f"{sha}.skops.json"}
    (kept,) = folder.glob("*/1.exports")
    assert kept.parent == next(folder.glob("*/1.joblib")).parent  # beside the artifact

    # Deleting the version takes its exports along.
    assert (await api.client.delete("/v1/models/iris/versions/1")).status_code == 204
    assert exports_in(tmp_path / "data") == set()
    assert (await export(api, "iris", 1, "skops")).status_code == 404


async def test_onnx_takes_one_input_per_column_and_reports_its_hold_out_fidelity(
    served: tuple[FastAPI, Api],
) -> None:
    app, api = served
    version = await api.train(
        "iris", forest(await api.iris(), evaluation={"holdout_fraction": 0.2, "cv_folds": 0})
    )
    response = await export(api, "iris", 1, "onnx")
    data = checked(response)
    measured = fidelity(response.headers["X-Export-Fidelity"])
    assert measured["rows"] == "30" == str(version["metrics"]["holdout"]["n"])
    assert measured["rows_from"] == "holdout"
    assert float(measured["max_abs_diff"]) <= 1e-4 and measured["label_agreement"] == "1"

    session = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    inputs = [(i.name, i.type, i.shape[1]) for i in session.get_inputs()]
    assert inputs == [(name, "tensor(float)", 1) for name in IRIS_FEATURES]
    labels, probabilities = session.run(None, feeds(frame(), IRIS_FEATURES))
    stored = joblib.load(io.BytesIO(checked(await export(api, "iris", 1, "joblib"))))
    assert list(labels) == list(stored.predict(frame()))
    assert np.max(np.abs(probabilities - stored.predict_proba(frame()))) <= 1e-4

    # The rows measured on are the very rows training held out: the same scores on them.
    registry = app.state.services.registry
    record = registry.get_version("iris", 1)
    rows = fidelity_rows(registry.read_dataset_parquet(version["dataset"]["id"]), record.metadata)
    truth = iris_frame().loc[rows.X.index, "species"]
    holdout = version["metrics"]["holdout"]
    assert accuracy_score(truth, stored.predict(rows.X)) == holdout["accuracy"]
    assert log_loss(truth, stored.predict_proba(rows.X)) == pytest.approx(holdout["log_loss"])


async def test_a_version_without_hold_out_is_measured_on_the_dataset_and_says_so(
    api: Api,
) -> None:
    body = forest(await api.iris(), evaluation={"holdout_fraction": 0.0, "cv_folds": 0})
    await api.train("iris", body)
    measured = fidelity((await export(api, "iris", 1, "onnx")).headers["X-Export-Fidelity"])
    assert measured["rows"] == "150" and measured["rows_from"] == "dataset"


async def test_a_part_without_a_faithful_converter_is_a_409_naming_it(api: Api) -> None:
    body = forest(await api.iris())
    body["ensemble"] = {"kind": "hist_gradient_boosting", "params": {"max_iter": 5}}
    await api.train("hgb", body)
    response = await export(api, "hgb", 1, "onnx")
    assert response.status_code == 409, response.text
    problem = response.json()
    assert problem["code"] == "export_failed" and locs(response) == [["ensemble"]]
    assert "HistGradientBoostingClassifier" in problem["errors"][0]["msg"]
    assert (await export(api, "hgb", 1, "skops")).status_code == 200  # other formats still work


async def test_a_deleted_dataset_leaves_no_rows_to_measure_on(api: Api) -> None:
    dataset_id = await api.iris()
    await api.train("iris", forest(dataset_id))
    assert (await api.client.delete(f"/v1/datasets/{dataset_id}")).status_code == 204
    response = await export(api, "iris", 1, "onnx")
    assert response.status_code == 409 and locs(response) == [["dataset"]]


async def test_unknown_formats_versions_and_models(api: Api) -> None:
    await api.train("iris", forest(await api.iris()))
    bad = await export(api, "iris", 1, "pickle")
    assert bad.status_code == 422 and locs(bad) == [["path", "format"]]
    assert (await export(api, "iris", 2, "onnx")).status_code == 404
    assert (await export(api, "iris", "staging", "skops")).status_code == 404
    assert (await export(api, "nope", 1, "joblib")).status_code == 404


async def test_an_export_made_by_one_replica_is_served_by_another_from_the_bucket(
    tmp_path: Path, s3_store: StoreConfig, s3_server: S3Server
) -> None:
    shared = SharedBackends.sqlite(tmp_path / "shared", s3_store)
    async for _, one in started(make_settings(tmp_path / "one", **shared.settings())):
        await one.train("iris", forest(await one.iris()))
        made = await export(one, "iris", 1, "skops")
        sha = made.headers["X-Artifact-SHA256"]
    location = parse_s3_url(str(s3_store.url))
    listing = server_keys(s3_server, location.bucket, location.prefix)
    (artifact,) = [k for k in listing if k.endswith(".joblib")]
    folder = artifact.rsplit("/", 1)[0]
    assert sorted(k for k in listing if "/exports/" in k) == [
        f"{folder}/exports/{sha}.skops",
        f"{folder}/exports/{sha}.skops.json",
    ]
    async for _, two in started(make_settings(tmp_path / "two", **shared.settings())):
        served = await export(two, "iris", 1, "skops")
        assert checked(served) == made.content  # found, not computed again
        assert served.headers["X-Skops-Untrusted-Types"] == made.headers["X-Skops-Untrusted-Types"]
        assert (await two.client.delete("/v1/models/iris")).status_code == 204
    assert [
        k for k in server_keys(s3_server, location.bucket, location.prefix) if "/exports/" in k
    ] == []


def server_keys(server: S3Server, bucket: str, prefix: str) -> list[str]:
    listing = server.client().list_objects_v2(Bucket=bucket, Prefix=prefix)
    return sorted(item["Key"] for item in listing.get("Contents", []))
