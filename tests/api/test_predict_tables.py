"""Prediction batches sent as tables (Arrow IPC, Parquet): the answers and the problems of
the same rows sent as JSON, options in the query string."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import joblib
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import pytest
import pytest_asyncio

from app.bodies import TableFormat
from app.fast_predict import FastPredictMiddleware
from app.services import predictions as services_predictions
from app.settings import Settings
from tests.api.conftest import make_settings, started
from tests.api.support import IRIS_FEATURES, Api, diabetes_frame, forest, iris_frame, locs

pytestmark = pytest.mark.asyncio(loop_scope="module")

ARROW = "application/vnd.apache.arrow.stream"
PARQUET = "application/vnd.apache.parquet"
DIABETES_FEATURES = [c for c in diabetes_frame().columns if c != "progression"]
MIXED = ["age", "income", "member", "city"]


def arrow_stream(table: pa.Table, max_chunksize: int | None = None) -> bytes:
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=max_chunksize)
    return bytes(sink.getvalue().to_pybytes())


def parquet_file(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


ENCODERS: dict[str, tuple[str, Callable[[pa.Table], bytes]]] = {
    "arrow": (ARROW, arrow_stream),
    "parquet": (PARQUET, parquet_file),
    "x-parquet": ("application/x-parquet", parquet_file),
}


def mixed_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """Rows with an int, a float with gaps, a boolean with gaps and a string with gaps."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        rows.append(
            {
                "age": int(rng.integers(18, 80)),
                "income": None if i % 7 == 3 else round(float(rng.normal(50, 10)), 3),
                "member": None if i % 11 == 5 else bool(rng.random() < 0.5),
                "city": None if i % 9 == 2 else str(rng.choice(["oslo", "rome", "lima"])),
            }
        )
    return rows


def mixed_table(rows: list[dict[str, Any]]) -> pa.Table:
    types = {"age": pa.int64(), "income": pa.float64(), "member": pa.bool_(), "city": pa.string()}
    return pa.table({c: pa.array([r[c] for r in rows], type=types[c]) for c in MIXED})


class Models:
    def __init__(self, api: Api, app: Any) -> None:
        self.api = api
        self.app = app

    async def post(self, model: str, content: bytes, media: str, query: str = "") -> httpx.Response:
        url = f"/v1/models/{model}/versions/1/predict{query}"
        return await self.api.client.post(url, content=content, headers={"content-type": media})

    async def table(
        self, model: str, table: pa.Table, fmt: str = "arrow", query: str = ""
    ) -> httpx.Response:
        media, encode = ENCODERS[fmt]
        return await self.post(model, encode(table), media, query)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def models(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Models]:
    """A classifier (iris), a regressor (diabetes) and a mixed-type classifier, trained once."""
    settings = make_settings(tmp_path_factory.mktemp("tables"), max_concurrent_jobs=2)
    async for app, api in started(settings):
        iris = await api.upload_frame(iris_frame(), "iris")
        diabetes = await api.upload_frame(diabetes_frame(), "diabetes")
        rows = mixed_rows(90, seed=0)
        labels = ["yes" if (r["age"] > 45) != (r["city"] == "rome") else "no" for r in rows]
        body = {
            "columns": [*MIXED, "label"],
            "rows": [[*r.values(), y] for r, y in zip(rows, labels, strict=True)],
        }
        uploaded = await api.client.post("/v1/datasets", json={"name": "mixed", **body})
        assert uploaded.status_code == 201, uploaded.text
        mixed = uploaded.json()["id"]
        jobs = [
            await api.submit("iris-rf", forest(iris, n_estimators=5)),
            await api.submit(
                "diabetes-rf",
                {
                    "dataset_id": diabetes,
                    "target": "progression",
                    "ensemble": {"kind": "random_forest", "params": {"n_estimators": 5}},
                    "random_state": 0,
                },
            ),
            await api.submit(
                "mixed-bag",
                {
                    "dataset_id": mixed,
                    "target": "label",
                    "ensemble": {"kind": "bagging", "params": {"n_estimators": 4}},
                    "random_state": 0,
                },
            ),
        ]
        for job in jobs:
            assert job.status_code == 202, job.text
            done = await api.wait_job(job.json()["id"], timeout=120)
            assert done["status"] == "succeeded", done
        yield Models(api, app)


