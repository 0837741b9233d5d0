"""Voting, stacking and bagging-family ensembles answered member by member, as scikit-learn does.

Rule: answer each member in native code where an exact one exists, because scikit-learn's
own answer for one row is mostly its forests' per-tree Python overhead and each member's
input validation.  Figures: docs/performance.md.  The ensemble becomes a tree of nodes,
one per estimator, each answering on the rows it sees:

* tree members (forests, extra trees, gradient boosting, histogram gradient boosting,
  single decision trees) by treelite's GTIL (:mod:`ensembles.inference.gtil`); a bagging
  ensemble whose members are all decision trees becomes *one* treelite forest of all of
  them, each tree's features mapped back to the original columns;
* logistic regression, Gaussian naive Bayes, linear regression and ridge by a few lines of
  numpy doing scikit-learn's own arithmetic in its order, each checked against its
  estimator on the check rows when the model is compiled (left to scikit-learn, with the
  reason, if it differs by more than 1e-9);
* every other member by its own scikit-learn method, inside
  ``sklearn.config_context(assume_finite=True, skip_parameter_validation=True)`` (the
  rows were checked to be finite once, at the top);

and each combining node reproduces its estimator's own arithmetic: VotingClassifier's
``np.average`` of probabilities (soft) or weighted ``bincount`` of encoded labels (hard),
VotingRegressor's ``np.average``; BaggingClassifier's sum of probabilities (members whose
sample missed classes add into those classes' columns; members without ``predict_proba``
add a vote) over ``n_estimators``, BaggingRegressor's mean; stacking's columns by
``stack_method_`` (dropping the first probability column of binary problems, 1-D outputs
as columns, ``passthrough`` rows appended) fed to its final estimator.

Labels follow each estimator's rule, and every node also returns the rows whose deciding
scores are within ``TIE_MARGIN`` (a soft vote's top two probabilities, a member's label
that feeds a vote): the caller answers those rows with scikit-learn itself.  A stacking
final estimator fed compiled (last-bit different) probabilities must be one whose answer
moves continuously with them (logistic regression or naive Bayes, whose label margins are
checked; linear models, MLP or SVR for regression); otherwise the whole stacking step is
left to scikit-learn.

:class:`CompiledComposite` is the counterpart of ``CompiledModel`` for these kinds; it is
made and checked by :func:`ensembles.inference.compiling.compile_model`; the nodes are in
:mod:`ensembles.inference.nodes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sklearn
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, is_classifier
from sklearn.pipeline import Pipeline

from ensembles.catalog import Compiled, kind_of
from ensembles.inference.engines import SKLEARN, Answer
from ensembles.inference.fidelity import compare
from ensembles.inference.gtil import (
    ENGINE,
    IMPORT_ERRORS,
    compiled_as,
    import_model,
    import_trees,
    plan_for,
)
from ensembles.inference.nodes import (
    BaggingNode,
    LinearNode,
    LogisticNode,
    NaiveBayesNode,
    Node,
    SklearnNode,
    StackingNode,
    TreesNode,
    UnanswerableError,
    VotingNode,
)
from ensembles.tasks import Task

__all__ = [
    "NUMPY",
    "CompiledComposite",
    "MemberRecord",
    "build",
    "is_composite",
    "quiet_sklearn",
    "restore",
]

NUMPY = "numpy"
FloatArray = NDArray[np.float64]
MemberRecord = dict[str, str]  # name, kind, engine (and reason, when not compiled)


def is_composite(estimator: BaseEstimator) -> bool:
    return compiled_as(estimator) in ("voting", "stacking", "bagging")


# --- building ---------------------------------------------------------------------------


@dataclass
class _Building:
    """What building a composite needs and collects along the way."""

    task: Task
    demoted: frozenset[str]  # members a previous check left to scikit-learn (by name)
    records: list[MemberRecord] = field(default_factory=list)

    def record(self, name: str, estimator: BaseEstimator, engine: str, reason: str = "") -> None:
        entry = {"name": name, "kind": type(estimator).__name__, "engine": engine}
        self.records.append({**entry, "reason": reason} if reason else entry)


def build(
    estimator: BaseEstimator,
    task: Task,
    rows: FloatArray | None,
    demoted: frozenset[str] = frozenset(),
) -> tuple[Node, list[MemberRecord]]:
    """The node tree of a fitted composite, and one record per member (by engine).

    ``rows`` are finite check rows (preprocessed): each numpy member is compared with its
    own estimator on the rows it sees and left to scikit-learn if it differs.  None (at
    load time): members are built as recorded, ``demoted`` naming those left to
    scikit-learn when the version was created.
    """
    building = _Building(task, demoted)
    node = _node(estimator, "", rows, building)
    return node, _grouped(building.records)


def _node(estimator: BaseEstimator, name: str, rows: FloatArray | None, b: _Building) -> Node:
    route = compiled_as(estimator)
    if route == "voting":
        return _voting(estimator, name, rows, b)
    if route == "stacking":
        return _stacking(estimator, name, rows, b)
    if route == "bagging":
        return _bagging(estimator, name, rows, b)
    return _leaf(estimator, name, rows, b)


def _child(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _voting(estimator: BaseEstimator, name: str, rows: FloatArray | None, b: _Building) -> Node:
    names = [n for n, e in estimator.estimators if e != "drop"]
    members = [
        _node(member, _child(name, n), rows, b)
        for n, member in zip(names, estimator.estimators_, strict=True)
    ]
    return VotingNode(estimator, members)


def _stacking(estimator: BaseEstimator, name: str, rows: FloatArray | None, b: _Building) -> Node:
    names = [n for n, e in estimator.estimators if e != "drop"]
    start = len(b.records)
    members: list[tuple[Node, str]] = []
    fitted = zip(names, estimator.estimators_, estimator.stack_method_, strict=True)
    for n, member, method in fitted:
        member_start = len(b.records)
        node = _node(member, _child(name, n), rows, b)
        if not node.supports(method):
            del b.records[member_start:]
            b.record(_child(name, n), member, SKLEARN, f"its {method} is not compiled")
            node = SklearnNode(member)
        members.append((node, method))
    meta = None if rows is None else np.asarray(estimator.transform(rows), dtype=np.float64)
    # Trees are not compiled as a final estimator: their thresholds are in the members'
    # outputs, where the fidelity probes do not reach.
    final_name = _child(name, "final_estimator")
    final = _leaf(estimator.final_estimator_, final_name, meta, b, trees=False)
    fed_approximately = any(m.approximate and method != "predict" for m, method in members)
    if fed_approximately and not _continuous(final, b.task):
        del b.records[start:]
        b.record(
            name or type(estimator).__name__,
            estimator,
            SKLEARN,
            f"its final estimator {type(final.estimator).__name__} could change its answer "
            "with the last bits of compiled members' outputs",
        )
        return SklearnNode(estimator)
    return StackingNode(estimator, members, final)


def _continuous(final: Node, task: Task) -> bool:
    """Does the final estimator's answer (labels: with checked margins) move continuously?"""
    if isinstance(final, LogisticNode | NaiveBayesNode | LinearNode):
        return True
    kind = kind_of(final.estimator)
    return task == "regression" and kind is not None and kind.continuous


