"""Checks of a resolved spec that need the built (unfitted) estimators: scikit-learn's own
parameter constraints, then the capabilities a kind needs of its members (probabilities for
soft voting, sample weights for boosting).  Part of :func:`ensembles.validation.resolve_ensemble`.
"""

from __future__ import annotations

import re
from typing import Any

from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils.validation import has_fit_parameter

from ensembles.catalog import KINDS, MemberNeed
from ensembles.errors import Location, Problem
from ensembles.specs import EstimatorSpec
from ensembles.tasks import Task

_SKLEARN_PARAM = re.compile(r"The '([A-Za-z0-9_]+)' parameter of \w+ (.*)")


def check_built(
    spec: EstimatorSpec,
    estimator: BaseEstimator,
    task: Task,
    loc: Location,
    problems: list[Problem],
) -> None:
    """Checks that need the built estimator: scikit-learn's own constraints and capabilities."""
    _sklearn_constraints(estimator, loc, problems)
    kind = KINDS[spec.kind]
    members = built_members(spec, estimator)
    for slot_loc, member_spec, member in members:
        check_built(member_spec, member, task, (*loc, *slot_loc), problems)
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
    method = need.method or (None if need.labels else value)
    lacks_method = isinstance(method, str) and not hasattr(member, method)
    lacks_fit_param = need.fit_param is not None and not has_fit_parameter(member, need.fit_param)
    column_labels = need.labels and is_classifier(member) and KINDS[member_kind].column_labels
    if lacks_method or lacks_fit_param or column_labels:
        return need.message.format(member=member_kind, method=method)
    return None


def built_members(
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
    if validate is None or not hasattr(estimator, "_parameter_constraints"):
        return  # not scikit-learn's (a boosting library's): the catalog's bounds only
    try:
        validate()
    except (ValueError, TypeError) as exc:
        match = _SKLEARN_PARAM.match(str(exc))
        if match:
            problems.append(Problem((*loc, "params", match.group(1)), match.group(2)))
        else:
            problems.append(Problem((*loc, "params"), str(exc)))
