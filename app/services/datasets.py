"""Dataset uploads: multipart files or JSON bodies -> canonical tables in the registry;
and :func:`resolve`, the one place a dataset id *or name* becomes a dataset."""

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
from ensembles.errors import Location, NotFoundError
from ensembles.registry import DatasetRecord, DatasetRegistry

_ROWS_KEYS = frozenset({"columns", "rows"})


def resolve(
    registry: DatasetRegistry, reference: str, loc: Location, *, one_table: bool = False
) -> DatasetRecord:
    """The dataset whose id, else whose name, is ``reference``.

    A name selects a dataset when it is unique. Uploads of the same name and the same
    content (sha256) are one table, so for reading (``one_table=False``) the newest of them
    is as good as any; a name that covers different tables is a 422 listing their ids, as
    is any name of several datasets when ``one_table`` (deleting must not guess)."""
    try:
        return registry.get_dataset(reference)
    except NotFoundError:
        named = registry.datasets_named(reference)
    if not named:
        raise NotFoundError(f"no dataset {reference!r} (neither a dataset id nor a name)")
    if len(named) == 1 or (not one_table and len({r.sha256 for r in named}) == 1):
        return named[0]
    ids = ", ".join(r.id for r in named)
    same = " (the same table)" if len({r.sha256 for r in named}) == 1 else ""
    msg = f"{len(named)} datasets are named {reference!r}{same}: {ids}; give one of their ids"
    raise InvalidRequestError("ambiguous dataset name", [Problem(loc, msg)])


def duplicate_of(registry: DatasetRegistry, record: DatasetRecord) -> str | None:
    """The oldest other dataset of ``record``'s name with the same content, if any."""
    if record.name is None:
        return None
    same = [
        r
        for r in registry.datasets_named(record.name)
        if r.sha256 == record.sha256 and r.id != record.id
    ]
    return same[-1].id if same else None


async def upload(request: Request, registry: DatasetRegistry, settings: Settings) -> DatasetRecord:
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


def _store(registry: DatasetRegistry, name: str | None, table: Table) -> DatasetRecord:
    return registry.create_dataset(
        name=name,
        parquet=table_to_parquet(table),
        n_rows=table.n_rows,
        columns=[c.as_dict() for c in table.columns],
    )