def _bagging(estimator: BaseEstimator, name: str, rows: FloatArray | None, b: _Building) -> Node:
    fitted = estimator.estimators_
    features = [np.asarray(f, dtype=np.intp) for f in estimator.estimators_features_]
    if fitted and all(compiled_as(m) == "tree" for m in fitted):
        n_classes = int(estimator.n_classes_) if b.task == "classification" else None
        label = _child(name, f"member_0..member_{len(fitted) - 1}")
        try:
            model = import_trees(
                list(zip(fitted, features, strict=True)), int(estimator.n_features_in_), n_classes
            )
        except IMPORT_ERRORS:
            pass  # member by member below (each with its reason)
        else:
            plan = plan_for(fitted[0], b.task)
            assert not isinstance(plan, str)
            classes = None if n_classes is None else np.arange(n_classes)
            b.record(label, fitted[0], ENGINE)
            return BaggingNode(estimator, [], TreesNode(estimator, model, plan, classes))
    members = [
        (_node(m, _child(name, f"member_{i}"), None if rows is None else rows[:, f], b), f)
        for i, (m, f) in enumerate(zip(fitted, features, strict=True))
    ]
    return BaggingNode(estimator, members)


_NUMPY_NODES: Mapping[Compiled, type[Node]] = {
    "logistic": LogisticNode,
    "naive_bayes": NaiveBayesNode,
    "linear": LinearNode,
}


