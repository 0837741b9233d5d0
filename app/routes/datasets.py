"""Datasets: upload (multipart or JSON), list, read, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from fastapi.responses import JSONResponse

from app.bodies import OrjsonRoute
from app.deps import ADMIN, READ, TRAIN, RegistryDep, SettingsDep
from app.schemas.common import problem_responses
from app.schemas.datasets import DatasetOut, DatasetUploadOut, upload_openapi
from app.services import datasets as service
from app.threads import in_thread

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], route_class=OrjsonRoute)

DatasetId = Annotated[
    str,
    Path(
        description="Dataset id, or the name given at upload when it is unique (a 422 "
        "lists the ids of a name several datasets share).",
        examples=["ds_7f3a2b1c0d9e8f7a6b5c4d3e"],
    ),
]
_LOC = ("path", "dataset_id")


@router.post(
    "",
    status_code=201,
    response_model=DatasetUploadOut,
    summary="Upload a dataset",
    description="Store a table for training. Either `multipart/form-data` with a `file` part "
    "(CSV with a header row, Parquet, or JSON Lines, chosen by the part's content type or "
    "file name) and an optional `name` field, or `application/json` with `columns` and "
    "`rows`, or with `records`. The table is canonicalised (each column int64, float64, "
    "bool, string or datetime) and stored immutably. Bad input (empty file, no header, "
    "ragged rows, duplicate column names, undecodable bytes) is a 422 naming the row or "
    "column; an unsupported type is a 415; over the size limit a 413. The same name and "
    "content uploaded again is stored again, and `duplicate_of` names the first upload.",
    dependencies=[TRAIN],
    openapi_extra=upload_openapi(),
    responses={
        201: {
            "headers": {
                "Location": {"description": "/v1/datasets/{id}", "schema": {"type": "string"}}
            }
        },
        **problem_responses(400, 413, 415, 422),
    },
)
async def upload_dataset(
    request: Request, registry: RegistryDep, settings: SettingsDep
) -> JSONResponse:
    record = await service.upload(request, registry, settings)
    duplicate = await in_thread(service.duplicate_of, registry, record)
    body = DatasetUploadOut.uploaded(record, duplicate).model_dump(mode="json")
    return JSONResponse(body, status_code=201, headers={"Location": f"/v1/datasets/{record.id}"})


@router.get(
    "",
    response_model=list[DatasetOut],
    summary="List datasets",
    description="Every stored dataset, newest first.",
    dependencies=[READ],
    responses=problem_responses(),
)
async def list_datasets(registry: RegistryDep) -> list[DatasetOut]:
    return [DatasetOut.of(r) for r in await in_thread(registry.list_datasets)]


@router.get(
    "/{dataset_id}",
    response_model=DatasetOut,
    summary="Get a dataset",
    description="A dataset's summary: size, sha256 and every column with its type, "
    "missing and distinct counts.",
    dependencies=[READ],
    responses=problem_responses(404, 422),
)
async def get_dataset(dataset_id: DatasetId, registry: RegistryDep) -> DatasetOut:
    return DatasetOut.of(await in_thread(service.resolve, registry, dataset_id, _LOC))


@router.delete(
    "/{dataset_id}",
    status_code=204,
    summary="Delete a dataset",
    description="Forget a dataset and its stored table. Model versions trained on it keep "
    "working (their artifacts stand alone, and they record the table's sha256). By name "
    "only when exactly one dataset has it.",
    dependencies=[ADMIN],
    responses=problem_responses(404, 422),
)
async def delete_dataset(dataset_id: DatasetId, registry: RegistryDep) -> Response:
    record = await in_thread(service.resolve, registry, dataset_id, _LOC, one_table=True)
    await in_thread(registry.delete_dataset, record.id)
    return Response(status_code=204)
