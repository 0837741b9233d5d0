"""Every call of the client, written once as a generator of steps (see
``ensemble_client.calls``): the sync and async clients run the same operations.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from ensemble_client import tables
from ensemble_client.calls import Call, Operation, Pause, segment
from ensemble_client.errors import (
    ArtifactIntegrityError,
    InvalidArgumentError,
    NotFoundError,
    Problem,
    WaitTimeoutError,
    job_error,
)
from ensemble_client.models import (
    Alias,
    Catalog,
    Dataset,
    Health,
    Job,
    Model,
    Prediction,
    ShadowStats,
    Version,
)
from ensemble_client.progress import JobProgress

_DATASETS = TypeAdapter(list[Dataset])
_JOBS = TypeAdapter(list[Job])
_MODELS = TypeAdapter(list[Model])
_VERSIONS = TypeAdapter(list[Version])


def _get(path: str, params: Mapping[str, str] | None = None, ok: tuple[int, ...] = (200,)) -> Call:
    return Call("GET", path, params=params, idempotent=True, ok=ok)


def _delete(path: str) -> Call:
    return Call("DELETE", path, idempotent=True, ok=(204,))


def _model(name: str) -> str:
    return f"/v1/models/{segment(name, 'model name')}"


def _version(name: str, ref: str | int) -> str:
    return f"{_model(name)}/versions/{segment(ref, 'version reference')}"


# --- service ---------------------------------------------------------------------------


def health() -> Operation[Health]:
    response = yield _get("/healthz")
    return Health.model_validate_json(response.content)


def ready() -> Operation[Health]:
    response = yield _get("/readyz")
    return Health.model_validate_json(response.content)


def kinds() -> Operation[Catalog]:
    response = yield _get("/v1/kinds")
    return Catalog.model_validate_json(response.content)


# --- datasets --------------------------------------------------------------------------


def upload_dataset(source: Any, name: str | None) -> Operation[Dataset]:
    if tables.is_frame(source):
        part = tables.upload_frame(source)
    elif tables.is_path(source):
        part = tables.upload_file(source)
        name = name if name is not None else Path(source).stem
    elif isinstance(source, list):  # records, without pandas
        body = {"name": name, "records": source}
        response = yield Call("POST", "/v1/datasets", json=body, ok=(201,))
        return Dataset.model_validate_json(response.content)
    else:
        raise TypeError(
            "upload a pandas DataFrame, a path to a CSV, Parquet or JSON Lines file, or a "
            f"list of records; got {type(source).__name__}"
        )
    data = {"name": name} if name is not None else None
    response = yield Call("POST", "/v1/datasets", files={"file": part}, data=data, ok=(201,))
    return Dataset.model_validate_json(response.content)


def list_datasets() -> Operation[list[Dataset]]:
    response = yield _get("/v1/datasets")
    return _DATASETS.validate_json(response.content)


def get_dataset(dataset_id: str) -> Operation[Dataset]:
    response = yield _get(f"/v1/datasets/{segment(dataset_id, 'dataset id')}")
    return Dataset.model_validate_json(response.content)


def resolve_dataset(id_or_name: str) -> Operation[Dataset]:
    """A dataset by id, else the newest dataset of that name (a free text: ``iris/v2``
    cannot be an id, so it is looked for among the names alone)."""
    try:
        path = f"/v1/datasets/{segment(id_or_name, 'dataset id')}"
    except InvalidArgumentError:
        path = None
    if path is not None:
        response = yield _get(path, ok=(200, 404, 422))
        if response.status_code == 200:
            return Dataset.model_validate_json(response.content)
    listing = yield _get("/v1/datasets")
    named = [d for d in _DATASETS.validate_json(listing.content) if d.name == id_or_name]
    if named:  # the list is newest first
        return named[0]
    detail = f"no dataset has the id or the name {id_or_name!r}"
    raise NotFoundError(Problem(title="Not found", status=404, code="not_found", detail=detail))


def delete_dataset(dataset_id: str) -> Operation[None]:
    yield _delete(f"/v1/datasets/{segment(dataset_id, 'dataset id')}")


# --- jobs ------------------------------------------------------------------------------


def list_jobs(status: str | None, model: str | None, limit: int | None) -> Operation[list[Job]]:
    params = {"status": status, "model": model, "limit": None if limit is None else str(limit)}
    response = yield _get("/v1/jobs", {k: v for k, v in params.items() if v is not None})
    return _JOBS.validate_json(response.content)


def get_job(job_id: str) -> Operation[Job]:
    response = yield _get(f"/v1/jobs/{segment(job_id, 'job id')}")
    return Job.model_validate_json(response.content)


def cancel_job(job_id: str) -> Operation[Job]:
    response = yield Call("POST", f"/v1/jobs/{segment(job_id, 'job id')}/cancel", ok=(202,))
    return Job.model_validate_json(response.content)


def wait_job(
    job: Job | str, progress: JobProgress, timeout: float | None, interval: float
) -> Operation[Job]:
    """Poll a job until it ends (any way), reporting each state to ``progress``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        current = job if isinstance(job, Job) else (yield from get_job(job))
        progress.update(current)
        while not current.finished:
            if deadline is not None and time.monotonic() >= deadline:
                raise WaitTimeoutError(current.id, timeout or 0.0)
            yield Pause(interval)
            current = yield from get_job(current.id)
            progress.update(current)
        return current
    finally:
        progress.close()