def _numpy_route(estimator: BaseEstimator) -> Compiled:
    """How its kind says the estimator is compiled, for the task it was fitted for."""
    kind = kind_of(estimator)
    task: Task = "classification" if is_classifier(estimator) else "regression"
    return "none" if kind is None else kind.compiled_for(task)


def _leaf(
    estimator: BaseEstimator,
    name: str,
    rows: FloatArray | None,
    b: _Building,
    *,
    trees: bool = True,
) -> Node:
    """A member that combines nothing: GTIL, numpy, or scikit-learn itself."""
    plan = plan_for(estimator, b.task)
    if trees and not isinstance(plan, str):
        try:
            model = import_model(estimator)
        except IMPORT_ERRORS as exc:
            b.record(name, estimator, SKLEARN, f"treelite cannot import it: {exc}")
            return SklearnNode(estimator)
        b.record(name, estimator, ENGINE)
        classes = getattr(estimator, "classes_", None)
        return TreesNode(estimator, model, plan, None if classes is None else np.asarray(classes))
    route = _numpy_route(estimator)
    lean = _NUMPY_NODES.get(route)
    if lean is None or not _numpy_ready(estimator, route):
        b.record(name, estimator, SKLEARN)
        return SklearnNode(estimator)
    if name in b.demoted:
        b.record(name, estimator, SKLEARN, "recorded: differed from scikit-learn when created")
        return SklearnNode(estimator)
    node = lean(estimator)
    reason = None if rows is None else _differs(node, estimator, rows, b.task)
    if reason is not None:
        b.record(name, estimator, SKLEARN, reason)
        return SklearnNode(estimator)
    b.record(name, estimator, NUMPY)
    return node


def _numpy_ready(estimator: BaseEstimator, route: Compiled) -> bool:
    """Fitted shapes the numpy nodes follow (one output; two or more classes)."""
    if route == "linear":
        return np.ndim(estimator.coef_) == 1 and np.ndim(estimator.intercept_) == 0
    return len(getattr(estimator, "classes_", ())) >= 2


def _differs(node: Node, estimator: BaseEstimator, rows: FloatArray, task: Task) -> str | None:
    """Why the numpy node is not used (its answers on ``rows`` differ), else None."""
    with quiet_sklearn():
        if task == "regression":
            expected = np.asarray(estimator.predict(rows), dtype=np.float64)
            reason, _ = compare(expected, node.values(rows)[0], "predicted values")
            return reason
        labels, proba, unsure = node.both(rows)
        expected_labels = np.asarray(estimator.predict(rows))
        labels = np.where(unsure, expected_labels, labels)  # the caller asks scikit-learn
        expected = np.asarray(estimator.predict_proba(rows), dtype=np.float64)
        assert proba is not None
        reason, _ = compare(expected, proba, "probabilities", expected_labels, labels)
        return reason


def quiet_sklearn() -> Any:
    """scikit-learn without its per-call checks (rows are checked finite beforehand)."""
    return sklearn.config_context(assume_finite=True, skip_parameter_validation=True)


def _grouped(records: list[MemberRecord]) -> list[MemberRecord]:
    """Consecutive bagging members of the same kind and engine (``member_0..member_9``)."""
    out: list[MemberRecord] = []
    last: tuple[str, int] | None = None  # (prefix, index) of the last member grouped
    for record in records:
        here = None if "reason" in record else _bagging_member(record["name"])
        previous = out[-1] if out else None
        if (
            here is not None
            and last is not None
            and previous is not None
            and (here[0], here[1] - 1) == last
            and (previous["kind"], previous["engine"]) == (record["kind"], record["engine"])
        ):
            previous["name"] = f"{previous['name'].split('..')[0]}..member_{here[1]}"
        else:
            out.append(dict(record))
        last = here
    return out


def _bagging_member(name: str) -> tuple[str, int] | None:
    """(prefix, i) for a bagging member's name ``prefix.member_i``, else None."""
    prefix, _, tail = name.rpartition(".")
    if not tail.startswith("member_") or not tail[7:].isdigit():
        return None
    return prefix, int(tail[7:])


