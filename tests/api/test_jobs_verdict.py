"""The engine verdict of a job is worked out beside the measuring (ensembles.engine_verdict):
the check starts once the pipeline is fitted, while the figures are measured; a cancel
while it runs ends the job without waiting for it; its failure fails the job as before.

The job's own code runs in this process (as in test_inference) so that the check and the
measuring can be held at chosen points: ``compiling.plan_for``, the check's first step,
and ``training.explanation_summary``, the measuring's last, are wrapped to signal and
wait on events (no timing: a wait that times out only makes the test fail).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from fastapi import FastAPI

from app.services.training import prepare_job
from app.threads import in_thread
from ensembles import jobs
from ensembles.explain.summary import explanation_summary
from ensembles.inference import ENGINE
from ensembles.inference.gtil import plan_for
from ensembles.parallel import MemberPool
from tests.api.support import Api, forest

WAIT_S = 20.0  # only reached when the test fails
# The check's first step and the measuring's last, as the code under test looks them up.
PLAN_FOR = "ensembles.inference.compiling.plan_for"
EXPLANATION_SUMMARY = "ensembles.training.explanation_summary"


async def _running_job(api: Api, app: FastAPI, model: str) -> str:
    services = app.state.services
    dataset = await api.iris()
    document = await prepare_job(services.registry, services.settings, model, forest(dataset))
    job = await in_thread(services.registry.submit_job, model, document.to_json())
    await in_thread(services.registry.start_job, job.id)
    return str(job.id)


async def _run(app: FastAPI, job_id: str) -> None:
    registry = app.state.services.registry
    await in_thread(jobs.run_training, registry, job_id, MemberPool.local(1), lambda: False)


def _wrap(original: Callable[..., Any], before: Callable[[], None]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        before()
        return original(*args, **kwargs)

    return wrapped


async def test_the_check_starts_before_the_figures_are_measured(
    api: Api, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The explanation summary (the last figure) waits until the check has started:
    run after train(), as before, the check never starts while it waits."""
    job_id = await _running_job(api, app, "beside")
    check_started = threading.Event()
    seen: list[bool] = []
    monkeypatch.setattr(PLAN_FOR, _wrap(plan_for, check_started.set))
    monkeypatch.setattr(
        EXPLANATION_SUMMARY,
        _wrap(explanation_summary, lambda: seen.append(check_started.wait(WAIT_S))),
    )
    await _run(app, job_id)
    assert seen == [True], "the check had not started while the figures were measured"
    assert (await api.job(job_id))["status"] == "succeeded"
    version = (await api.client.get("/v1/models/beside/versions/1")).json()
    assert version["inference"]["ok"] is True and version["inference"]["engine"] == ENGINE
    assert version["metrics"]["explanations"] is not None


async def test_a_cancel_during_the_check_ends_the_job_without_waiting_for_it(
    api: Api, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check asks for the cancel and then stays blocked until the test lets it go:
    the job must end cancelled meanwhile (before, it ended once the check returned)."""
    job_id = await _running_job(api, app, "cancelled-check")
    registry = app.state.services.registry
    release, returned = threading.Event(), threading.Event()

    def blocked_check(estimator: Any, task: Any) -> str:
        registry.request_cancel(job_id)
        release.wait(WAIT_S)
        returned.set()
        return "refused by the test"

    monkeypatch.setattr(PLAN_FOR, blocked_check)
    try:
        await _run(app, job_id)
        assert not returned.is_set(), "the job waited for the check to end"
        job = await api.job(job_id)
        assert job["status"] == "cancelled"
        versions = await api.client.get("/v1/models/cancelled-check/versions/1")
        assert versions.status_code == 404
    finally:
        release.set()


async def test_a_failing_check_fails_the_job_as_before(
    api: Api, app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = await _running_job(api, app, "failed-check")

    def failing_check(estimator: Any, task: Any) -> str:
        raise RuntimeError("the check broke (forced by the test)")

    monkeypatch.setattr(PLAN_FOR, failing_check)
    await _run(app, job_id)
    job = await api.job(job_id)
    assert job["status"] == "failed"
    assert job["error"]["code"] == "internal"
    assert "RuntimeError" in job["error"]["detail"]
    missing = await api.client.get("/v1/models/failed-check/versions/1")
    assert missing.status_code == 404
