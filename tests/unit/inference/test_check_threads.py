"""The compiled engine's check at training on the job's threads: GTIL answers each row
alike on any number of threads, so the verdict's figures are the same as on one, and the
engine it hands on serves with one."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from ensembles.inference import CompiledModel, compile_model, gtil
from tests.unit.inference.test_compiled import dataset, fitted

FIGURES = ("ok", "engine", "reason", "max_abs_diff", "n_rows_checked")


@pytest.mark.parametrize(
    ("kind", "name"), [("random_forest", "wine"), ("gradient_boosting", "diabetes")]
)
def test_the_check_on_two_threads_gives_one_thread_s_verdict(kind: str, name: str) -> None:
    model = fitted(kind, name)
    task, X = model.signature.task, dataset(name).X
    one = compile_model(model.pipeline, task, X, calibrate=False)
    two = compile_model(model.pipeline, task, X, calibrate=False, threads=2)
    assert isinstance(two[0], CompiledModel) and two[0].threads == 1
    on_one, on_two = ({k: r.as_dict()[k] for k in FIGURES} for _, r in (one, two))
    assert on_two["engine"] is not None and on_one == on_two


def test_gtil_on_two_threads_answers_as_on_one() -> None:
    model = fitted("random_forest", "wine")
    engine = compile_model(model.pipeline, "classification", dataset("wine").X, calibrate=False)[0]
    assert isinstance(engine, CompiledModel)
    rows = np.asarray(model.pipeline[:-1].transform(dataset("wine").X), dtype=np.float64)
    one = gtil.gtil_scores(engine.model, rows, engine.plan)
    np.testing.assert_array_equal(gtil.gtil_scores(engine.model, rows, engine.plan, 2), one)


def test_the_check_under_an_openmp_limit_of_one_thread_keeps_the_verdict() -> None:
    """A service started with ``OMP_NUM_THREADS=1`` (a container's setting, or Dask's
    nanny's) had GTIL refuse the check's two threads and every tree model served by
    scikit-learn; the check now asks for no more threads than OpenMP allows."""
    model = fitted("random_forest", "wine")
    X = dataset("wine").X
    one = compile_model(model.pipeline, "classification", X, calibrate=False)
    with threadpool_limits(1, user_api="openmp"):
        assert gtil.openmp_threads() == 1
        two = compile_model(model.pipeline, "classification", X, calibrate=False, threads=2)
    assert isinstance(two[0], CompiledModel) and two[1].ok
    on_one, on_two = ({k: r.as_dict()[k] for k in FIGURES} for _, r in (one, two))
    assert on_one == on_two
