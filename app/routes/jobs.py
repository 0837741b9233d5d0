"""Training: submit a version (a job), follow it, cancel it."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from app.bodies import OrjsonRoute, read_json
from app.deps import READ, TRAIN, RegistryDep, RunnerDep, SettingsDep
from app.problems import job_error_body, problem_body, problem_response
from app.routes import ModelName
from app.schemas.common import problem_responses
from app.schemas.models import VersionOut
from app.schemas.training import FOREST_EXAMPLE, TRAINING_EXAMPLE, JobOut, JobStatus
from app.services.training import prepare_job
from app.services.views import job_out, version_out
from app.threads import in_thread
from ensembles.registry import JobRecord

router = APIRouter(tags=["jobs"], route_class=OrjsonRoute)

JobId = Annotated[str, Path(description="Job id.", examples=["job_4e1f0a9b8c7d6e5f4a3b2c1d"])]

_TRAIN_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/TrainingRequest"},
                "examples": {
                    "voting": {"summary": "soft voting of three", "value": TRAINING_EXAMPLE},
                    "forest": {"summary": "a random forest", "value": FOREST_EXAMPLE},
                },
            }
        },
    }
}
_LOCATION = {"Location": {"description": "Where to follow it.", "schema": {"type": "string"}}}


@router.post(
    "/v1/models/{name}/versions",
    status_code=202,
    response_model=JobOut,
    summary="Train a new version",
    description="Check the whole request (model name, dataset, target and features, task, "
    "ensemble spec against the catalog and the resource limits) and report every problem "
    "at once (422, each with its path in the body). Then reserve the next version number "
    "and queue a training job: 202 with the job and `Location: /v1/jobs/{id}`. The model is "
    "created on first use. With `?wait=true` the call blocks until the job ends (at most "
    "ENSEMBLE_WAIT_TIMEOUT_S seconds): 201 with the version, or the failed job's problem, "
    "or 202 with the job if it is still running then. A full queue answers 429 (the "
    "queue and the limit on running jobs are the whole service's, whichever server "
    "process answers).",
    dependencies=[TRAIN],
    openapi_extra=_TRAIN_BODY,
    responses={
        201: {
            "model": VersionOut,
            "description": "With wait=true: the trained version.",
            "headers": _LOCATION,
        },
        202: {"description": "The queued job.", "headers": _LOCATION},
        **problem_responses(409, 413, 415, 422, 429),
    },
)
async def train_version(
    name: ModelName,
    request: Request,
    registry: RegistryDep,
    runner: RunnerDep,
    settings: SettingsDep,
    wait: Annotated[bool, Query(description="Block until the job ends.")] = False,
) -> Response:
    raw = await read_json(request)
    document = await prepare_job(registry, settings, name, raw)
    job = await runner.submit(name, document)
    if wait:
        job = await runner.wait(job.id, settings.wait_timeout_s)
        if job.status == "succeeded":
            version = await in_thread(registry.get_version, name, job.version)
            return JSONResponse(
                version_out(version).model_dump(mode="json"),
                status_code=201,
                headers={"Location": f"/v1/models/{name}/versions/{job.version}"},
            )
        if job.status in ("failed", "cancelled"):
            return _job_problem(job)
    return _job_response(job, 202)


def _job_problem(job: JobRecord) -> Response:
    body = job_error_body(job.error)
    if body is None:
        body = problem_body("cancelled", f"job {job.id} was cancelled")
    body["instance"] = f"/v1/jobs/{job.id}"
    return problem_response(body, {"Location": f"/v1/jobs/{job.id}"})


def _job_response(job: JobRecord, status: int) -> JSONResponse:
    return JSONResponse(
        job_out(job).model_dump(mode="json"),
        status_code=status,
        headers={"Location": f"/v1/jobs/{job.id}"},
    )


@router.get(
    "/v1/jobs",
    response_model=list[JobOut],
    summary="List jobs",
    description="Training jobs, newest first; filter by status and model.",
    dependencies=[READ],
    responses=problem_responses(422),
)
async def list_jobs(
    registry: RegistryDep,
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status.")] = None,
    model: Annotated[
        str | None, Query(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$", description="Model name.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
) -> list[JobOut]:
    jobs = await in_thread(registry.list_jobs, status, model, limit)
    return [job_out(j) for j in jobs]


@router.get(
    "/v1/jobs/{job_id}",
    response_model=JobOut,
    summary="Get a job",
    description="A job's status, progress (`done` of `total` in `stage`, updated a few "
    "times a second), times, and for a failed job the problem in `error`.",
    dependencies=[READ],
    responses=problem_responses(404, 422),
)
async def get_job(job_id: JobId, registry: RegistryDep) -> JobOut:
    return job_out(await in_thread(registry.get_job, job_id))


@router.post(
    "/v1/jobs/{job_id}/cancel",
    status_code=202,
    response_model=JobOut,
    summary="Cancel a job",
    description="A queued job ends `cancelled` at once; a running one is asked to stop "
    "(`cancel_requested` becomes true) and ends `cancelled` at its next check, or is "
    "terminated after ENSEMBLE_CANCEL_GRACE_S seconds. No version appears. A job that "
    "already ended answers 409.",
    dependencies=[TRAIN],
    responses=problem_responses(404, 409, 422),
)
async def cancel_job(job_id: JobId, runner: RunnerDep) -> JSONResponse:
    return _job_response(await runner.cancel(job_id), 202)
