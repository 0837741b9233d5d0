"""Checking a spec completely before any training, and filling in its defaults.

Every problem in the tree is collected (not just the first) with its full path, so a user
fixes a request in one round trip.  Checks run in order of cost: kinds and slots, then
parameter values against the catalog, then scikit-learn's own parameter validation on
the built (unfitted) estimators, then capabilities that need built objects (probabilities
for soft voting, sample weights for boosting), then resource bounds.
"""

from __future__ import annotations

import re
from typing import Any

from sklearn.base import BaseEstimator
from sklearn.utils.validation import has_fit_parameter

from ensembles.builders import build_estimator
from ensembles.catalog import KINDS, SERVICE_OWNED_PARAMS, Kind, Task
from ensembles.errors import Location, Problem, SpecError, shown
from ensembles.specs import EstimatorSpec, NamedEstimatorSpec, SpecLimits

MEMBER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
_SKLEARN_PARAM = re.compile(r"The '([A-Za-z0-9_]+)' parameter of \w+ (.*)")


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
        _check_built(resolved, estimator, task, loc, problems)
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
        problems.append(Problem((*loc, "kind"), f"unknown kind '{spec.kind}'; see GET /v1/kinds"))
        return spec
    if task not in kind.tasks:
        only = " and ".join(kind.tasks)
        problems.append(Problem((*loc, "kind"), f"'{kind.name}' does not do {task} (only {only})"))
        return spec
    if kind.family == "ensemble" and depth > limits.max_depth:
        problems.append(
            Problem(
                (*loc, "kind"), f"ensembles nest {depth} deep here; the limit is {limits.max_depth}"
            )
        )
        return spec
    params = _resolve_params(spec.params, kind, task, (*loc, "params"), problems)
    updates: dict[str, Any] = {"params": params}
    for slot in ("estimator", "estimators", "final_estimator"):
        if getattr(spec, slot) is not None and slot not in kind.slots:
            problems.append(Problem((*loc, slot), f"'{kind.name}' takes no {slot}"))
    if "estimator" in kind.slots:
        child = spec.estimator or _default_member(kind, task)
        updates["estimator"] = _resolve(
            child, task, (*loc, "estimator"), depth + 1, limits, problems
        )
    if "final_estimator" in kind.slots:
        child = spec.final_estimator or _default_final(task)
        updates["final_estimator"] = _resolve(
            child, task, (*loc, "final_estimator"), depth + 1, limits, problems
        )
    if "estimators" in kind.slots:
        updates["estimators"] = _resolve_members(spec, kind, task, loc, depth, limits, problems)
    return spec.model_copy(update=updates)


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
                msg = f"unknown parameter '{name}' for {kind.name} ({task}); known: {known}"
            problems.append(Problem((*loc, name), msg))
        elif not param.accepts(value, task):
            problems.append(
                Problem((*loc, name), f"must be {param.describe(task)}; got {shown(value)}")
            )
    return {p.name: given.get(p.name, p.default_for(task)) for p in allowed.values()}


def _default_member(kind: Kind, task: Task) -> EstimatorSpec:
    """Bagging family: a full tree; AdaBoost: scikit-learn's own default stumps/depth-3 trees."""
    if kind.name == "adaboost":
        depth = 1 if task == "classification" else 3
        return EstimatorSpec(kind="decision_tree", params={"max_depth": depth})
    return EstimatorSpec(kind="decision_tree")


def _default_final(task: Task) -> EstimatorSpec:
    return EstimatorSpec(kind="logistic_regression" if task == "classification" else "ridge")


def _check_built(
    spec: EstimatorSpec,
    estimator: BaseEstimator,
    task: Task,
    loc: Location,
    problems: list[Problem],
) -> None:
    """Checks that need the built estimator: scikit-learn's own constraints and capabilities."""
    _sklearn_constraints(estimator, loc, problems)
    kind = KINDS[spec.kind]
    members = _built_members(spec, estimator)
    for slot_loc, member_spec, member in members:
        _check_built(member_spec, member, task, (*loc, *slot_loc), problems)
    if kind.name == "adaboost":
        for slot_loc, member_spec, member in members:
            if not has_fit_parameter(member, "sample_weight"):
                problems.append(
                    Problem(
                        (*loc, *slot_loc, "kind"),
                        f"'{member_spec.kind}' cannot weight rows, which AdaBoost needs",
                    )
                )
    if task != "classification":
        return
    if kind.name == "voting" and spec.params.get("voting") == "soft":
        for slot_loc, member_spec, member in members:
            if not hasattr(member, "predict_proba"):
                problems.append(
                    Problem(
                        (*loc, *slot_loc, "kind"),
                        f"'{member_spec.kind}' gives no probabilities, so it cannot take part in "
                        "soft voting (use hard voting, or a probabilistic estimator)",
                    )
                )
    method = spec.params.get("stack_method")
    if kind.name == "stacking" and method in ("predict_proba", "decision_function"):
        for slot_loc, member_spec, member in members:
            if slot_loc[0] == "estimators" and not hasattr(member, method):
                problems.append(
                    Problem((*loc, *slot_loc, "kind"), f"'{member_spec.kind}' has no {method}")
                )


def _built_members(
    spec: EstimatorSpec, estimator: BaseEstimator
) -> list[tuple[Location, EstimatorSpec, BaseEstimator]]:
    params = estimator.get_params(deep=False)
    out: list[tuple[Location, EstimatorSpec, BaseEstimator]] = []
    if spec.estimator is not None:
        out.append((("estimator",), spec.estimator, params["estimator"]))
    if spec.estimators is not None:
        built = dict(params["estimators"])
        out.extend((("estimators", i), m, built[m.name]) for i, m in enumerate(spec.estimators))
    if spec.final_estimator is not None:
        out.append((("final_estimator",), spec.final_estimator, params["final_estimator"]))
    return out


def _sklearn_constraints(estimator: BaseEstimator, loc: Location, problems: list[Problem]) -> None:
    validate = getattr(estimator, "_validate_params", None)
    if validate is None:
        return
    try:
        validate()
    except (ValueError, TypeError) as exc:
        match = _SKLEARN_PARAM.match(str(exc))
        if match:
            problems.append(Problem((*loc, "params", match.group(1)), match.group(2)))
        else:
            problems.append(Problem((*loc, "params"), str(exc)))


def fitted_members(spec: EstimatorSpec) -> int:
    """How many estimators training fits in all, across nesting (the resource bound)."""
    kind = KINDS[spec.kind]
    if kind.family == "base":
        return 1
    n = int(spec.params.get("n_estimators") or spec.params.get("max_iter") or 1)
    if spec.estimator is not None:
        return n * fitted_members(spec.estimator)
    if spec.estimators is not None:
        inner = sum(fitted_members(m) for m in spec.estimators)
        if spec.final_estimator is not None:
            folds = int(spec.params.get("cv", 5))
            return inner * (folds + 1) + fitted_members(spec.final_estimator)
        return inner
    return n
