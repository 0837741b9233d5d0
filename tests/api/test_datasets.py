"""POST/GET/DELETE /v1/datasets: every format in, every error the contract names."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pandas as pd

from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import Api, iris_csv, iris_frame, locs


async def test_upload_csv_201_with_location_and_summary(api: Api) -> None:
    response = await api.upload_csv(iris_csv(), name="iris")
    assert response.status_code == 201
    body = response.json()
    assert response.headers["location"] == f"/v1/datasets/{body['id']}"
    assert body["id"].startswith("ds_")
    assert (body["name"], body["n_rows"], body["n_columns"]) == ("iris", 150, 5)
    assert len(body["sha256"]) == 64 and body["created_at"].endswith("Z")
    columns = {c["name"]: c for c in body["columns"]}
    assert columns["sepal_length"] == {
        "name": "sepal_length", "dtype": "float64", "n_missing": 0, "n_unique": 35,
    }  # fmt: skip
    assert columns["species"]["dtype"] == "string"
    assert columns["species"]["n_unique"] == 3


async def test_upload_parquet_and_jsonl_by_file_name(api: Api) -> None:
    frame = iris_frame()
    parquet = io.BytesIO()
    frame.to_parquet(parquet, index=False)
    files = {"file": ("iris.parquet", parquet.getvalue(), "application/octet-stream")}
    response = await api.client.post("/v1/datasets", files=files)
    assert response.status_code == 201, response.text
    assert response.json()["n_rows"] == 150 and response.json()["name"] is None
    jsonl = "\n".join(json.dumps(r) for r in frame.head(20).to_dict(orient="records"))
    files = {"file": ("iris.jsonl", jsonl.encode(), "application/octet-stream")}
    response = await api.client.post("/v1/datasets", files=files, data={"name": "lines"})
    assert response.status_code == 201, response.text
    assert response.json()["n_rows"] == 20


async def test_same_table_any_format_same_sha256(api: Api) -> None:
    frame = iris_frame().head(30)
    csv = await api.upload_csv(frame.to_csv(index=False))
    rows = await api.client.post(
        "/v1/datasets", json={"columns": list(frame.columns), "rows": frame.to_numpy().tolist()}
    )
    recs = await api.client.post(
        "/v1/datasets", json={"name": "r", "records": frame.to_dict(orient="records")}
    )
    assert rows.status_code == recs.status_code == 201
    assert csv.json()["sha256"] == rows.json()["sha256"] == recs.json()["sha256"]


async def test_json_records_with_missing_keys(api: Api) -> None:
    body = {"name": "sparse", "records": [{"a": 1.5, "y": "x"}, {"a": None, "y": "z"}, {"y": "x"}]}
    response = await api.client.post("/v1/datasets", json=body)
    assert response.status_code == 201, response.text
    columns = {c["name"]: c for c in response.json()["columns"]}
    assert columns["a"]["n_missing"] == 2


async def test_list_newest_first_get_and_delete(api: Api) -> None:
    first = (await api.upload_csv(iris_csv(), name="one")).json()["id"]
    second = (await api.upload_csv(iris_csv(), name="two")).json()["id"]
    listed = await api.client.get("/v1/datasets")
    assert listed.status_code == 200
    assert [d["id"] for d in listed.json()][:2] == [second, first]
    got = await api.client.get(f"/v1/datasets/{first}")
    assert got.status_code == 200 and got.json()["name"] == "one"
    deleted = await api.client.delete(f"/v1/datasets/{first}")
    assert deleted.status_code == 204 and deleted.content == b""
    again = await api.client.get(f"/v1/datasets/{first}")
    assert again.status_code == 404 and again.json()["code"] == "not_found"
    assert (await api.client.delete(f"/v1/datasets/{first}")).status_code == 404
    assert (await api.client.get("/v1/datasets/not-an-id")).status_code == 404


async def test_get_and_delete_by_a_unique_name(api: Api) -> None:
    dataset = (await api.upload_csv(iris_csv(), name="iris")).json()["id"]
    got = await api.client.get("/v1/datasets/iris")
    assert got.status_code == 200 and got.json()["id"] == dataset
    missing = await api.client.get("/v1/datasets/roses")
    assert missing.status_code == 404 and "no dataset 'roses'" in missing.json()["detail"]
    assert (await api.client.delete("/v1/datasets/iris")).status_code == 204
    assert (await api.client.get(f"/v1/datasets/{dataset}")).status_code == 404


async def test_a_name_of_several_tables_is_a_422_listing_their_ids(api: Api) -> None:
    first = (await api.upload_csv(iris_csv(), name="iris")).json()["id"]
    other = iris_frame().head(50).to_csv(index=False)
    second = (await api.upload_csv(other, name="iris")).json()["id"]
    for response in (
        await api.client.get("/v1/datasets/iris"),
        await api.client.delete("/v1/datasets/iris"),
    ):
        assert response.status_code == 422, response.text
        (error,) = response.json()["errors"]
        assert error["loc"] == ["path", "dataset_id"]
        assert first in error["msg"] and second in error["msg"]
    assert len((await api.client.get("/v1/datasets")).json()) == 2  # nothing deleted


async def test_same_name_and_content_again_says_duplicate_of(api: Api) -> None:
    first = (await api.upload_csv(iris_csv(), name="iris")).json()
    assert first["duplicate_of"] is None
    again = await api.upload_csv(iris_csv(), name="iris")
    assert again.status_code == 201
    assert again.json()["duplicate_of"] == first["id"] != again.json()["id"]
    third = await api.upload_csv(iris_csv(), name="iris")
    assert third.json()["duplicate_of"] == first["id"]  # the first upload, every time
    # One table under one name reads by name (the newest); deleting must not guess.
    got = await api.client.get("/v1/datasets/iris")
    assert got.status_code == 200 and got.json()["id"] == third.json()["id"]
    assert (await api.client.delete("/v1/datasets/iris")).status_code == 422
    elsewhere = await api.upload_csv(iris_csv(), name="flowers")
    assert elsewhere.json()["duplicate_of"] is None  # another name: another dataset
    changed = await api.upload_csv(iris_frame().head(9).to_csv(index=False), name="iris")
    assert changed.json()["duplicate_of"] is None
    assert (await api.client.get("/v1/datasets/iris")).status_code == 422  # two tables now


async def test_empty_file_422(api: Api) -> None:
    response = await api.upload_csv("")
    assert response.status_code == 422
    assert locs(response) == [["table"]]


async def test_header_of_numbers_422(api: Api) -> None:
    response = await api.upload_csv("1,2,3\n4,5,6\n")
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_data"


async def test_ragged_rows_422_names_rows(api: Api) -> None:
    response = await api.upload_csv("a,b,c\n1,2,3\n4,5\n6,7,8,9\n")
    assert response.status_code == 422
    assert locs(response) == [["rows", 1], ["rows", 2]]


async def test_duplicate_columns_422_names_column(api: Api) -> None:
    response = await api.upload_csv("a,b,a\n1,2,3\n")
    assert response.status_code == 422
    assert locs(response) == [["columns", "a"]]


async def test_undecodable_bytes_422(api: Api) -> None:
    files = {"file": ("t.csv", b"a,b\n\xff\xfe,1\n", "text/csv")}
    response = await api.client.post("/v1/datasets", files=files)
    assert response.status_code == 422
    assert response.json()["errors"]


async def test_binary_file_named_csv_is_not_a_csv_table_422(api: Api) -> None:
    """NUL bytes are valid UTF-8: a file of zeros used to read as a table "with no rows"."""
    for content, says in [
        (b"\x00" * 512, "binary data (a NUL byte at byte 0)"),
        (b"\x1f\x8b\x08\x00" + bytes(range(256)), "a gzip archive"),
    ]:
        files = {"file": ("t.csv", content, "text/csv")}
        response = await api.client.post("/v1/datasets", files=files)
        assert response.status_code == 422
        (error,) = response.json()["errors"]
        assert error["msg"].startswith("not a CSV table: ") and says in error["msg"], error
        assert error["loc"][0] == "bytes"


async def test_json_rows_wrong_length_422_names_row(api: Api) -> None:
    body = {"columns": ["a", "b"], "rows": [[1, 2], [3]]}
    response = await api.client.post("/v1/datasets", json=body)
    assert response.status_code == 422
    assert locs(response) == [["rows", 1]]


async def test_json_body_shape_errors_422(api: Api) -> None:
    response = await api.client.post("/v1/datasets", json={"name": "x", "extra": 1})
    assert response.status_code == 422
    assert sorted(locs(response)) == [["extra"], ["rows"]]
    response = await api.client.post("/v1/datasets", json=[1, 2])
    assert response.status_code == 422 and locs(response) == [["body"]]
    response = await api.client.post(
        "/v1/datasets", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and locs(response) == [["body"]]


async def test_multipart_without_file_422(api: Api) -> None:
    response = await api.client.post(
        "/v1/datasets", data={"name": "x"}, files={"other": ("a", b"1")}
    )
    assert response.status_code == 422
    assert sorted(locs(response)) == [["file"], ["other"]]


async def test_unsupported_file_type_415(api: Api) -> None:
    files = {"file": ("table.xlsx", b"PK\x03\x04....", "application/vnd.ms-excel")}
    response = await api.client.post("/v1/datasets", files=files)
    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_format"
    assert locs(response) == [["file"]]


async def test_unsupported_body_type_415(api: Api) -> None:
    response = await api.client.post(
        "/v1/datasets", content=b"a,b\n1,2\n", headers={"content-type": "text/csv"}
    )
    assert response.status_code == 415


async def test_over_the_size_limit_413(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_upload_bytes=1000)):
        big = "a,b\n" + "1.5,2.5\n" * 200
        response = await api.upload_csv(big)
        assert response.status_code == 413
        assert response.json()["code"] == "too_large"
        response = await api.client.post(
            "/v1/datasets", json={"columns": ["a"], "rows": [[1.0]] * 300}
        )
        assert response.status_code == 413
        # A body streamed without Content-Length is cut off while it is read.

        async def chunks():  # type: ignore[no-untyped-def]
            for _ in range(100_000):
                yield b"x" * 1024

        response = await api.client.post(
            "/v1/datasets", content=chunks(), headers={"content-type": "application/json"}
        )
        assert response.status_code == 413


async def test_too_many_rows_413(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_dataset_rows=10)):
        response = await api.upload_csv(pd.DataFrame({"a": range(20)}).to_csv(index=False))
        assert response.status_code == 413
        assert locs(response) == [["rows"]]
