"""Training on a Dask cluster (ENSEMBLE_DASK_SCHEDULER): a real ``distributed.LocalCluster``
of two worker processes (one thread each) on 127.0.0.1, started and stopped here.

The same job states, progress, cancel, timeout and "a dying worker fails that job only"
as local training, and the same model: a version trained on the cluster answers exactly
as one trained by local worker processes, with the same OOB score.

Dask's nanny sets its workers' variables (``distributed.nanny.pre-spawn-environ``:
``OMP_NUM_THREADS=1``, ``MALLOC_TRIM_THRESHOLD_``, ...) in *this* process's environment
before it starts each worker, and leaves them there. Every process the test process
started afterwards inherited them: a training fork server started after this file ran
its jobs with OpenMP capped at one thread, so a later test's engine check on two threads
failed ("nthread cannot exceed 1 (configured by OpenMP)") and the version was served by
scikit-learn (in a full run, tests/api/test_inference.py and test_observability.py failed
only when they came after this file). The environment is put back as it was after each
cluster starts and after each test (a nanny restarting a killed worker sets it again).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import dask
import numpy as np
import pytest
from distributed import Client, LocalCluster

from app.jobs.cluster import SETTING, DaskExecutor, check_reachable
from app.server.launcher import EXIT_SETTINGS, check_dependencies, load_settings
from app.settings import Settings
from ensembles.catalog import KINDS
from tests.api.conftest import started
from tests.api.support import Api, forest, iris_frame, records
from tests.network import free_port

SLOW = 4000  # trees: many seconds on iris, so there is time to act mid-fit
ENVIRONMENT = dict(os.environ)  # this process's, before any cluster started


@contextlib.contextmanager
def _environment_kept() -> Iterator[None]:
    """Put this process's environment back as it was when the block began (see the
    module's documentation: Dask's nanny leaves its workers' variables in it)."""
    before = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != before:
            os.environ.clear()
            os.environ.update(before)


@pytest.fixture(autouse=True)
def _each_test_keeps_the_environment() -> Iterator[None]:
    with _environment_kept():
        yield


def _cluster(workers: int) -> LocalCluster:
    with _environment_kept():
        return LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        )


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with _cluster(2) as running, _environment_kept():
        yield running


@pytest.fixture
def on_cluster(
    cluster: LocalCluster, settings_for: Callable[..., Settings]
) -> Callable[..., Settings]:
    return lambda **kw: settings_for(dask_scheduler=cluster.scheduler_address, **kw)


def _free_address() -> str:
    return f"tcp://127.0.0.1:{free_port()}"