def iris_rows(n: int = 30) -> pd.DataFrame:
    return iris_frame().sample(n, random_state=4).reset_index(drop=True)[IRIS_FEATURES]


async def as_json(models: Models, model: str, records: list[dict[str, Any]], **options: Any) -> Any:
    response = await models.api.predict(model, 1, {"instances": records, "options": options})
    assert response.status_code == 200, response.text
    return response.json()


# --- the same answers -------------------------------------------------------------------


@pytest.mark.parametrize("fmt", list(ENCODERS))
async def test_a_classifier_answers_a_table_as_the_same_rows_in_json(
    models: Models, fmt: str
) -> None:
    rows = iris_rows()
    expected = await as_json(models, "iris-rf", rows.to_dict("records"), return_proba=True)
    table = pa.Table.from_pandas(rows, preserve_index=False)
    response = await models.table("iris-rf", table, fmt, "?return_proba=true")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == expected
    assert len(expected["probabilities"]) == 30 and expected["warnings"] == []


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
async def test_a_regressor_answers_a_table_as_json_with_std(models: Models, fmt: str) -> None:
    rows = diabetes_frame().sample(25, random_state=2).reset_index(drop=True)[DIABETES_FEATURES]
    expected = await as_json(models, "diabetes-rf", rows.to_dict("records"), return_std=True)
    table = pa.Table.from_pandas(rows, preserve_index=False)
    response = await models.table("diabetes-rf", table, fmt, "?return_std=1")
    assert response.status_code == 200, response.text
    assert response.json() == expected and len(expected["std"]) == 25


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
async def test_mixed_types_with_missing_values(models: Models, fmt: str) -> None:
    rows = mixed_rows(40, seed=1)
    expected = await as_json(models, "mixed-bag", rows, return_proba=True, return_votes=True)
    query = "?return_proba=true&return_votes=true"
    response = await models.table("mixed-bag", mixed_table(rows), fmt, query)
    assert response.status_code == 200, response.text
    assert response.json() == expected
    assert {"votes", "agreement", "probabilities"} <= set(expected)


async def test_unseen_categories_are_warned_of_in_json_records_columns_and_tables(
    models: Models,
) -> None:
    rows = mixed_rows(6, seed=4)
    rows[0]["city"], rows[3]["city"] = "paris", "Rome"  # training had oslo, rome, lima
    warning = (
        "column 'city': 2 rows have categories not seen in training ('paris' at row 0, "
        "'Rome' at row 3); they are encoded as unknown"
    )
    by_records = await as_json(models, "mixed-bag", rows, return_proba=True)
    assert by_records["warnings"] == [warning]
    columnar = {"columns": MIXED, "data": [[r[c] for c in MIXED] for r in rows]}
    response = await models.api.predict(
        "mixed-bag", 1, {"instances": columnar, "options": {"return_proba": True}}
    )
    assert response.status_code == 200, response.text
    assert response.json() == by_records
    for fmt in ("arrow", "parquet"):
        response = await models.table("mixed-bag", mixed_table(rows), fmt, "?return_proba=1")
        assert response.status_code == 200, response.text
        assert response.json() == by_records
    # The prediction still succeeds: the stored pipeline's answer for the same rows.
    artifact = await models.api.client.get("/v1/models/mixed-bag/versions/1/artifact")
    pipeline = joblib.load(io.BytesIO(artifact.content))
    frame = pd.DataFrame(rows, columns=MIXED)  # missing strings and booleans: NaN
    for column in ("member", "city"):
        cells = [np.nan if r[column] is None else r[column] for r in rows]
        frame[column] = pd.Series(cells, dtype=object)
    assert by_records["predictions"] == pipeline.predict(frame).tolist()


async def test_seen_categories_give_no_warning(models: Models) -> None:
    rows = mixed_rows(20, seed=5)  # oslo, rome, lima and missing cities only
    assert (await as_json(models, "mixed-bag", rows))["warnings"] == []
    response = await models.table("mixed-bag", mixed_table(rows))
    assert response.status_code == 200 and response.json()["warnings"] == []


async def test_record_batches_string_kinds_and_voting_override(models: Models) -> None:
    """Several record batches, dictionary-encoded strings, int32 ages, a soft vote."""
    rows = mixed_rows(33, seed=2)
    table = mixed_table(rows)
    table = table.set_column(0, "age", pa.compute.cast(table["age"], pa.int32()))
    table = table.set_column(3, "city", pa.compute.dictionary_encode(table["city"]))
    expected = await as_json(models, "mixed-bag", rows, voting="soft", return_proba=True)
    body = arrow_stream(table, max_chunksize=10)
    response = await models.post("mixed-bag", body, ARROW, "?voting=soft&return_proba=true")
    assert response.status_code == 200, response.text
    assert response.json() == expected


