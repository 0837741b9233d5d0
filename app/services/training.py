"""Submit-time checks of a training request: every problem at once, rooted at the body.

A request is checked in four layers that all run, so one answer lists everything:
the structure (the documented ``TrainingRequest`` model parses it), the dataset and its
target/feature columns (on the stored table, loaded in a thread), the ensemble spec
against the catalog and the service's resource limits, and the evaluation and the spec
against the table's rows and classes (the hold-out split with the job's seed, the folds,
``n_neighbors`` and the like against the rows each nested fit sees). The result is the
job document the worker process trains from.
"""

from __future__ import annotations

import secrets
from typing import Any

from pydantic import ValidationError

from app.problems import InvalidRequestError, count_text
from app.schemas.training import TrainingRequest
from app.services import datasets
from app.settings import Settings
from app.threads import in_thread
from ensembles import (
    DataError,
    EstimatorSpec,
    NotFoundError,
    Problem,
    SpecError,
    SpecLimits,
    Table,
    TrainingData,
    check_against_rows,
    read_table,
    resolve_ensemble,
    select_training_data,
)
from ensembles.registry import DatasetRecord, Registry
from ensembles.registry.documents import DatasetRef, JobDocument
from ensembles.science import bias_variance
from ensembles.specs import MAX_RANDOM_STATE
from ensembles.tasks import Task

TASKS: tuple[Task, ...] = ("classification", "regression")


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


def _load_training_data(
    registry: Registry, record: DatasetRecord, request: TrainingRequest
) -> TrainingData:
    table = load_table(registry, record.id)
    return select_training_data(table, request.target, request.features, request.task)


def load_table(registry: Registry, dataset_id: str) -> Table:
    """The stored canonical table (verified bytes), parsed back into a Table."""
    parquet = registry.read_dataset_parquet(dataset_id)
    return read_table(parquet, filename=f"{dataset_id}.parquet")


def _resolve(
    spec: EstimatorSpec, task: Task | None, limits: SpecLimits
) -> tuple[EstimatorSpec | None, list[Problem]]:
    """The resolved spec for a known task; for an unknown one, only task-free problems."""
    if task is not None:
        try:
            return resolve_ensemble(spec, task, limits), []
        except SpecError as exc:
            return None, list(exc.problems)
    found: list[set[Problem]] = []
    for candidate in TASKS:
        try:
            resolve_ensemble(spec, candidate, limits)
            return None, []
        except SpecError as exc:
            found.append(set(exc.problems))
    common = set.intersection(*found)
    return None, sorted(common, key=lambda p: (str(p.loc), p.msg))


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
    data: TrainingData | None = None
    if "dataset_id" not in bad:
        try:
            loc = ("dataset_id",)
            record = await in_thread(datasets.resolve, registry, request.dataset_id, loc)
        except NotFoundError as exc:
            problems.append(Problem(("dataset_id",), exc.detail))
        except InvalidRequestError as exc:
            problems += exc.problems
    if record is not None and not bad & {"target", "features", "task"}:
        try:
            data = await in_thread(_load_training_data, registry, record, request)
        except DataError as exc:
            problems += exc.problems
    task: Task | None = data.task if data is not None else None
    if task is None and "task" not in bad:
        task = request.task
    spec: EstimatorSpec | None = None
    if "ensemble" not in bad:
        spec, spec_problems = await in_thread(
            _resolve, request.ensemble, task, settings.spec_limits
        )
        problems += spec_problems
    random_state = request.random_state
    if random_state is None:  # chosen now: the checks below make the split training makes
        random_state = secrets.randbelow(MAX_RANDOM_STATE + 1)
    if data is not None and "evaluation" not in bad:
        # The hold-out split, the folds and the rows each nested fit sees, against the
        # table's classes and rows (the spec's part only once the spec itself is sound).
        problems += await in_thread(
            check_against_rows, spec, request.evaluation, data.y, data.task, random_state
        )
    if "evaluation" not in bad:
        problems += bias_variance.problems(request.evaluation, settings.max_bias_variance_rounds)
    if problems:
        raise SpecError(count_text(len(problems)), problems)
    assert record is not None and data is not None and spec is not None
    return JobDocument(
        model=model,
        dataset=DatasetRef(id=record.id, sha256=record.sha256, n_rows=record.n_rows),
        target=request.target,
        features=[f.name for f in data.features],
        task=data.task,
        task_inferred=data.task_inferred,
        kind=spec.kind,
        ensemble=spec,
        evaluation=request.evaluation,
        random_state=random_state,
        description=request.description,
        tags=request.tags,
    )
