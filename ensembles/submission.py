"""The submit-time check of a training job: every problem at once, each with its path.

One entry point, :func:`check_job`, runs every check that needs no training, so one
answer lists everything: the target and feature columns against the stored table, the
ensemble spec against the catalog and the service's limits (:mod:`ensembles.validation`),
the hold-out split with the job's seed, the folds and the rows each nested fit sees
against the table's labels (:mod:`ensembles.splits` through
:func:`~ensembles.validation.check_against_rows`), and the bias-variance bounds
(:mod:`ensembles.science.bias_variance`). The result is the job document the worker
trains from, the very split checked here being the one it makes.

The request's structure and which dataset it names are the service's to check first; a
field whose structure failed is passed as ``unparsed`` and the checks that need it skip.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection
from dataclasses import dataclass, field

from ensembles.catalog import Task
from ensembles.errors import DataError, Problem, SpecError
from ensembles.jobs import load_labels
from ensembles.registry import DatasetRecord, Registry
from ensembles.registry.documents import DatasetRef, JobDocument
from ensembles.science import bias_variance
from ensembles.specs import MAX_RANDOM_STATE, EstimatorSpec, EvaluationSpec, SpecLimits
from ensembles.training_data import Labels
from ensembles.validation import check_against_rows, resolve_ensemble

TASKS: tuple[Task, ...] = ("classification", "regression")


@dataclass(frozen=True)
class JobRequest:
    """What a training request asks for; the fields named in ``unparsed`` failed to parse
    (the service reported why) and are not checked."""

    model: str
    target: str | None
    features: list[str] | None
    task: Task | None
    ensemble: EstimatorSpec | None
    evaluation: EvaluationSpec | None
    random_state: int | None
    description: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    unparsed: Collection[str] = ()


@dataclass(frozen=True)
class _Checked:
    data: Labels | None
    spec: EstimatorSpec | None
    random_state: int
    problems: list[Problem]


def check_job(
    registry: Registry,
    dataset: DatasetRecord | None,
    request: JobRequest,
    limits: SpecLimits,
    max_bias_variance_rounds: int,
) -> tuple[JobDocument | None, list[Problem]]:
    """The job document, or every problem the request has (``dataset`` None: the service
    could not tell which dataset the request names, and said why)."""
    checked = _check(registry, dataset, request, limits, max_bias_variance_rounds)
    data, spec = checked.data, checked.spec
    target, evaluation = request.target, request.evaluation
    if checked.problems or dataset is None or data is None or spec is None:
        return None, checked.problems  # nothing else: the service said what it could not read
    assert target is not None and evaluation is not None
    document = JobDocument(
        model=request.model,
        dataset=DatasetRef(id=dataset.id, sha256=dataset.sha256, n_rows=dataset.n_rows),
        target=target,
        features=list(data.features),
        task=data.task,
        task_inferred=data.task_inferred,
        kind=spec.kind,
        ensemble=spec,
        evaluation=evaluation,
        random_state=checked.random_state,
        description=request.description,
        tags=request.tags,
    )
    return document, []


def _check(
    registry: Registry,
    dataset: DatasetRecord | None,
    request: JobRequest,
    limits: SpecLimits,
    max_bias_variance_rounds: int,
) -> _Checked:
    unparsed = set(request.unparsed)
    problems: list[Problem] = []
    data: Labels | None = None
    target, evaluation = request.target, request.evaluation
    if dataset is not None and target is not None and not unparsed & {"features", "task"}:
        try:
            data = load_labels(registry, dataset.id, target, request.features, request.task)
        except DataError as exc:
            problems += exc.problems
    task: Task | None = data.task if data is not None else None
    if task is None and "task" not in unparsed:
        task = request.task
    spec: EstimatorSpec | None = None
    if request.ensemble is not None and "ensemble" not in unparsed:
        spec, spec_problems = _resolve(request.ensemble, task, limits)
        problems += spec_problems
    random_state = request.random_state
    if random_state is None:  # chosen now: the checks below make the split training makes
        random_state = secrets.randbelow(MAX_RANDOM_STATE + 1)
    if evaluation is None or "evaluation" in unparsed:
        return _Checked(data, spec, random_state, problems)
    if data is not None:
        # The hold-out split, the folds and the rows each nested fit sees, against the
        # table's classes and rows (the spec's part only once the spec itself is sound).
        problems += check_against_rows(spec, evaluation, data.y, data.task, random_state)
    problems += bias_variance.problems(evaluation, max_bias_variance_rounds)
    return _Checked(data, spec, random_state, problems)


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
