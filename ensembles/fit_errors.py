"""scikit-learn refusing the data or the parameters, placed on a path of the request.

Only errors raised inside scikit-learn (or numpy and scipy under it) are the user's to
fix; the problem names the estimator of the spec that raised it, and its parameter when
the message names it with its value. An error of this library's own code stays a bug.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from sklearn.base import BaseEstimator
from sklearn.calibration import CalibratedClassifierCV

from ensembles.builders import build_estimator
from ensembles.catalog import KINDS, Task
from ensembles.errors import Location, Problem, TrainingError
from ensembles.parallel import member_frames
from ensembles.specs import EstimatorSpec

_OWN_PACKAGES = ("ensembles", "app")
_REFUSALS = (ValueError, TypeError, ArithmeticError)


@contextmanager
def scikit_learn_errors(
    doing: str, spec: EstimatorSpec, task: Task, fallback: Location
) -> Iterator[None]:
    """scikit-learn refusing the data or the parameters becomes a TrainingError (422).

    Only errors raised inside scikit-learn (or numpy and scipy under it) are the user's
    to fix: a ValueError of this library's own code is a bug and goes on as it is (a 500
    that is logged). The problem is placed on the estimator of the spec that raised it,
    on its parameter when the message names it with its value, else on ``fallback``.
    """
    try:
        yield
    except _REFUSALS as exc:
        if not raised_by_scikit_learn(exc):
            raise
        message = str(exc).strip() or type(exc).__name__
        loc = attribute(exc, spec, task) or fallback
        raise TrainingError(
            f"scikit-learn could not {doing}: {message}", [Problem(loc, message)]
        ) from exc


def raised_by_scikit_learn(exc: BaseException) -> bool:
    """True when the error came out of scikit-learn: below the innermost frame of this
    project's code (the call that failed) there is a frame of scikit-learn."""
    modules = [str(frame.f_globals.get("__name__", "")) for frame in member_frames(exc)]
    own = [i for i, name in enumerate(modules) if name.split(".")[0] in _OWN_PACKAGES]
    below = modules[own[-1] + 1 :] if own else modules
    return any(name.split(".")[0] == "sklearn" for name in below)


def attribute(exc: BaseException, spec: EstimatorSpec, task: Task) -> Location | None:
    """The path of the spec's estimator that raised ``exc`` (and of its parameter when the
    message names it with its value), or None when it cannot be told."""
    failing = _failing_estimator(exc)
    if failing is None:
        return None
    candidates = [
        (loc, node)
        for loc, node in spec_nodes(spec)
        if KINDS[node.kind].classes.get(task) is type(failing) and _same_params(node, task, failing)
    ]
    if len(candidates) != 1:
        return None
    loc, node = candidates[0]
    message = str(exc)
    named = [
        (found.start(), name)
        for name, value in node.params.items()
        if (found := re.search(rf"\b{re.escape(name)}\b", message, re.IGNORECASE))
        and re.search(rf"(?<![\w.]){re.escape(str(value))}(?![\w.])", message)
    ]
    return (*loc, "params", min(named)[1]) if named else loc


def spec_nodes(
    spec: EstimatorSpec, loc: Location = ("ensemble",)
) -> list[tuple[Location, EstimatorSpec]]:
    """Every estimator of a spec with its path in the request body, depth first."""
    out = [(loc, spec)]
    if spec.estimator is not None:
        out += spec_nodes(spec.estimator, (*loc, "estimator"))
    for i, member in enumerate(spec.estimators or []):
        out += spec_nodes(member, (*loc, "estimators", i))
    if spec.final_estimator is not None:
        out += spec_nodes(spec.final_estimator, (*loc, "final_estimator"))
    return out


def _failing_estimator(exc: BaseException) -> BaseEstimator | None:
    """The innermost estimator whose method was running when ``exc`` was raised."""
    failing = None
    for frame in member_frames(exc):
        obj = frame.f_locals.get("self")
        if isinstance(obj, BaseEstimator):
            failing = obj
    if isinstance(failing, CalibratedClassifierCV):  # svm with probability=true
        failing = failing.estimator
    return failing


def _same_params(node: EstimatorSpec, task: Task, estimator: BaseEstimator) -> bool:
    """The estimator is (a clone of) the one the node builds: same class, same own
    parameters (members, seeds and the service's fixed settings aside)."""
    built = build_estimator(node, task, random_state=None)
    if isinstance(built, CalibratedClassifierCV):
        built = built.estimator
    if type(built) is not type(estimator):
        return False
    actual = estimator.get_params(deep=False)
    for name, value in built.get_params(deep=False).items():
        if name == "random_state" or isinstance(value, BaseEstimator | list):
            continue
        try:
            if bool(actual.get(name) != value):
                return False
        except (TypeError, ValueError):
            return False
    return True
