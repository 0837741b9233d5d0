"""Checking a spec completely before any training, and filling in its defaults.

Every problem in the tree is collected (not just the first) with its full path, so a user
fixes a request in one round trip.  Checks run in order of cost: kinds and slots, then
parameter values against the catalog, then scikit-learn's own parameter validation on
the built (unfitted) estimators, then capabilities that need built objects (probabilities
for soft voting, sample weights for boosting), then resource bounds.

The built-estimator checks are :mod:`ensembles.built_checks`;
:func:`check_against_rows` (:mod:`ensembles.row_checks`, re-exported here) then checks
the resolved spec against the labels it will be trained on.
"""

from __future__ import annotations

import re
from typing import Any

from ensembles.builders import build_estimator
from ensembles.built_checks import check_built
from ensembles.catalog import KINDS, SERVICE_OWNED_PARAMS, Kind
from ensembles.errors import Location, Problem, SpecError, shown
from ensembles.row_checks import check_against_rows as check_against_rows
from ensembles.specs import EstimatorSpec, NamedEstimatorSpec, SpecLimits
from ensembles.suggestions import did_you_mean
from ensembles.tasks import Task

MEMBER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")


def resolve_ensemble(
    spec: EstimatorSpec,
    task: Task,
    limits: SpecLimits | None = None,
    loc: Location = ("ensemble",),
) -> EstimatorSpec:
    """The spec with every default filled in, or SpecError listing every problem."""
    limits = limits or SpecLimits()
    problems: list[Problem] = []
    kind = KINDS.get(spec.kind)
    if kind is not None and kind.family != "ensemble":
        problems.append(
            Problem(
                (*loc, "kind"),
                f"'{spec.kind}' is a base learner; the top level must be an ensemble kind",
            )
        )
    resolved = _resolve(spec, task, loc, 1, limits, problems)
    if not problems:
        estimator = build_estimator(resolved, task, random_state=0)
        check_built(resolved, estimator, task, loc, problems)
        total = fitted_members(resolved)
        if total > limits.max_total_members:
            problems.append(
                Problem(
                    loc,
                    f"the ensemble would fit {total} estimators across its nesting; "
                    f"the limit is {limits.max_total_members}",
                )
            )
    if problems:
        raise SpecError(
            f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in the request", problems
        )
    return resolved


def _resolve(
    spec: EstimatorSpec,
    task: Task,
    loc: Location,
    depth: int,
    limits: SpecLimits,
    problems: list[Problem],
) -> EstimatorSpec:
    kind = KINDS.get(spec.kind)
    if kind is None:
        msg = f"unknown kind '{spec.kind}'{did_you_mean(spec.kind, KINDS)}; see GET /v1/kinds"
        problems.append(Problem((*loc, "kind"), msg))
        return spec
    if task not in kind.tasks:
        only = " and ".join(kind.tasks)
        problems.append(Problem((*loc, "kind"), f"'{kind.name}' does not do {task} (only {only})"))
        return spec
    if kind.library is not None and not kind.library.installed():
        problems.append(Problem((*loc, "kind"), kind.library.missing_message(kind.name)))
        return spec
    if kind.becomes and depth > 1:
        problems.append(
            Problem(
                (*loc, "kind"),
                f"'{kind.name}' can only be the top-level ensemble, not a member of another "
                "(its fitted form replaces it in the model)",
            )
        )
        return spec
    if kind.family == "ensemble" and depth > limits.max_depth:
        problems.append(
            Problem(
                (*loc, "kind"), f"ensembles nest {depth} deep here; the limit is {limits.max_depth}"
            )
        )
        return spec
    before = len(problems)
    params = _resolve_params(spec.params, kind, task, (*loc, "params"), problems)
    if depth > 1:
        _top_level_only(spec.params, kind, task, (*loc, "params"), problems)
    params_ok = len(problems) == before
    updates: dict[str, Any] = {"params": params}
    for slot in ("estimator", "estimators", "final_estimator"):
        if getattr(spec, slot) is not None and slot not in kind.slots:
            problems.append(Problem((*loc, slot), f"'{kind.name}' takes no {slot}"))
    if "estimator" in kind.slots:
        child = spec.estimator or kind.default_estimator[task]
        updates["estimator"] = _resolve(
            child, task, (*loc, "estimator"), depth + 1, limits, problems
        )
    if "final_estimator" in kind.slots:
        child = spec.final_estimator or kind.default_final_estimator[task]
        updates["final_estimator"] = _resolve(
            child, task, (*loc, "final_estimator"), depth + 1, limits, problems
        )
    if "estimators" in kind.slots:
        updates["estimators"] = _resolve_members(spec, kind, task, loc, depth, limits, problems)
    resolved = spec.model_copy(update=updates)
    if kind.spec_check is not None and params_ok:
        problems.extend(Problem((*loc, *where), msg) for where, msg in kind.spec_check(resolved))
    return resolved


