"""What a kind is: its classes, parameters, and the traits the library reads instead of
switching on kind names or classes."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ensembles.catalog.params import Param
from ensembles.specs import EstimatorSpec
from ensembles.tasks import TASKS, Task

Slot = Literal["estimator", "estimators", "final_estimator"]

# How a fitted ensemble's members are walked: ``named`` estimators_ beside their names
# (voting, stacking); ``bagged`` estimators_ with their feature subsets and drawn rows;
# ``trees`` estimators_ with their bootstrap rows; ``boosted`` estimators_ predicting raw
# labels (AdaBoost); ``none``: no member predicts on its own (gradient boosting, bases).
# ``bites``: named members fitted on small bites of rows (pasting_votes), walked as
# ``named`` once fitted but scored as a homogeneous crowd.
MemberWalk = Literal["named", "bagged", "trees", "boosted", "bites", "none"]
# The rows each member is fitted on: the ensemble's own (``same``), ``max_samples`` drawn
# per member (``drawn``), every row reweighted (``weighted``), or stacking's ``cv`` folds
# for its named members (``folds``; the final estimator sees the ensemble's rows).
# ``bites``: ``rows_param`` rows per member (pasting_votes).
MemberRows = Literal["same", "drawn", "weighted", "folds", "bites"]
# How fitting reports progress: one ``fit``; one fit of ``size_param`` ``members`` fitted
# in parallel and counted as they finish (ensembles.parallel); or gradient boosting's
# per-stage ``monitor`` hook. ``own``: the service's own algorithm (ensembles.kinds),
# fitted with a ``monitor``. ``rounds``: a boosting library's rounds, fitted by the kind's
# ``fit_rounds`` (its callbacks report each round and stop on cancel).
Growth = Literal["once", "members", "monitor", "own", "rounds"]
# Where OOB figures come from: the members' own out-of-bag rows (``members``), the same
# with scikit-learn's ``oob_decision_function_`` / ``oob_prediction_`` for the final value
# (``forest``), the per-stage ``oob_scores_`` of subsampled boosting (``stages``), none.
# ``own``: the out-of-bag tallies the service's own algorithm kept while fitting.
OobSource = Literal["members", "forest", "stages", "own", "none"]
# Where the score curve comes from: OOB scores as members are added, scores after each
# boosting stage (``staged_predict``), or none.
CurveSource = Literal["oob", "stages", "none"]

SpecCheck = Callable[[EstimatorSpec], list[tuple[tuple[str | int, ...], str]]]

# What consumers of a FITTED model ask (inference, science, reports, explanations).  Kinds
# fitted as the same class (the bagging family; voting and the own kinds that become it)
# answer alike: tests/unit/test_kind_traits.py holds them to it.
#
# How the members' outputs make the model's: their (weighted) ``mean`` of probabilities
# or values; ``soft_mean``: the same under soft voting, a count of labels under hard
# voting (regression: always the mean); ``sum`` of raw scores (gradient boosting, plus
# its initial score); ``vote_or_median``: weighted votes (SAMME) or a weighted median
# (AdaBoost.R2); ``final_estimator`` fed their outputs (stacking); ``none``: no members.
Combination = Literal["mean", "soft_mean", "sum", "vote_or_median", "final_estimator", "none"]
# How a classifier's labels follow from its scores, so an engine computes both at once:
# ``predict`` (ask it); ``argmax``: scikit-learn's own ``predict`` is the first maximum of
# ``predict_proba``; ``argmax_if_soft``: the same under soft voting; ``stacked``: the
# final estimator on the members' outputs; ``raw_ge`` / ``raw_gt``: boosting's raw scores
# (binary: raw >= 0 or raw > 0; else their first maximum).
LabelRule = Literal["predict", "argmax", "argmax_if_soft", "stacked", "raw_ge", "raw_gt"]
# How the compiled engine takes the fitted model: one treelite model (``forest``,
# ``boosting``, ``histogram``, ``tree``), member by member (``voting``, ``stacking``,
# ``bagging``: a composite), as a member in numpy (``logistic``, ``naive_bayes``,
# ``linear``), or not at all (``none``: scikit-learn answers).  ``xgboost``, ``lightgbm``:
# one treelite model read from the library's booster, answered as the library computes
# (ensembles.inference.library_trees); CatBoost is ``none`` (its own predictor answers).
Compiled = Literal[
    "forest",
    "boosting",
    "histogram",
    "tree",
    "voting",
    "stacking",
    "bagging",
    "logistic",
    "naive_bayes",
    "linear",
    "xgboost",
    "lightgbm",
    "none",
]
# Where feature importances come from: the fitted model's own ``feature_importances_``
# (``estimator``), the mean of its members' (``members_mean``, each on the columns it
# was fed), or nowhere (``none``).  Read from the spec's kind: pasting_votes averages its
# members' though it is fitted as a vote.
Importances = Literal["estimator", "members_mean", "none"]
# The ``metrics.hardest_rows`` block (or why not) from the fitted model, its training
# rows (preprocessed, in order), their targets and their rows in the uploaded table.
HardestRows = Callable[[Any, Any, Any, Any], tuple[dict[str, Any] | None, str | None]]
# Why the fitted model has fewer members than asked (None: it has them all).
StopNote = Callable[[Any], str | None]
# Curves the fitted model carries about its own fit, in the shape of
# ``ensembles.reports.Curve`` (adaboost_mh: training Hamming loss and prod Z_t per round).
FittedCurves = Callable[[Any], list[dict[str, Any]]]
# How ensembles.explain attributes a fitted model's output to its input columns:
# ``tree_shap`` (exact TreeSHAP of its trees), ``weighted_sum`` (the weighted sum of its
# members' explanations, as its ``combination`` adds their outputs), ``linear`` (exact,
# coefficient times the distance from the reference row), ``permutation`` (the sampling
# fallback).  A callable ``(fitted, Xt, output)`` -> ``ensembles.explain.attribution.
# Attribution`` or None is a library's own exact method (XGBoost's ``pred_contribs``...).
ExplainMethod = Literal["tree_shap", "weighted_sum", "linear", "permutation"]
Explain = ExplainMethod | Callable[[Any, Any, Any], Any]
# The space of a classifier's explanation at the top of a model: its (weighted mean of)
# probabilities, or the raw scores boosting adds before its link.
ExplainSpace = Literal["probability", "margin"]
# A classifier's raw scores (n, k) where it has no ``decision_function`` (the boosting
# libraries): what a ``margin`` explanation is checked against.
RawScores = Callable[[Any, Any], Any]
# The spec's parameters as the estimator's constructor takes them (task, params).
EstimatorParams = Callable[[Task, dict[str, Any]], dict[str, Any]]
# The parameters telling the estimator which of its ``n`` input columns hold category
# codes (positions, n).
CategoricalParams = Callable[[list[int], int], dict[str, Any]]


class RoundsFit(Protocol):
    """Fits a library's rounds: (estimator, rows, labels, the spec's params, threads,
    on_round(done, total) -> stop?) -> what the fit measured (``OwnReport``); ``keep``
    (``boosting_library.Keep``): keep the library's own answers on the rows where it can
    (``OwnReport.answers``)."""

    def __call__(
        self,
        estimator: Any,
        X: Any,
        y: Any,
        params: dict[str, Any],
        threads: int,
        on_round: Callable[[int, int], bool] | None,
        /,
        keep: Any = None,
    ) -> Any: ...


@dataclass(frozen=True)
class Library:
    """The third-party library a kind's estimator comes from, and the extra installing it."""

    module: str
    distribution: str
    extra: str

    def installed(self) -> bool:
        try:
            importlib.import_module(self.module)
        except ImportError:
            return False
        return True

    def missing_message(self, kind: str) -> str:
        return (
            f"'{kind}' needs the {self.distribution} library, which this service lacks: "
            f"install the '{self.extra}' extra (pip install 'ensemble-service[{self.extra}]')"
        )