# --- models, versions, aliases -----------------------------------------------------------


def ensemble_spec(ensemble: Mapping[str, Any] | str, params: Mapping[str, Any] | None) -> Any:
    """``"random_forest"`` (with ``params``) or a full spec mapping (``params`` merged into
    its own)."""
    if isinstance(ensemble, str):
        return {"kind": ensemble, "params": dict(params or {})}
    spec = dict(ensemble)
    if params:
        spec["params"] = {**dict(spec.get("params") or {}), **params}
    return spec


def training_body(dataset_id: str, target: str, spec: Any, extra: Mapping[str, Any]) -> Any:
    body = {"dataset_id": dataset_id, "target": target, "ensemble": spec}
    body.update({k: v for k, v in extra.items() if v is not None})
    return body


def dataset_id_of(dataset: Any) -> Operation[str]:
    """The id to train on: a Dataset, an id or name, or a table to upload first."""
    if isinstance(dataset, Dataset):
        return dataset.id
    if isinstance(dataset, str):
        return (yield from resolve_dataset(dataset)).id
    if tables.is_frame(dataset) or isinstance(dataset, os.PathLike):
        return (yield from upload_dataset(dataset, None)).id
    raise TypeError(
        "dataset must be a Dataset, an id or name, a DataFrame or a pathlib.Path; "
        f"got {type(dataset).__name__}"
    )


def train(
    name: str,
    dataset: Any,
    target: str,
    spec: Any,
    extra: Mapping[str, Any],
    *,
    wait: bool,
    progress: JobProgress,
    timeout: float | None,
    interval: float,
) -> Operation[Version | Job]:
    """Submit a training job; with ``wait``, follow it and return the version it made."""
    dataset_id = yield from dataset_id_of(dataset)
    body = training_body(dataset_id, target, spec, extra)
    response = yield Call("POST", f"{_model(name)}/versions", json=body, ok=(202,))
    job = Job.model_validate_json(response.content)
    if not wait:
        progress.close()
        return job
    job = yield from wait_job(job, progress, timeout, interval)
    if job.status != "succeeded":
        raise job_error(job)
    return (yield from get_version(job.model, job.version))


def list_models() -> Operation[list[Model]]:
    response = yield _get("/v1/models")
    return _MODELS.validate_json(response.content)


def get_model(name: str) -> Operation[Model]:
    response = yield _get(_model(name))
    return Model.model_validate_json(response.content)


def delete_model(name: str) -> Operation[None]:
    yield _delete(_model(name))


def list_versions(name: str) -> Operation[list[Version]]:
    response = yield _get(f"{_model(name)}/versions")
    return _VERSIONS.validate_json(response.content)


def get_version(name: str, ref: str | int) -> Operation[Version]:
    response = yield _get(_version(name, ref))
    return Version.model_validate_json(response.content)