def _resolve_members(
    spec: EstimatorSpec,
    kind: Kind,
    task: Task,
    loc: Location,
    depth: int,
    limits: SpecLimits,
    problems: list[Problem],
) -> list[NamedEstimatorSpec]:
    members = spec.estimators or []
    if not members:
        problems.append(
            Problem((*loc, "estimators"), f"'{kind.name}' needs at least one estimator")
        )
    if len(members) > limits.max_members_per_level:
        problems.append(
            Problem(
                (*loc, "estimators"),
                f"{len(members)} estimators; the limit is "
                f"{limits.max_members_per_level} per ensemble",
            )
        )
    seen: set[str] = set()
    resolved: list[NamedEstimatorSpec] = []
    reserved = set(kind.classes[task](estimators=[]).get_params(deep=False))
    for i, member in enumerate(members):
        mloc = (*loc, "estimators", i)
        if not isinstance(member, NamedEstimatorSpec):
            problems.append(Problem((*mloc, "name"), "each estimator needs a name"))
            continue
        if not MEMBER_NAME.match(member.name) or "__" in member.name:
            problems.append(
                Problem(
                    (*mloc, "name"),
                    "a name starts with a letter and has letters, digits, single '_'",
                )
            )
        elif member.name in seen:
            problems.append(Problem((*mloc, "name"), f"the name '{member.name}' is used twice"))
        elif member.name in reserved:
            problems.append(
                Problem((*mloc, "name"), f"'{member.name}' is a parameter name of {kind.name}")
            )
        seen.add(member.name)
        child = _resolve(member, task, mloc, depth + 1, limits, problems)
        resolved.append(NamedEstimatorSpec(name=member.name, **child.model_dump(exclude={"name"})))
    weights = spec.params.get("weights")
    if isinstance(weights, list) and members and len(weights) != len(members):
        problems.append(
            Problem(
                (*loc, "params", "weights"),
                f"{len(weights)} weights for {len(members)} estimators; give one per estimator",
            )
        )
    elif isinstance(weights, list) and weights and not any(_positive(w) for w in weights):
        problems.append(Problem((*loc, "params", "weights"), "at least one weight must be > 0"))
    return resolved


def _positive(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _resolve_params(
    given: dict[str, Any], kind: Kind, task: Task, loc: Location, problems: list[Problem]
) -> dict[str, Any]:
    allowed = {p.name: p for p in kind.params_for(task)}
    for name, value in given.items():
        param = allowed.get(name)
        if param is None:
            if name in SERVICE_OWNED_PARAMS:
                msg = f"'{name}' is set by the service and cannot be chosen"
            elif name in kind.fixed:
                msg = f"'{kind.name}' fixes {name}={kind.fixed[name]!r}"
            else:
                known = ", ".join(sorted(allowed)) or "none"
                msg = (f"unknown parameter '{name}' for {kind.name} ({task})"
                       f"{did_you_mean(name, allowed)} (known: {known})")  # fmt: skip
            problems.append(Problem((*loc, name), msg))
        elif not param.accepts(value, task):
            msg = f"must be {param.describe(task)}; got {shown(value)}"
            elsewhere = [t for t in kind.tasks if t != task and param.accepts(value, t)]
            if elsewhere:
                msg += f" ({shown(value)} is for {' and '.join(elsewhere)} only)"
            problems.append(Problem((*loc, name), msg))
    return {p.name: given.get(p.name, p.default_for(task)) for p in allowed.values()}


def _top_level_only(
    given: dict[str, Any], kind: Kind, task: Task, loc: Location, problems: list[Problem]
) -> None:
    """Parameters only the service's own fit reads cannot reach a nested member (its
    ensemble fits it as scikit-learn does)."""
    for name in sorted(kind.top_level_params & given.keys()):
        param = kind.param(name)
        if param is not None and given[name] != param.default_for(task):
            msg = (
                f"'{name}' applies only where '{kind.name}' is the top-level ensemble (the "
                "service fits it there); a member is fitted by its ensemble"
            )
            problems.append(Problem((*loc, name), msg))


def fitted_members(spec: EstimatorSpec) -> int:
    """How many estimators training fits in all, across nesting (the resource bound)."""
    kind = KINDS[spec.kind]
    if kind.family == "base":
        return 1
    n = int(spec.params.get(kind.size_param) or 1) if kind.size_param else 1
    if spec.estimator is not None:
        return n * fitted_members(spec.estimator)
    if spec.estimators is not None:
        inner = sum(fitted_members(m) for m in spec.estimators)
        if kind.member_rows == "folds":  # once per fold, and once on every row
            folds = int(spec.params.get("cv", 5))
            final = spec.final_estimator
            return inner * (folds + 1) + (fitted_members(final) if final is not None else 0)
        return inner
    return n