# --- the compiled composite -------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class CompiledComposite:
    """A fitted pipeline's voting, stacking or bagging step with its tree members compiled.

    An engine as ``CompiledModel`` is; pickles by re-building from the pipeline.
    """

    name: str  # the engine's name: ENGINE
    task: Task
    kind: str  # scikit-learn class of the ensemble step
    max_rows: int  # requests up to this many rows are faster here than in scikit-learn
    pipeline: Pipeline = field(repr=False)
    root: Node = field(repr=False)
    # Read once: the ensembles' own n_features_in_ costs a check_is_fitted (70 us).
    n_features: int = field(repr=False)
    members: tuple[MemberRecord, ...] = ()

    @property
    def estimator(self) -> BaseEstimator:
        return self.pipeline[-1]

    def __reduce__(self) -> tuple[Any, ...]:
        args = (self.pipeline, self.task, self.max_rows, self.members)
        return (restore, args)

    @property
    def native(self) -> bool:
        """Is every member answered by GTIL or numpy (no scikit-learn call but for ties)?"""
        return all(record.get("engine") != SKLEARN for record in self.members)

    @property
    def rows_apart(self) -> bool:
        """Members of any kind (a linear one's BLAS among them): answered in one call."""
        return False

    def use_for(self, n_rows: int) -> bool:
        """Is this engine the faster one for a request of ``n_rows`` rows?"""
        return n_rows <= self.max_rows

    def answer(self, Xt: NDArray[Any], *, with_proba: bool = False) -> Answer:
        predictions, proba = self._answer(Xt)
        return Answer(predictions, proba if with_proba else None, self.name)

    def predict(self, Xt: ArrayLike) -> NDArray[Any]:
        """Labels (classification) or values (regression), as the estimator's ``predict``."""
        return self._answer(Xt)[0]

    def predict_with_proba(self, Xt: ArrayLike) -> tuple[NDArray[Any], FloatArray | None]:
        """Labels and probabilities (None where the estimator has none) from one pass."""
        if self.task != "classification":
            raise ValueError("probabilities apply to classification only")
        return self._answer(Xt)

    def _answer(self, Xt: ArrayLike) -> tuple[NDArray[Any], FloatArray | None]:
        estimator = self.estimator
        X = np.asarray(Xt, dtype=np.float64)
        expected = self.n_features
        if X.ndim != 2 or X.shape[1] != expected:
            shape = X.shape[1] if X.ndim == 2 else X.shape
            raise ValueError(f"X has {shape} features, but {self.kind} expects {expected}")
        if not np.isfinite(X).all():  # scikit-learn decides (or refuses)
            return _sklearn_answer(estimator, X, self.task)
        try:
            with quiet_sklearn():
                if self.task == "regression":
                    values, unsure = self.root.values(X)
                    answer, proba = np.asarray(values, dtype=np.float64), None
                else:
                    answer, proba, unsure = self.root.both(X)
        except UnanswerableError:
            return _sklearn_answer(estimator, X, self.task)
        if unsure.any():  # too close to call here: scikit-learn's own answer for those rows
            exact, exact_proba = _sklearn_answer(estimator, X[unsure], self.task)
            answer = answer.astype(np.result_type(answer, exact), copy=True)
            answer[unsure] = exact
            if proba is not None and exact_proba is not None:
                proba = proba.copy()
                proba[unsure] = exact_proba
        return answer, proba


def _sklearn_answer(
    estimator: BaseEstimator, X: FloatArray, task: Task
) -> tuple[NDArray[Any], FloatArray | None]:
    if task == "regression":
        return np.asarray(estimator.predict(X), dtype=np.float64), None
    proba = (
        np.asarray(estimator.predict_proba(X), dtype=np.float64)
        if hasattr(estimator, "predict_proba")
        else None
    )
    return np.asarray(estimator.predict(X)), proba


def restore(
    pipeline: Pipeline,
    task: Task,
    max_rows: int,
    members: Sequence[Mapping[str, Any]],
) -> CompiledComposite:
    """The compiled composite of a pipeline, members as ``members`` recorded them."""
    demoted = frozenset(
        str(r["name"]) for r in members if r.get("engine") == SKLEARN and r.get("reason")
    )
    estimator = pipeline[-1]
    root, records = build(estimator, task, None, demoted)
    return CompiledComposite(
        ENGINE,
        task,
        type(estimator).__name__,
        max_rows,
        pipeline,
        root,
        int(estimator.n_features_in_),
        tuple(records),
    )
