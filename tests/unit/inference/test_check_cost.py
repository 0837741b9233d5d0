"""What the compiled engine's verdict at training costs, with its figures unchanged: the
libraries' trees read once, from treelite's field arrays (as its JSON dump gives them);
scikit-learn's side of the check beside the compiled one; the calibration's timings."""

from __future__ import annotations

import threading
from typing import Any

import lightgbm
import numpy as np
import pytest
import treelite
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer

from ensembles.inference import CompiledModel, compile_model, compiling, library_trees
from ensembles.inference.engines import SklearnEngine
from tests.unit.inference.test_library_compiled import (
    _categorical_table,
    compiled_case,
    fitted,
    library,
    table,
)

FIGURES = ("ok", "engine", "reason", "max_abs_diff", "n_rows_checked", "crossover_rows")


def _assert_same_nodes(got: list[Any], expected: list[Any]) -> None:
    assert len(got) == len(expected) > 0
    for ours, dumped in zip(got, expected, strict=True):
        assert ours.float32 == dumped.float32
        for name in ("feature", "threshold", "left", "right", "leaf", "categorical"):
            a, b = getattr(ours, name), getattr(dumped, name)
            assert a.dtype == b.dtype and np.array_equal(a, b), name
        assert np.array_equal(ours.missing_left, dumped.missing_left)


@pytest.mark.parametrize(
    "case",
    [
        "lightgbm-binary",
        "lightgbm-binary-missing",
        "lightgbm-multiclass-wine",
        "lightgbm-huber",
        "xgboost-binary_logistic-missing",
        "xgboost-multi_softprob-iris",
        "xgboost-squarederror",
    ],
)
def test_the_trees_read_from_treelite_s_fields_are_its_json_dump_s(case: str) -> None:
    estimator = fitted(case)[-1]
    route: library_trees.LibraryRoute = "xgboost" if case.startswith("xgboost") else "lightgbm"
    model = library_trees.imported(estimator, route).model
    _assert_same_nodes(library_trees.split_nodes(model), library_trees._dumped_nodes(model))


def _lightgbm_categorical() -> Any:
    X, y = _categorical_table()
    model = library(lightgbm.LGBMClassifier, min_data_per_group=5, cat_smooth=1.0)
    return model.fit(X, y, categorical_feature=[4])


def test_categorical_splits_read_from_the_fields_are_the_dump_s() -> None:
    model = treelite.frontend.from_lightgbm(_lightgbm_categorical().booster_)
    nodes = library_trees.split_nodes(model)
    assert any(t.categorical.any() for t in nodes)
    _assert_same_nodes(nodes, library_trees._dumped_nodes(model))


def _with_infinite_threshold() -> Pipeline:
    """LightGBM on breast_cancer with 15% of two columns missing, unscaled: one of its
    splits sends every value left and missing right, at an infinite threshold."""
    X, y = table("breast_cancer_nan")
    pipeline = Pipeline(
        [("identity", FunctionTransformer()), ("model", library(lightgbm.LGBMClassifier))]
    )
    return pipeline.fit(X, y)


def test_a_lightgbm_model_with_an_infinite_threshold_is_refused_as_before() -> None:
    """treelite's JSON dump cannot write such a model: its import was refused with the JSON
    reader's error, and still is (reading the fields instead is no reason to serve it)."""
    pipeline = _with_infinite_threshold()
    model = treelite.frontend.from_lightgbm(pipeline[-1].booster_)
    assert any(
        not np.isfinite(model.get_tree_accessor(i).get_field("threshold")).all()
        for i in range(model.num_tree)
    )
    engine, report = compile_model(pipeline, "classification", table("breast_cancer_nan")[0])
    assert engine is None and not report.ok
    assert report.reason is not None
    assert report.reason.startswith("treelite cannot import LGBMClassifier: Expecting value")


def test_a_lightgbm_verdict_reads_its_trees_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The import reads the trees (for the categorical columns) and the probes walk the
    same ones: the 500-round LightGBM's trees were read twice (0.3-0.4 s each)."""
    calls: list[int] = []
    read = library_trees.split_nodes

    def counted(model: Any) -> list[library_trees.SplitNodes]:
        calls.append(1)
        return read(model)

    monkeypatch.setattr(library_trees, "split_nodes", counted)
    pipeline = Pipeline([("identity", FunctionTransformer()), ("model", _lightgbm_categorical())])
    _, report = compile_model(pipeline, "classification", _categorical_table()[0], calibrate=False)
    assert report.ok, report.reason
    assert len(calls) == 1


def test_scikit_learn_s_side_of_the_check_answers_beside_the_compiled_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    threads: list[threading.Thread] = []
    answer = SklearnEngine.answer

    def recorded(self: SklearnEngine, Xt: Any, *, with_proba: bool = False) -> Any:
        threads.append(threading.current_thread())
        return answer(self, Xt, with_proba=with_proba)

    monkeypatch.setattr(SklearnEngine, "answer", recorded)
    engine, report = compiled_case("lightgbm-binary")
    assert report.ok and isinstance(engine, CompiledModel)
    assert threads and all(t is not threading.main_thread() for t in threads)


def test_a_failure_of_scikit_learn_s_side_is_the_check_s_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failing(self: SklearnEngine, Xt: Any, *, with_proba: bool = False) -> Any:
        raise RuntimeError("the booster is gone")

    monkeypatch.setattr(SklearnEngine, "answer", failing)
    engine, report = compiled_case("lightgbm-binary")
    assert engine is None and not report.ok
    assert report.reason == "the compiled engine failed on the check rows: the booster is gone"


def test_the_calibration_times_the_compiled_engine_on_256_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GTIL's time is per row: 256 rows place its line (1,024 were most of a 500-round
    LightGBM's calibration); scikit-learn's forests cost per call, timed on 1,024."""
    timed: list[tuple[str, int]] = []
    fastest = compiling._fastest

    def recorded(predict: Any, Xt: Any) -> float:
        side = (
            "compiled" if isinstance(getattr(predict, "__self__", None), CompiledModel) else "own"
        )
        timed.append((side, len(Xt)))
        return fastest(predict, Xt)

    monkeypatch.setattr(compiling, "_fastest", recorded)
    X = table("breast_cancer")[0]
    engine, report = compile_model(fitted("lightgbm-binary"), "classification", X)
    assert report.ok and engine is not None
    assert sorted(timed) == [("compiled", 1), ("compiled", 256), ("own", 1), ("own", 1024)]
    assert 0 <= report.crossover_rows <= 4096


def test_the_verdict_s_figures_are_those_of_a_check_in_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check with scikit-learn's side beside the compiled one gives the figures of the
    same check run one side after the other."""
    X = table("breast_cancer_nan")[0]
    pipeline = fitted("lightgbm-binary-missing")
    beside = compile_model(pipeline, "classification", X, calibrate=False)[1]

    def in_turn(
        compiled: Any,
        rows: Any,
        before_compiled: Any = None,
        fitted: Any = None,
        before_own: Any = None,
    ) -> tuple[str | None, float]:
        return compiling._compared(
            compiled, rows, lambda with_proba: compiling._own(compiled, rows, with_proba)
        )

    monkeypatch.setattr(compiling, "_check", in_turn)
    one_after_other = compile_model(pipeline, "classification", X, calibrate=False)[1]
    figures = [{k: r.as_dict()[k] for k in FIGURES} for r in (beside, one_after_other)]
    assert figures[0] == figures[1] and figures[0]["ok"]
