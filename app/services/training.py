"""Submit-time checks of a training request: every problem at once, rooted at the body.

The service checks what is its own — the structure (the documented ``TrainingRequest``
model parses it) and which dataset the request names — then hands the rest to the
library's one entry point, :func:`ensembles.submission.check_job` (the columns, the spec,
the split and folds against the table, the bias-variance bounds), in a thread. The result
is the job document the worker process trains from.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from app.problems import InvalidRequestError, count_text
from app.schemas.training import TrainingRequest
from app.services import datasets
from app.settings import Settings
from app.threads import in_thread
from ensembles import NotFoundError, Problem, SpecError
from ensembles.registry import DatasetRecord, Registry
from ensembles.registry.documents import JobDocument
from ensembles.submission import JobRequest, check_job


def _read_request(raw: dict[str, Any]) -> tuple[TrainingRequest, list[Problem]]:
    """The request as its documented model parses it, with every structural problem.

    With problems, the fields that passed are each parsed by the same model (one
    assignment at a time) so the checks that need them still run; the fields that failed
    stay unset and the checks of :func:`prepare_job` skip them.
    """
    try:
        return TrainingRequest.model_validate(raw), []
    except ValidationError as exc:
        problems = [Problem(tuple(e["loc"]), e["msg"]) for e in exc.errors()]
    bad = {p.loc[0] for p in problems}
    unset: dict[str, Any] = {}  # required fields that failed stay unset
    request = TrainingRequest.model_construct(**unset)  # optional ones get their defaults
    for name in TrainingRequest.model_fields:
        if name in raw and name not in bad:
            setattr(request, name, raw[name])
    return request, problems


def _job_request(model: str, request: TrainingRequest, unparsed: set[str | int]) -> JobRequest:
    """The library's view of the request; a field that failed to parse is None."""

    def asked(name: str) -> Any:
        return None if name in unparsed else getattr(request, name, None)

    return JobRequest(
        model=model,
        target=asked("target"),
        features=asked("features"),
        task=asked("task"),
        ensemble=asked("ensemble"),
        evaluation=asked("evaluation"),
        random_state=asked("random_state"),
        description=asked("description"),
        tags=asked("tags") or {},
        unparsed={str(name) for name in unparsed},
    )


async def prepare_job(
    registry: Registry, settings: Settings, model: str, raw: object
) -> JobDocument:
    """Check the whole request; return the job document or raise SpecError with every problem."""
    if not isinstance(raw, dict):
        raise InvalidRequestError(
            "the body is not a JSON object", [Problem((), "expected a JSON object")]
        )
    request, problems = _read_request(raw)
    bad = {p.loc[0] for p in problems}
    record: DatasetRecord | None = None
    if "dataset_id" not in bad:
        try:
            loc = ("dataset_id",)
            record = await in_thread(datasets.resolve, registry, request.dataset_id, loc)
        except NotFoundError as exc:
            problems.append(Problem(("dataset_id",), exc.detail))
        except InvalidRequestError as exc:
            problems += exc.problems
    job = _job_request(model, request, bad)
    limits, rounds = settings.spec_limits, settings.max_bias_variance_rounds
    document, found = await in_thread(check_job, registry, record, job, limits, rounds)
    problems += found
    if problems:
        raise SpecError(count_text(len(problems)), problems)
    assert document is not None
    return document
