"""Datasets: uploads in (multipart file or JSON body), summaries out."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, WithJsonSchema

from ensembles.registry import DatasetRecord

_FILE_TYPES = "text/csv, application/vnd.apache.parquet, application/x-ndjson"
Scalar = str | int | float | bool | None


# Rows and records are lists whose items ensembles.data checks (every bad row or cell
# named by row and column, after the table's own limits), documented as what they hold:
# parsed cell by cell here, a bad value would be one problem per member of ``Scalar``, for
# every bad cell of a table that may have millions.
_Rows = Annotated[list[Any], WithJsonSchema(TypeAdapter(list[list[Scalar]]).json_schema())]
_Records = Annotated[list[Any], WithJsonSchema(TypeAdapter(list[dict[str, Scalar]]).json_schema())]

_CREATED = "2026-11-21T12:00:00Z"
ROWS_EXAMPLE: dict[str, Any] = {
    "name": "tiny",
    "columns": ["a", "b", "y"],
    "rows": [[1.0, 2.0, "x"], [1.5, None, "z"], [0.5, 1.0, "x"]],
}
RECORDS_EXAMPLE: dict[str, Any] = {
    "name": "tiny",
    "records": [{"a": 1.0, "y": "x"}, {"a": 2.5, "y": "z"}],
}
_SHA = "3b4c1f0e9d8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c"


class ColumnOut(BaseModel):
    """One column of a stored table."""

    name: str = Field(description="Column name from the header (or JSON keys).")
    dtype: Literal["int64", "float64", "bool", "string", "datetime"] = Field(
        description="The column's canonical type."
    )
    n_missing: int = Field(description="Rows without a value in this column.")
    n_unique: int = Field(description="Distinct non-missing values.")


class DatasetOut(BaseModel):
    """A stored table: immutable, identified by ``id``, its bytes by ``sha256``."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "ds_7f3a2b1c0d9e8f7a6b5c4d3e",
                    "name": "iris",
                    "n_rows": 150,
                    "n_columns": 5,
                    "sha256": _SHA,
                    "size_bytes": 3211,
                    "created_at": _CREATED,
                    "columns": [
                        {
                            "name": "sepal_length",
                            "dtype": "float64",
                            "n_missing": 0,
                            "n_unique": 35,
                        },
                        {"name": "species", "dtype": "string", "n_missing": 0, "n_unique": 3},
                    ],
                }
            ]
        }
    )

    id: str = Field(description="Dataset id, chosen by the service.")
    name: str | None = Field(description="The name given at upload, if any.")
    n_rows: int = Field(description="Number of rows.")
    n_columns: int = Field(description="Number of columns.")
    sha256: str = Field(description="sha256 (hex) of the stored canonical Parquet table.")
    size_bytes: int = Field(description="Size of the stored canonical table in bytes.")
    created_at: datetime = Field(description="When it was uploaded (RFC 3339, UTC).")
    columns: list[ColumnOut] = Field(description="Every column, in table order.")

    @classmethod
    def of(cls, record: DatasetRecord) -> DatasetOut:
        return cls(
            id=record.id,
            name=record.name,
            n_rows=record.n_rows,
            n_columns=record.n_columns,
            sha256=record.sha256,
            size_bytes=record.size_bytes,
            created_at=record.created_at,
            columns=[ColumnOut.model_validate(c) for c in record.columns],
        )


class DatasetUploadOut(DatasetOut):
    """The stored table, and whether the same table was already stored under its name."""

    duplicate_of: str | None = Field(
        default=None,
        description="The id of a dataset uploaded before under the same name with the same "
        "content (same sha256), or null. The upload is stored all the same; the name still "
        "selects this table for training, as every dataset of that name holds the same rows.",
    )

    @classmethod
    def uploaded(cls, record: DatasetRecord, duplicate_of: str | None) -> DatasetUploadOut:
        return cls(**DatasetOut.of(record).model_dump(), duplicate_of=duplicate_of)


# DatasetRowsIn and DatasetRecordsIn parse the JSON upload (app.services.datasets); the
# rows' contents are the table's to check (ensembles.data). Docstrings are the OpenAPI text.


class DatasetRowsIn(BaseModel):
    """A table as column names and rows of values (``null`` is missing)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [ROWS_EXAMPLE]},
    )

    name: str | None = Field(default=None, max_length=256, description="Optional name.")
    columns: list[str] = Field(description="Column names, unique.")
    rows: _Rows = Field(description="Rows, one value per column.")


class DatasetRecordsIn(BaseModel):
    """A table as records (objects); columns are the union of keys, absent keys missing."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [RECORDS_EXAMPLE]},
    )

    name: str | None = Field(default=None, max_length=256, description="Optional name.")
    records: _Records = Field(description="One object per row.")


class DatasetUploadForm(BaseModel):
    """``multipart/form-data``: the file and an optional name."""

    file: bytes = Field(
        description="CSV with a header row, Parquet, or JSON Lines; the format comes from "
        "the part's content type or its file name.",
        json_schema_extra={"format": "binary"},
    )
    name: str | None = Field(default=None, max_length=256, description="Optional name.")


def upload_openapi() -> dict[str, Any]:
    """The documented request body of POST /v1/datasets (parsed by hand: two media types)."""
    csv_example = (
        "sepal_length,sepal_width,petal_length,petal_width,species\n5.1,3.5,1.4,0.2,setosa\n"
    )
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {"$ref": "#/components/schemas/DatasetUploadForm"},
                    "encoding": {"file": {"contentType": _FILE_TYPES}},
                    "example": {"name": "iris", "file": csv_example},
                },
                "application/json": {
                    "schema": {
                        "oneOf": [
                            {"$ref": "#/components/schemas/DatasetRowsIn"},
                            {"$ref": "#/components/schemas/DatasetRecordsIn"},
                        ]
                    },
                    "examples": {
                        "rows": {
                            "summary": "columns and rows",
                            "value": ROWS_EXAMPLE,
                        },
                        "records": {
                            "summary": "records",
                            "value": RECORDS_EXAMPLE,
                        },
                    },
                },
            },
        }
    }