async def test_extra_and_pandas_index_columns(models: Models) -> None:
    rows = iris_rows(5).set_axis([10, 11, 12, 13, 14])  # a pandas index worth storing
    table = pa.Table.from_pandas(rows.assign(colour="blue", id=range(5)))
    assert "__index_level_0__" in table.column_names
    for fmt in ("arrow", "parquet"):
        response = await models.table("iris-rf", table, fmt)
        assert response.status_code == 200, response.text
        assert response.json()["warnings"] == ["extra columns ignored: colour, id"]


# --- the same problems ------------------------------------------------------------------


async def json_problems(models: Models, model: str, records: list[dict[str, Any]]) -> Any:
    response = await models.api.predict(model, 1, {"instances": records})
    assert response.status_code == 422, response.text
    return response.json()["errors"]


@pytest.mark.parametrize("fmt", ["arrow", "parquet"])
async def test_a_wrong_typed_column_is_named_row_by_row(models: Models, fmt: str) -> None:
    records = iris_rows(4).to_dict("records")
    for i, record in enumerate(records):
        record["petal_width"] = f"wide {i}" if i % 2 else None
    expected = await json_problems(models, "iris-rf", records)
    response = await models.table("iris-rf", pa.Table.from_pylist(records), fmt)
    assert response.status_code == 422, response.text
    assert response.json()["errors"] == expected
    assert locs(response) == [["instances", i, "petal_width"] for i in range(4)]
    assert expected[1]["msg"] == "expected a number, got 'wide 1'"


async def test_bad_numbers_and_types_in_a_mixed_model(models: Models) -> None:
    records = mixed_rows(4, seed=3)
    records[0]["age"] = None  # age had no missing values in training
    records[1]["income"] = float("inf")
    for i, record in enumerate(records):
        record["member"] = "yes"  # strings for a boolean column
        record["city"] = i + 1  # numbers for a string column
    table = pa.table(
        {
            "age": pa.array([r["age"] for r in records], pa.int64()),
            "income": pa.array([r["income"] for r in records], pa.float64()),
            "member": pa.array([r["member"] for r in records]),
            "city": pa.array([r["city"] for r in records]),
        }
    )
    response = await models.table("mixed-bag", table)
    assert response.status_code == 422, response.text
    problems = [(tuple(e["loc"]), e["msg"]) for e in response.json()["errors"]]
    missing = "column 'age' cannot be missing for this model (it had no missing values in training)"
    assert problems[:4] == [
        (("instances", 0, "age"), missing),
        (("instances", 0, "member"), "expected a boolean, got 'yes'"),
        (("instances", 0, "city"), "expected a string, got 1"),
        (("instances", 1, "income"), "expected a finite number, got inf"),
    ]
    assert len(problems) == 1 + 1 + 4 + 4
    # The same cells sent as JSON (Infinity as Python's json writes it) give the same.
    response = await models.api.client.post(
        "/v1/models/mixed-bag/versions/1/predict",
        content=json.dumps({"instances": records}),
        headers={"content-type": "application/json"},
    )
    assert [(tuple(e["loc"]), e["msg"]) for e in response.json()["errors"]] == problems


async def test_a_missing_feature_column_is_named_in_every_row(models: Models) -> None:
    rows = iris_rows(3)
    records = rows.drop(columns="sepal_width").to_dict("records")
    expected = await json_problems(models, "iris-rf", records)
    for fmt in ("arrow", "parquet"):
        table = pa.Table.from_pandas(rows.drop(columns="sepal_width"), preserve_index=False)
        response = await models.table("iris-rf", table, fmt)
        assert response.status_code == 422, response.text
        assert response.json()["errors"] == expected
        assert locs(response) == [["instances", i, "sepal_width"] for i in range(3)]
        assert response.json()["errors"][0]["msg"] == "missing column 'sepal_width'"