async def _answers(api: Api, model: str, version: int) -> dict[str, Any]:
    frame = iris_frame()
    features = [c for c in frame.columns if c != "species"]
    body = {"instances": records(frame, features), "options": {"return_proba": True}}
    response = await api.predict(model, version, body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def _running_with_progress(api: Api, job_id: str) -> dict[str, Any]:
    for _ in range(1200):
        job = await api.job(job_id)
        assert job["status"] in ("queued", "running"), job
        if job["status"] == "running" and job["progress"]["done"] > 0:
            return job
        await asyncio.sleep(0.05)
    raise AssertionError("the job made no progress")


def test_a_running_cluster_leaves_this_processs_environment_as_it_was(
    cluster: LocalCluster,
) -> None:
    """What the nanny sets for its workers stays theirs: not in the variables the test
    process (and every process it starts later, a training fork server) has."""
    names = sorted(dask.config.get("distributed.nanny.pre-spawn-environ"))
    assert len(cluster.workers) == 2 and "OMP_NUM_THREADS" in names
    assert {n: os.environ.get(n) for n in names} == {n: ENVIRONMENT.get(n) for n in names}


# ------------------------------------------------------------------- the same model


@pytest.mark.parametrize(
    "ensemble",
    [
        {"kind": "random_forest", "params": {"n_estimators": 40}},
        {"kind": "bagging", "params": {"n_estimators": 30, "max_features": 0.6}},
        # One task per job: LightGBM's rounds on the Dask worker's thread (col-wise
        # histograms: the same model whatever the thread count).
        {"kind": "lightgbm", "params": {"n_estimators": 30, "num_leaves": 7}},
        # CatBoost: the same model whatever its thread count.
        {"kind": "catboost", "params": {"iterations": 30, "depth": 4}},
    ],
    ids=lambda e: e["kind"],
)
async def test_a_version_trained_on_the_cluster_equals_a_local_one(
    cluster: LocalCluster,
    on_cluster: Callable[..., Settings],
    settings_for: Callable[..., Settings],
    ensemble: dict[str, Any],
) -> None:
    versions, answers = [], []
    for settings in (on_cluster(), settings_for()):
        async for app, api in started(settings):
            assert isinstance(app.state.services.runner.executor, DaskExecutor) == (
                settings.dask_scheduler is not None
            )
            body = {**forest(await api.iris()), "ensemble": ensemble}
            version = await api.train("m", body)
            versions.append(version)
            answers.append(await _answers(api, "m", version["version"]))
    dask, local = versions
    assert dask["metrics"]["oob"] == local["metrics"]["oob"]
    assert dask["metrics"]["holdout"] == local["metrics"]["holdout"]
    assert dask["feature_importances"] == local["feature_importances"]
    assert answers[0]["predictions"] == answers[1]["predictions"]
    # Equal models (the figures above are equal to the bit); which engine answers a request
    # (compiled or the library, by a timed crossover) may differ in the last bit.
    np.testing.assert_allclose(
        np.asarray(answers[0]["probabilities"]),
        np.asarray(answers[1]["probabilities"]),
        rtol=0,
        atol=1e-15,
    )
    size = KINDS[ensemble["kind"]].size_param
    assert size is not None
    assert dask["training"]["n_estimators"] == ensemble["params"][size]


async def test_the_members_are_fitted_across_the_workers(
    cluster: LocalCluster, on_cluster: Callable[..., Settings]
) -> None:
    from distributed import get_task_stream

    with Client(cluster.scheduler_address) as client:
        async for _, api in started(on_cluster()):
            dataset = await api.iris()
            with get_task_stream(client) as stream:
                await api.train("m", forest(dataset, n_estimators=300))
            # Each task names the functions it ran: the job, then batches of trees.
            workers = {t["worker"] for t in stream.data if "_parallel_build_trees" in t["key"]}
            assert len(workers) == 2, stream.data[:5]


# --------------------------------------------------------- progress, cancel, timeout


async def test_progress_moves_and_a_cancel_reaches_the_fit(
    on_cluster: Callable[..., Settings],
) -> None:
    async for _, api in started(on_cluster()):
        submitted = (await api.submit("m", forest(await api.iris(), SLOW))).json()
        job = await _running_with_progress(api, submitted["id"])
        assert job["progress"]["stage"] == "fitting" and job["progress"]["total"] == SLOW
        later = job
        for _ in range(200):
            later = await api.job(job["id"])
            if later["progress"]["done"] > job["progress"]["done"]:
                break
            await asyncio.sleep(0.05)
        assert job["progress"]["done"] < later["progress"]["done"] < SLOW
        response = await api.client.post(f"/v1/jobs/{job['id']}/cancel")
        assert response.status_code in (200, 202), response.text
        ended = await api.wait_job(job["id"], timeout=30)
        assert ended["status"] == "cancelled", ended
        assert ended["progress"]["done"] < SLOW  # the fit was aborted, not finished
        assert (await api.client.get("/v1/models/m/versions/1")).status_code == 404


async def test_a_job_over_the_timeout_fails(on_cluster: Callable[..., Settings]) -> None:
    async for _, api in started(on_cluster(job_timeout_s=2.0)):
        job = (await api.submit("m", forest(await api.iris(), SLOW))).json()
        ended = await api.wait_job(job["id"], timeout=60)
        assert ended["status"] == "failed"
        assert ended["error"]["code"] == "timeout"
        assert "ENSEMBLE_JOB_TIMEOUT_S" in ended["error"]["detail"]


# ------------------------------------------------------------- a worker that dies


async def test_a_dying_worker_fails_its_job_only(
    cluster: LocalCluster, on_cluster: Callable[..., Settings]
) -> None:
    async for app, api in started(on_cluster(max_concurrent_jobs=2)):
        dataset = await api.iris()
        doomed = (await api.submit("doomed", forest(dataset, SLOW))).json()
        await _running_with_progress(api, doomed["id"])
        pid = await asyncio.to_thread(app.state.services.runner.worker_pid, doomed["id"])
        assert pid is not None and pid != os.getpid()
        os.kill(pid, signal.SIGKILL)
        ended = await api.wait_job(doomed["id"], timeout=60)
        assert ended["status"] == "failed", ended
        assert ended["error"]["code"] == "worker_crashed"
        assert "Dask worker" in ended["error"]["detail"]
        # The nanny starts a new worker; the cluster and the service go on.
        await asyncio.to_thread(cluster.wait_for_workers, 2, 60)
        version = await api.train("alive", forest(dataset, 20))
        assert version["version"] == 1
        assert (await api.client.get("/readyz")).status_code == 200


# ------------------------------------------------------------ the scheduler is away


def test_an_unreachable_scheduler_at_start_exits_2_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    address = _free_address()
    monkeypatch.setenv(SETTING, address)
    with pytest.raises(SystemExit) as stopped:
        check_dependencies(load_settings())
    assert stopped.value.code == EXIT_SETTINGS
    error = capsys.readouterr().err
    assert error.startswith(f"cannot start: {SETTING}={address}: the Dask scheduler is unreachable")


@pytest.mark.parametrize("value", ["localhost:8786", "http://host:8786", "tcp://host", "tcp://"])
def test_a_bad_scheduler_address_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    monkeypatch.setenv(SETTING, value)
    with pytest.raises(SystemExit) as stopped:
        load_settings()
    assert stopped.value.code == EXIT_SETTINGS
    assert capsys.readouterr().err.startswith(f"invalid setting {SETTING}: {SETTING} is the")


async def test_a_scheduler_lost_at_run_time_makes_readyz_503_naming_it(
    settings_for: Callable[..., Settings],
) -> None:
    cluster = _cluster(1)
    address = cluster.scheduler_address
    assert check_reachable(address) is None
    try:
        async for _, api in started(settings_for(dask_scheduler=address)):
            assert (await api.client.get("/readyz")).status_code == 200
            await asyncio.to_thread(cluster.close)
            response = None
            for _ in range(300):
                response = await api.client.get("/readyz")
                if response.status_code == 503:
                    break
                await asyncio.sleep(0.1)
            assert response is not None and response.status_code == 503, response
            detail = response.json()["detail"]
            assert f"{SETTING}={address}" in detail and "unreachable" in detail
    finally:
        cluster.close()
