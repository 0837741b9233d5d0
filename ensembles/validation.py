"""Checking a spec completely before any training, and filling in its defaults.

Every problem in the tree is collected (not just the first) with its full path, so a user
fixes a request in one round trip.  Checks run in order of cost: kinds and slots, then
parameter values against the catalog, then scikit-learn's own parameter validation on
the built (unfitted) estimators, then capabilities that need built objects (probabilities
for soft voting, sample weights for boosting), then resource bounds.

:func:`check_against_rows` then checks the resolved spec against the labels it will be
trained on: the hold-out split and the cross-validation folds against the rows of each
class, and the rows each nested fit sees against what needs a number of them
(``n_neighbors`` of knn, ``max_samples`` drawn without replacement, stacking's ``cv``).
It refuses only what would certainly fail; the rest is scikit-learn's to refuse at fit
time, which training reports as a problem too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.utils.validation import has_fit_parameter

from ensembles.builders import build_estimator
from ensembles.catalog import KINDS, SERVICE_OWNED_PARAMS, Kind, MemberNeed
from ensembles.errors import Location, Problem, SpecError, TrainingError, shown
from ensembles.specs import EstimatorSpec, EvaluationSpec, NamedEstimatorSpec, SpecLimits
from ensembles.splits import cv_problems, encode_classes, split_rows
from ensembles.suggestions import did_you_mean
from ensembles.tasks import Task

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
        msg = f"unknown kind '{spec.kind}'{did_you_mean(spec.kind, KINDS)}; see GET /v1/kinds"
        problems.append(Problem((*loc, "kind"), msg))
        return spec
    if task not in kind.tasks:
        only = " and ".join(kind.tasks)
        problems.append(Problem((*loc, "kind"), f"'{kind.name}' does not do {task} (only {only})"))
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
    for need in kind.member_needs:
        for slot_loc, member_spec, member in members:
            if slot_loc[0] == need.slot:
                message = _unmet(need, spec.params, member, member_spec.kind)
                if message is not None:
                    problems.append(Problem((*loc, *slot_loc, "kind"), message))


def _unmet(
    need: MemberNeed, params: dict[str, Any], member: BaseEstimator, member_kind: str
) -> str | None:
    """Why ``member`` cannot meet ``need`` under these parameters (None: it can)."""
    value = None
    if need.when is not None:
        param, values = need.when
        value = params.get(param)
        if value not in values:
            return None
    method = need.method or value
    lacks_method = isinstance(method, str) and not hasattr(member, method)
    lacks_fit_param = need.fit_param is not None and not has_fit_parameter(member, need.fit_param)
    if lacks_method or lacks_fit_param:
        return need.message.format(member=member_kind, method=method)
    return None


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


# ------------------------------------------------------------------ against the rows


@dataclass(frozen=True)
class _Rows:
    """The rows one fit of an estimator sees, at most, and how they came about."""

    n: int
    counts: dict[Any, int] | None  # rows per class, at most (classification, when known)
    why: str
    weighted: bool = False  # rows reach it with weights (whose sum is not a row count)


def check_against_rows(
    spec: EstimatorSpec | None,
    evaluation: EvaluationSpec,
    y: NDArray[Any],
    task: Task,
    random_state: int,
) -> list[Problem]:
    """What training ``spec`` on labels ``y`` would certainly run into, before training.

    The hold-out split is the one training makes (same labels, same seed); ``spec`` must
    come from :func:`resolve_ensemble` (None: check the evaluation only).
    """
    n = len(y)
    fraction = evaluation.holdout_fraction
    problems: list[Problem] = []
    counts: dict[Any, int] | None = None
    try:
        split = split_rows(y, task, fraction, random_state)
    except TrainingError as exc:
        problems += exc.problems
        n_train = n - math.ceil(fraction * n) if fraction > 0 else n
    else:
        y_train = np.asarray(y)[split.train]
        n_train = len(y_train)
        problems += cv_problems(y_train, task, evaluation.cv_folds)
        counts = _class_counts(y_train) if task == "classification" else None
    if spec is None or n_train < 1:
        return problems
    held = f"the {n_train} training rows"
    if n_train < n:
        held += f" left after holding out {n - n_train} of {n}"
    fits = [_Rows(n_train, counts, held)]
    k = evaluation.cv_folds
    if k and n_train >= k:
        fold = n_train - n_train // k
        fold_counts = None if counts is None else {c: m - m // k for c, m in counts.items()}
        why = f"cross-validation (cv_folds={k}) trains each fold on at most {fold} of {held}"
        fits.append(_Rows(fold, fold_counts, why))
    built = build_estimator(spec, task, random_state=0)
    seen = {p.loc for p in problems}
    for rows in fits:
        for problem in _rows_problems(spec, built, task, ("ensemble",), rows):
            if problem.loc not in seen:
                seen.add(problem.loc)
                problems.append(problem)
    return problems


def _class_counts(y: NDArray[Any]) -> dict[Any, int]:
    labels, _, counts = encode_classes(y)
    return dict(zip(labels, counts, strict=True))


def _rows_problems(
    spec: EstimatorSpec, built: BaseEstimator, task: Task, loc: Location, rows: _Rows
) -> list[Problem]:
    kind = KINDS[spec.kind]
    members = _built_members(spec, built)
    if kind.member_rows == "bites":
        return _bites(spec, task, loc, rows, members)
    if kind.rows_param is not None:
        return _rows_param(spec, kind.rows_param, loc, rows)
    if kind.member_rows == "drawn":
        return _drawn(spec, built, task, loc, rows, members)
    out: list[Problem] = []
    inner_rows = rows
    if kind.member_rows == "folds":
        out += _folds(spec, task, loc, rows)
        cv = int(spec.params["cv"])
        inner = rows.n - rows.n // cv
        inner_rows = _Rows(
            inner,
            None if rows.counts is None else {c: m - m // cv for c, m in rows.counts.items()},
            f"{rows.why}; {spec.kind}'s cv={cv} fits each member on at most {inner} of them",
            rows.weighted,
        )
    for slot_loc, member_spec, member in members:
        # AdaBoost's members see every row, reweighted; voting's and stacking's final
        # estimator see the rows the ensemble sees; stacking's members, its folds.
        member_rows = rows
        if kind.member_rows == "weighted":
            member_rows = replace(rows, weighted=True)
        elif kind.member_rows == "folds" and slot_loc[0] == "estimators":
            member_rows = inner_rows
        out += _rows_problems(member_spec, member, task, (*loc, *slot_loc), member_rows)
    return out


def _rows_param(spec: EstimatorSpec, name: str, loc: Location, rows: _Rows) -> list[Problem]:
    k = spec.params.get(name)
    if not isinstance(k, int) or k <= rows.n:
        return []
    return [
        Problem(
            (*loc, "params", name),
            f"{name}={k}, but this {spec.kind} is fitted on at most {rows.n} rows ({rows.why}): "
            f"set {name} to at most {rows.n}",
        )
    ]


def _bites(
    spec: EstimatorSpec,
    task: Task,
    loc: Location,
    rows: _Rows,
    members: list[tuple[Location, EstimatorSpec, BaseEstimator]],
) -> list[Problem]:
    """pasting_votes fits each member on a bite of ``bite_size`` rows, and needs rows
    outside every bite for its out-of-bag error: fewer rows than it is fitted on."""
    kind = KINDS[spec.kind]
    assert kind.rows_param is not None
    name = kind.rows_param
    bite = int(spec.params[name])
    if bite >= rows.n:
        most = rows.n - 1
        advice = f"set {name} to at most {most}" if most >= 1 else "train it on more rows"
        return [
            Problem(
                (*loc, "params", name),
                f"{name}={bite}, but this {spec.kind} is fitted on at most {rows.n} rows "
                f"({rows.why}); every bite must leave rows out of bag: {advice}",
            )
        ]
    ((slot_loc, member_spec, member),) = members
    why = f"{rows.why}; {spec.kind} fits each member on a bite of {bite} of them"
    return _rows_problems(member_spec, member, task, (*loc, *slot_loc), _Rows(bite, None, why))


def _drawn(
    spec: EstimatorSpec,
    built: BaseEstimator,
    task: Task,
    loc: Location,
    rows: _Rows,
    members: list[tuple[Location, EstimatorSpec, BaseEstimator]],
) -> list[Problem]:
    """The bagging family draws max_samples rows per member, or reweights every row for
    members that take weights."""
    ((slot_loc, member_spec, member),) = members
    max_samples = built.max_samples
    if isinstance(max_samples, int) and not built.bootstrap and max_samples > rows.n:
        return [
            Problem(
                (*loc, "params", "max_samples"),
                f"max_samples={max_samples}, but {spec.kind} draws rows without replacement "
                f"from at most {rows.n} ({rows.why}): set max_samples to at most {rows.n}, "
                "or to a fraction",
            )
        ]
    if has_fit_parameter(member, "sample_weight"):
        member_rows = replace(rows, weighted=True)
    elif isinstance(max_samples, float) and rows.weighted:
        return []  # drawn from the sum of the weights it is given: no row count to compare
    else:
        if max_samples is None:
            count = rows.n
        elif isinstance(max_samples, int):
            count = max_samples
        else:
            count = max(int(max_samples * rows.n), 1)
        why = f"{rows.why}; {spec.kind} draws {count} of them per member"
        member_rows = _Rows(count, None, why)
    return _rows_problems(member_spec, member, task, (*loc, *slot_loc), member_rows)


def _folds(spec: EstimatorSpec, task: Task, loc: Location, rows: _Rows) -> list[Problem]:
    """Out-of-fold predictions (stacking, ensemble selection): ``cv`` folds of the rows it
    is fitted on, stratified for classification (scikit-learn refuses when every class is
    smaller)."""
    cv = int(spec.params["cv"])
    where = (*loc, "params", "cv")
    if rows.n < cv:
        return [
            Problem(
                where,
                f"cv={cv}, but this {spec.kind} is fitted on at most {rows.n} rows ({rows.why}); "
                f"its out-of-fold predictions need at least cv rows: {_at_most(rows.n)}",
            )
        ]
    if task == "classification" and rows.counts:
        most = max(rows.counts.values())
        if most < cv:
            return [
                Problem(
                    where,
                    f"cv={cv}, but every class has fewer than {cv} rows where this {spec.kind} is "
                    f"fitted (the largest has at most {most}; {rows.why}); its stratified "
                    f"folds need more: {_at_most(most)}",
                )
            ]
    return []


def _at_most(n: int) -> str:
    return f"set cv to at most {n}" if n >= 2 else "train it on more rows"