async def test_nan_is_not_a_missing_value_and_no_rows_is_refused(models: Models) -> None:
    rows = iris_rows(3)
    rows.loc[1, "sepal_length"] = np.nan
    # A NaN value is refused like JSON's NaN; pyarrow's from_pandas makes it a null instead,
    # a missing value (which this model, trained without any, refuses as JSON's null).
    nan = pa.table({c: rows[c].to_numpy() for c in IRIS_FEATURES})
    null = pa.Table.from_pandas(rows, preserve_index=False)
    for table, msg in [
        (nan, "expected a finite number, got nan"),
        (
            null,
            "column 'sepal_length' cannot be missing for this model (it had no missing "
            "values in training)",
        ),
    ]:
        response = await models.table("iris-rf", table)
        assert response.status_code == 422
        assert response.json()["errors"] == [{"loc": ["instances", 1, "sepal_length"], "msg": msg}]
    empty = pa.Table.from_pandas(rows.head(0), preserve_index=False)
    for fmt in ("arrow", "parquet"):
        response = await models.table("iris-rf", empty, fmt)
        assert response.status_code == 422 and locs(response) == [["instances"]]


@pytest.mark.parametrize(
    ("media", "content"),
    [
        (ARROW, b"not arrow at all"),
        (ARROW, b""),
        (ARROW, b"ARROW1\x00\x00garbage"),
        (PARQUET, b"PAR1 garbage PAR1"),
        ("application/x-parquet", arrow_stream(pa.table({"a": [1.0]}))),
    ],
    ids=["text", "empty", "arrow-file-magic", "parquet-magic", "arrow-as-parquet"],
)
async def test_unreadable_bytes_are_a_422_naming_the_body(
    models: Models, media: str, content: bytes
) -> None:
    response = await models.post("iris-rf", content, media)
    assert response.status_code == 422, response.text
    assert locs(response) == [["body"]]
    assert response.json()["errors"][0]["msg"].startswith("not a readable")


async def test_the_arrow_file_format_is_read_too(models: Models) -> None:
    table = pa.Table.from_pandas(iris_rows(6), preserve_index=False)
    sink = pa.BufferOutputStream()
    with ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    response = await models.post("iris-rf", sink.getvalue().to_pybytes(), ARROW)
    assert response.status_code == 200, response.text
    assert len(response.json()["predictions"]) == 6


async def test_unknown_media_types_are_a_415(models: Models) -> None:
    for media in ("text/csv", "application/octet-stream", "application/vnd.apache.avro"):
        response = await models.post("iris-rf", b"a,b\n1,2\n", media)
        assert response.status_code == 415, response.text
        assert ARROW in response.json()["errors"][0]["msg"]


# --- options in the query string --------------------------------------------------------


async def test_query_options_are_validated_and_named(models: Models) -> None:
    table = pa.Table.from_pandas(iris_rows(2), preserve_index=False)
    response = await models.table("iris-rf", table, query="?return_proba=maybe&voting=loud")
    assert response.status_code == 422
    assert sorted(locs(response)) == [["query", "return_proba"], ["query", "voting"]]
    # Options the model cannot honour: the library's own check, named as query parameters.
    response = await models.table("iris-rf", table, query="?return_std=true")
    assert response.status_code == 422
    assert locs(response) == [["query", "return_std"]]
    assert response.json()["errors"][0]["msg"] == "std applies to regression only"
    plain = await models.table("iris-rf", table)
    assert plain.status_code == 200 and "probabilities" not in plain.json()


async def test_a_json_body_takes_query_options_under_its_own(models: Models) -> None:
    """The document declares the options as query parameters of the operation, so a JSON
    body accepts them too; its own ``options`` win, option by option."""
    url = "/v1/models/iris-rf/versions/1/predict"
    rows = iris_rows(2).to_dict("records")
    both = await models.api.client.post(
        f"{url}?return_proba=true&return_votes=true",
        json={"instances": rows, "options": {"return_votes": False}},
    )
    assert both.status_code == 200, both.text
    assert len(both.json()["probabilities"]) == 2 and "votes" not in both.json()
    bad = await models.api.client.post(f"{url}?voting=loud", json={"instances": rows})
    assert bad.status_code == 422 and locs(bad) == [["query", "voting"]]
    plain = await models.api.client.post(url, json={"instances": rows})
    assert "probabilities" not in plain.json()


