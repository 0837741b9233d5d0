"""Dataset uploads: multipart files or JSON bodies -> canonical tables in the registry."""

from __future__ import annotations

from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.requests import Request

from app.bodies import parse_json
from app.problems import (
    InvalidRequestError,
    UnsupportedMediaTypeError,
    count_text,
    validation_problems,
)
from app.schemas.datasets import DatasetRecordsIn, DatasetRowsIn
from app.settings import Settings
from app.threads import in_thread
from ensembles import (
    Problem,
    Table,
    TooLargeError,
    read_table,
    table_from_records,
    table_from_rows,
    table_to_parquet,
)
from ensembles.registry import DatasetRecord, Registry

_ROWS_KEYS = frozenset({"columns", "rows"})


async def upload(request: Request, registry: Registry, settings: Settings) -> DatasetRecord:
    """Parse the body by its media type, then store the table (parsing runs in a thread)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "multipart/form-data":
        name, content, filename, content_type = await _read_form(request, settings)
        table = await in_thread(
            read_table,
            content,
            filename=filename,
            content_type=content_type,
            limits=settings.table_limits,
        )
    elif media == "application/json" or media.endswith("+json"):
        body = await request.body()
        _check_size(len(body), settings)
        name, table = await in_thread(_json_table, body, settings)
    else:
        raise UnsupportedMediaTypeError(
            f"cannot take a {media or 'untyped'} body",
            [Problem(("body",), "send multipart/form-data with a file part, or application/json")],
        )
    return await in_thread(_store, registry, name, table)


def _check_size(size: int, settings: Settings) -> None:
    if size > settings.max_upload_bytes:
        problem = Problem(("file",), f"{size} bytes; the limit is {settings.max_upload_bytes}")
        raise TooLargeError("the upload is too large", [problem])


async def _read_form(
    request: Request, settings: Settings
) -> tuple[str | None, bytes, str | None, str | None]:
    async with request.form(max_files=2, max_fields=10) as form:
        problems: list[Problem] = []
        upload_file = form.get("file")
        name = form.get("name")
        unknown = sorted(set(form.keys()) - {"file", "name"})
        problems += [Problem((key,), "unknown form field; send file and name") for key in unknown]
        if not isinstance(upload_file, UploadFile):
            problems.append(Problem(("file",), "a file part named 'file' is required"))
        if name is not None and not isinstance(name, str):
            problems.append(Problem(("name",), "the name is a text field, not a file"))
        if isinstance(name, str) and len(name) > 256:
            problems.append(Problem(("name",), "at most 256 characters"))
        if problems or not isinstance(upload_file, UploadFile):
            raise InvalidRequestError(count_text(len(problems)), problems)
        if upload_file.size is not None:
            _check_size(upload_file.size, settings)
        content = await upload_file.read()
        _check_size(len(content), settings)
        text_name = name if isinstance(name, str) and name else None
        return text_name, content, upload_file.filename, upload_file.content_type


def _json_table(body: bytes, settings: Settings) -> tuple[str | None, Table]:
    """``{"name", "columns", "rows"}`` or ``{"name", "records"}``; every problem located."""
    upload = _json_upload(parse_json(body))
    limits = settings.table_limits
    if isinstance(upload, DatasetRowsIn):
        return upload.name, table_from_rows(upload.columns, upload.rows, limits)
    return upload.name, table_from_records(upload.records, limits)


def _json_upload(data: object) -> DatasetRowsIn | DatasetRecordsIn:
    """The body parsed by the documented model of its shape: records when it has them
    and nothing of the other shape, else rows (whose model names the stray ``records``)."""
    if not isinstance(data, dict):
        raise InvalidRequestError(
            "the body is not a JSON object", [Problem(("body",), "expected a JSON object")]
        )
    shape: type[DatasetRowsIn | DatasetRecordsIn] = DatasetRowsIn
    if "records" in data and not _ROWS_KEYS & data.keys():
        shape = DatasetRecordsIn
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
    if not (_ROWS_KEYS | {"records"}) & data.keys():  # neither shape: say so once
        problems = [p for p in problems if p.loc[0] not in _ROWS_KEYS]
        problems.append(Problem(("rows",), 'send either "columns" and "rows", or "records"'))
    raise InvalidRequestError(count_text(len(problems)), problems)


def _store(registry: Registry, name: str | None, table: Table) -> DatasetRecord:
    return registry.create_dataset(
        name=name,
        parquet=table_to_parquet(table),
        n_rows=table.n_rows,
        columns=[c.as_dict() for c in table.columns],
    )