def delete_version(name: str, version: int) -> Operation[None]:
    yield _delete(_version(name, version))


def set_alias(
    name: str,
    alias: str,
    version: int | None = None,
    versions: Mapping[int, float] | Mapping[str, float] | None = None,
    shadow: int | None = None,
) -> Operation[Alias]:
    path = f"{_model(name)}/aliases/{segment(alias, 'alias')}"
    body: dict[str, Any] = {}
    if version is not None:
        body["version"] = version
    if versions is not None:
        body["versions"] = {str(number): weight for number, weight in versions.items()}
    if shadow is not None:
        body["shadow"] = shadow
    response = yield Call("PUT", path, json=body, idempotent=True)
    return Alias.model_validate_json(response.content)


def get_alias(name: str, alias: str) -> Operation[Alias]:
    response = yield _get(f"{_model(name)}/aliases/{segment(alias, 'alias')}")
    return Alias.model_validate_json(response.content)


def shadow_stats(name: str, alias: str) -> Operation[ShadowStats]:
    response = yield _get(f"{_model(name)}/aliases/{segment(alias, 'alias')}/shadow")
    return ShadowStats.model_validate_json(response.content)


def remove_alias(name: str, alias: str) -> Operation[None]:
    yield _delete(f"{_model(name)}/aliases/{segment(alias, 'alias')}")


def download_artifact(
    name: str, ref: str | int, to: str | os.PathLike[str] | None
) -> Operation[bytes]:
    """The artifact's bytes, checked against the sha256 the service sends with them."""
    response = yield _get(f"{_version(name, ref)}/artifact")
    data: bytes = response.content
    announced = response.headers.get("x-artifact-sha256")
    actual = hashlib.sha256(data).hexdigest()
    if not announced:
        raise ArtifactIntegrityError("the service sent no X-Artifact-SHA256 with the artifact")
    if actual != announced.lower():
        raise ArtifactIntegrityError(
            f"artifact of {name}@{ref}: sha256 {actual} differs from the announced {announced}"
        )
    if to is not None:
        target = Path(to)
        partial = target.with_name(f".{target.name}.partial")
        partial.write_bytes(data)
        partial.replace(target)
    return data


# --- predictions -----------------------------------------------------------------------


def prediction_options(
    proba: bool,
    votes: bool,
    std: bool,
    voting: str | None,
    explain: bool = False,
    top: int | None = None,
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if explain:
        options["explain"] = True
    if explain and top is not None:
        options["explain_top"] = top
    if proba:
        options["return_proba"] = True
    if votes:
        options["return_votes"] = True
    if std:
        options["return_std"] = True
    if voting is not None:
        options["voting"] = voting
    return options


def predict_call(name: str, ref: str | int, rows: Any, options: Mapping[str, Any],
                 arrow_min_rows: int) -> tuple[Call, Any]:  # fmt: skip
    """The predict request for ``rows``, and the index the answer's rows take: big
    DataFrames go as an Arrow IPC stream (options in the query), the rest as JSON."""
    path = f"{_version(name, ref)}/predict"
    if tables.is_path(rows):
        rows = tables.read_table(rows)
    if tables.is_frame(rows):
        if len(rows) >= arrow_min_rows and tables.has("pyarrow"):
            query = {
                k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()
            }
            headers = {"Content-Type": tables.ARROW_STREAM}
            content = tables.arrow_stream(rows)
            call = Call(
                "POST", path, params=query, content=content, headers=headers, idempotent=True
            )
            return call, rows.index
        body = {"instances": tables.frame_rows(rows), "options": dict(options)}
        return Call("POST", path, json=body, idempotent=True), rows.index
    body = {"instances": tables.instances(rows), "options": dict(options)}
    return Call("POST", path, json=body, idempotent=True), None


def predict(
    name: str, ref: str | int, rows: Any, options: Mapping[str, Any], arrow_min_rows: int
) -> Operation[tuple[Prediction, Any]]:
    """Predict rows; a prediction has no side effect, so it is retried like a read."""
    call, index = predict_call(name, ref, rows, options, arrow_min_rows)
    response = yield call
    return Prediction.model_validate_json(response.content), index