async def test_unknown_model_is_a_404_after_the_body_is_read(models: Models) -> None:
    table = arrow_stream(pa.Table.from_pandas(iris_rows(2), preserve_index=False))
    response = await models.api.client.post(
        "/v1/models/nope/versions/1/predict", content=table, headers={"content-type": ARROW}
    )
    assert response.status_code == 404
    garbage = await models.api.client.post(
        "/v1/models/nope/versions/1/predict", content=b"xx", headers={"content-type": ARROW}
    )
    assert garbage.status_code == 422  # as a JSON body: the body is read first


# --- limits -----------------------------------------------------------------------------


async def test_row_and_body_limits(settings_for: Callable[..., Settings]) -> None:
    async for _, api in started(settings_for(max_predict_rows=5, max_upload_bytes=10_000)):
        dataset = await api.iris()
        await api.train("small", forest(dataset, n_estimators=3))
        url = "/v1/models/small/versions/1/predict"
        six = pa.Table.from_pandas(iris_frame().head(6)[IRIS_FEATURES], preserve_index=False)
        for media, encode in ENCODERS.values():
            response = await api.client.post(
                url, content=encode(six), headers={"content-type": media}
            )
            assert response.status_code == 413, response.text
            assert locs(response) == [["instances"]]
            five = encode(six.slice(0, 5))
            ok = await api.client.post(url, content=five, headers={"content-type": media})
            assert ok.status_code == 200, ok.text
        # Two record batches of 4 rows: refused while reading, before the second is kept.
        batches = arrow_stream(pa.concat_tables([six.slice(0, 4), six.slice(0, 4)]), 4)
        response = await api.client.post(url, content=batches, headers={"content-type": ARROW})
        assert response.status_code == 413 and locs(response) == [["instances"]]
        # The body limit is the one every non-upload body has (1 MiB more than uploads).
        big = pa.table({c: np.zeros(50_000) for c in IRIS_FEATURES})
        response = await api.client.post(
            url, content=arrow_stream(big), headers={"content-type": ARROW}
        )
        assert response.status_code == 413 and response.json()["code"] == "too_large"
        assert "ENSEMBLE_MAX_UPLOAD_BYTES" in response.json()["errors"][0]["msg"]


async def test_the_openapi_document_declares_table_bodies_and_query_options(
    models: Models,
) -> None:
    document = (await models.api.client.get("/openapi.json")).json()
    operation = document["paths"]["/v1/models/{name}/versions/{ref}/predict"]["post"]
    content = operation["requestBody"]["content"]
    assert {"application/json", ARROW, PARQUET, "application/x-parquet"} <= set(content)
    assert content[ARROW]["schema"]["format"] == "binary"
    query = {p["name"] for p in operation["parameters"] if p["in"] == "query"}
    assert query == {
        "voting",
        "return_proba",
        "return_votes",
        "return_std",
        "explain",
        "explain_top",
    }


ONE_ROW_WRITERS: dict[TableFormat, tuple[str, Callable[[pa.Table], bytes]]] = {
    "arrow": (ARROW, arrow_stream),
    "parquet": (PARQUET, parquet_file),
}