@dataclass(frozen=True)
class Stages:
    """A fitted boosting model's rounds: how many it kept, and its answers after the first
    k of them for each k of an increasing list (the library's own staged prediction), for
    the score curve."""

    count: Callable[[Any], int]
    predict: Callable[[Any, Any, list[int]], list[Any]]
    # The same staged answers and the model's final ones (``predict_proba`` of a
    # classifier, ``predict`` of a regressor, the same bits) from one walk of the trees,
    # when the library can give both for the price of one (LightGBM: lightgbm_pass).
    answers: Callable[[Any, Any, list[int]], Any] | None = None


@dataclass(frozen=True)
class MemberNeed:
    """What the members in one slot must offer, so a spec that cannot fit is refused early.

    ``when`` (parameter, values) limits the need to those parameter values; ``method`` is a
    method each member must have (None: the parameter's value names it); ``fit_param`` a
    parameter each member's ``fit`` must take; ``labels``: each classifier member must
    answer one label per row (``Kind.column_labels`` does not).  ``message`` is formatted
    with ``member`` (the member's kind) and ``method``.
    """

    slot: Slot
    message: str
    when: tuple[str, tuple[Any, ...]] | None = None
    method: str | None = None
    fit_param: str | None = None
    labels: bool = False


@dataclass(frozen=True)
class Kind:
    """One kind a spec may name: what a user may set, and the traits the library reads."""

    name: str
    family: Literal["ensemble", "base"]
    description: str
    classes: Mapping[Task, type]
    params: tuple[Param, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    slots: tuple[Slot, ...] = ()
    votes: bool = False  # made of voting members (per-request voting override, votes, std)
    # The parameter choosing hard or soft voting (None: members' probabilities decide).
    voting_param: str | None = None
    # The parameter counting the members fitted (None: one fit, or its named members).
    size_param: str | None = None
    # Members filled in when a spec leaves a slot empty, per task.
    default_estimator: Mapping[Task, EstimatorSpec] = field(default_factory=dict)
    default_final_estimator: Mapping[Task, EstimatorSpec] = field(default_factory=dict)
    members: MemberWalk = "none"
    member_rows: MemberRows = "same"
    member_needs: tuple[MemberNeed, ...] = ()
    growth: Growth = "once"
    oob: OobSource = "none"
    curve: CurveSource = "none"
    native_missing: bool = False  # takes NaN itself: numeric columns are never imputed
    native_categorical: bool = False  # takes ordinal codes of categories itself
    # Categorical columns with more categories are one-hot encoded (None: no limit).
    native_max_categories: int | None = 255
    # Takes the codes as ints (an object matrix), missing and unseen categories as -1
    # (CatBoost refuses floats and NaN among its categories); else float codes, NaN.
    integer_categories: bool = False
    # How the estimator is told where the codes are (None: ``categorical_features``).
    categorical_params: CategoricalParams | None = None
    # The spec's parameters as the constructor takes them (None: as they are).
    estimator_params: EstimatorParams | None = None
    # Parameters only the service's own fit reads (growth ``rounds``): set only at the
    # top level, where the service fits the kind itself.
    top_level_params: frozenset[str] = frozenset()
    fit_rounds: RoundsFit | None = None
    # The constructor parameter counting the library's threads: the job's while the
    # service fits and measures it, one in the stored model (its answers in one thread).
    threads_param: str | None = None
    # Its fitted model's answer for a row reads that row alone and, stored with one thread,
    # is computed in the calling thread: a big request may be answered in parts on several
    # threads with the same bits (ensembles.inference.row_parts).
    rows_apart: bool = False
    stages: Stages | None = None
    # Its multiclass ``predict`` answers a column of labels (CatBoost): the service reads
    # them flattened; scikit-learn's hard voting and AdaBoost, which count them, refuse it.
    column_labels: bool = False
    # Classes its fitted models may also hold, read by ``kind_of`` only: what versions
    # stored before its class changed hold (XGBoost's own classifier).
    also_fitted_as: Mapping[Task, type] = field(default_factory=dict)
    # A third-party library the estimator needs (None: scikit-learn's or the service's).
    library: Library | None = None
    # A boolean parameter that, when true, wraps the estimator in CalibratedClassifierCV
    # instead of reaching it (svm's probability, deprecated by scikit-learn 1.9).
    calibrate_param: str | None = None
    tuple_params: frozenset[str] = frozenset()  # JSON lists scikit-learn wants as tuples
    # A parameter counting training rows, which must not exceed the rows of its fit.
    rows_param: str | None = None
    # The service's own algorithms (ensembles.kinds): the scikit-learn class the fitted
    # model becomes in the artifact, per task.  Such a kind stands only at the top of a
    # spec (nested, its own class would reach the artifact).
    becomes: Mapping[Task, type] = field(default_factory=dict)
    # Checks of a resolved spec the parameter bounds cannot express, as (path relative to
    # the spec, message) pairs; run once its own parameters are valid.
    spec_check: SpecCheck | None = None
    # Traits of the fitted model (see ``Combination`` and below).
    combination: Combination = "none"
    labels: LabelRule = "predict"
    compiled: Compiled = "none"
    compiled_by_task: Mapping[Task, Compiled] = field(default_factory=dict)
    # Its answer moves continuously with its inputs (a stacking final estimator fed
    # compiled members' last-bit differences stays within 1e-9): regression only.
    continuous: bool = False
    importances: Importances = "none"
    hardest_rows: HardestRows | None = None
    stop_note: StopNote | None = None
    fitted_curves: FittedCurves | None = None
    # Distributions beyond scikit-learn's stack that loading its fitted model needs where
    # its own class (one of this package's) is in the artifact: the version's lineage
    # gives their versions.
    libraries: tuple[str, ...] = ()
    # Plots only this kind's versions have (ensembles.plots.catalog names them).
    own_plots: tuple[str, ...] = ()
    explain: Explain = "permutation"
    explain_space: ExplainSpace = "probability"
    raw_scores: RawScores | None = None

    def compiled_for(self, task: Task) -> Compiled:
        return self.compiled_by_task.get(task, self.compiled)

    def combines_linearly(self, fitted: Any) -> bool:
        """Is the fitted model's output a weighted sum of its members' outputs
        (probabilities or values; raw scores plus the initial score for boosting)?"""
        if self.combination == "soft_mean":
            return getattr(fitted, "voting", "soft") == "soft"
        return self.combination in ("mean", "sum")

    @property
    def tasks(self) -> tuple[Task, ...]:
        return tuple(t for t in TASKS if t in self.classes)

    @property
    def leaves_rows_out(self) -> bool:
        """Can a fit of this kind leave rows out of its members' training (an OOB estimate,
        an OOB curve)? Never without an OOB source, nor when the fixed parameters give every
        member every row (random_subspace): a note on such a kind would explain nothing."""
        every_row = self.fixed.get("bootstrap") is False and self.fixed.get("max_samples") == 1.0
        return self.oob != "none" and not every_row

    @property
    def predicts_out_of_fold(self) -> bool:
        """Are its members scored out of fold: stacking always, voting (named members on
        the same rows) with evaluation.cv_folds."""
        return self.members == "named" and not self.becomes

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def params_for(self, task: Task) -> tuple[Param, ...]:
        return tuple(p for p in self.params if task in p.tasks)

    def json_schema(self, task: Task) -> dict[str, Any]:
        params = self.params_for(task)
        return {
            "type": "object",
            "additionalProperties": False,
            "properties": {p.name: p.json_schema(task) for p in params},
        }

    def as_catalog_entry(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "family": self.family,
            "description": self.description,
            "tasks": list(self.tasks),
            "estimator_slots": list(self.slots),
            "supports_voting_override": self.votes,
            "fixed_params": dict(self.fixed),
            "sklearn_classes": {t: c.__name__ for t, c in (self.becomes or self.classes).items()},
            "top_level_only": bool(self.becomes),
            "params": {t: self.json_schema(t) for t in self.tasks},
            **({"library": self._library_entry()} if self.library else {}),
        }

    def _library_entry(self) -> dict[str, Any]:
        assert self.library is not None
        lib = self.library
        return {"name": lib.distribution, "extra": lib.extra, "installed": lib.installed()}