@pytest.mark.parametrize("fmt", list(ONE_ROW_WRITERS))
async def test_one_row_tables_read_from_their_bytes_answer_as_json(
    models: Models, monkeypatch: pytest.MonkeyPatch, fmt: TableFormat
) -> None:
    """A one-row Arrow or Parquet body laid out as one read before is read without
    pyarrow (``app.arrow_streams.float_row``, ``app.parquet_files.float_row``: its values
    in its bytes): the same answers as the rows in JSON, and a row the fast way cannot
    take (NaN, an extra column) the same problems and warnings."""
    media, write = ONE_ROW_WRITERS[fmt]
    rows = iris_rows(12)
    expected = [
        await as_json(
            models, "iris-rf", [{str(k): v for k, v in record.items()}], return_proba=True
        )
        for record in rows.to_dict("records")
    ]
    bodies = [
        write(pa.table({c: rows[c].to_numpy()[i : i + 1] for c in IRIS_FEATURES}))
        for i in range(len(rows))
    ]
    first = await models.post("iris-rf", bodies[0], media, "?return_proba=true")
    assert first.status_code == 200 and first.json() == expected[0]

    read: list[tuple[str, bool]] = []

    def spy(name: str, reader: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
        def spied(content: bytes) -> Any:
            rows = reader(content)
            read.append((name, rows is not None))
            return rows

        return spied

    readers = services_predictions._LAID_OUT[fmt]
    with monkeypatch.context() as patched:
        spied = services_predictions._LaidOut(spy("row", readers.row), spy("rows", readers.rows))
        patched.setitem(services_predictions._LAID_OUT, fmt, spied)
        for body, answer in zip(bodies, expected, strict=True):
            response = await models.post("iris-rf", body, media, "?return_proba=true")
            assert response.status_code == 200, response.text
            assert response.json() == answer
    # Read from their bytes, a lone row by its values (a request the registry sends to a
    # worker thread reads the table with pyarrow, as always).
    assert len(read) == len(bodies) and all(found for _, found in read)
    assert {name for name, _ in read} == {"row"}
    nan = rows.iloc[:1].copy()
    nan.loc[0, "petal_width"] = np.nan
    table = pa.table({c: nan[c].to_numpy() for c in IRIS_FEATURES})
    response = await models.post("iris-rf", write(table), media)
    assert response.status_code == 422
    assert response.json()["errors"] == [
        {"loc": ["instances", 0, "petal_width"], "msg": "expected a finite number, got nan"}
    ]
    extra = pa.table({**{c: rows[c].to_numpy()[:1] for c in IRIS_FEATURES}, "note": [1.0]})
    other, write_other = ONE_ROW_WRITERS["parquet" if fmt == "arrow" else "arrow"]
    for _ in range(2):  # learnt, then read from its bytes
        response = await models.post("iris-rf", write(extra), media, "?return_proba=true")
        assert response.status_code == 200, response.text
        warnings = response.json()["warnings"]
        again = await models.post("iris-rf", write_other(extra), other, "?return_proba=true")
        assert warnings == again.json()["warnings"] != []


async def test_a_one_row_parquet_file_over_8_kib_is_answered_from_its_layout(
    models: Models, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A one-row Parquet file as pandas writes it is 19 kB for 30 columns, over the 8 KiB
    that pyarrow may read on the event loop: the first one is read by pyarrow in a
    worker thread, later ones of its layout on the fast path without pyarrow, with the
    answers (and warnings for the extra columns) of pyarrow's way."""
    rows = iris_rows(6)
    wide = [
        rows.iloc[[i]].reset_index(drop=True).assign(**{f"x{k}": float(k + i) for k in range(40)})
        for i in range(len(rows))
    ]
    bodies = []
    for frame in wide:
        out = io.BytesIO()
        frame.to_parquet(out, index=False)
        bodies.append(out.getvalue())
    assert all(8 * 1024 < len(body) <= 64 * 1024 for body in bodies)
    expected = [
        (await models.table("iris-rf", pa.Table.from_pandas(f), "arrow", "?return_proba=true"))
        for f in wide
    ]
    assert all(answer.status_code == 200 for answer in expected)
    decoded: list[int] = []
    read = pq.ParquetFile.read

    def spied(self: pq.ParquetFile, *args: Any, **kwargs: Any) -> pa.Table:
        decoded.append(self.metadata.num_columns)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spied)
    fast = models.app.middleware_stack
    while not isinstance(fast, FastPredictMiddleware):
        fast = fast.app
    answered = fast.answered
    for body, answer in zip(bodies, expected, strict=True):
        response = await models.post("iris-rf", body, PARQUET, "?return_proba=true")
        assert response.status_code == 200, response.text
        assert response.json() == answer.json()
    assert decoded == [44]  # only the first, whose layout is then learnt
    assert fast.answered - answered == len(bodies)


@pytest.mark.parametrize(
    ("rows", "threaded"), [(1, False), (10_000, False), (20_000, True)], ids=str
)
async def test_parquet_bodies_use_pyarrow_s_threads_only_when_large(
    rows: int, threaded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Parquet body of fewer than 500,000 values (30 columns: up to ~16,000 rows) is
    decoded on the calling thread, where pyarrow's pool cost more than it saved on this
    machine (one row: 755 us against 492); a larger one by the pool. The same table."""
    from app.bodies import read_table_body

    table = pa.table({f"c{j}": np.arange(rows, dtype=np.float64) + j for j in range(30)})
    body = parquet_file(table)
    asked: list[object] = []
    read = pq.ParquetFile.read

    def spied(self: pq.ParquetFile, *args: Any, **kwargs: Any) -> pa.Table:
        asked.append(kwargs.get("use_threads", True))
        return read(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spied)
    assert read_table_body(body, "parquet", None).equals(table)
    assert asked == [threaded]
