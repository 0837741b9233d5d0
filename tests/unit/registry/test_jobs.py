"""Jobs: reservation at submit, the status machine, progress, cancellation."""

from __future__ import annotations

import pytest

from ensembles.errors import ConflictError, NotFoundError, SpecError, TrainingCancelledError
from ensembles.registry import SqlRegistry

from .support import publish, temp_files


def test_submit_reserves_a_version_that_stays_invisible(registry: SqlRegistry) -> None:
    job = registry.submit_job("iris", {"target": "y"})
    assert job.id.startswith("job_") and len(job.id) == 28
    assert (job.model, job.version, job.status) == ("iris", 1, "queued")
    assert job.progress == {"done": 0, "total": 0, "stage": "queued"}
    assert job.request == {"target": "y"} and job.error is None
    assert job.started_at is None and job.finished_at is None
    with pytest.raises(NotFoundError):
        registry.get_version("iris", 1)
    assert registry.submit_job("iris", {}).version == 2


def test_status_machine(registry: SqlRegistry) -> None:
    job = registry.submit_job("iris", {})
    running = registry.start_job(job.id)
    assert running.status == "running" and running.started_at is not None
    with pytest.raises(ConflictError):
        registry.start_job(job.id)
    registry.update_progress(job.id, 3, 10, "fitting")
    assert registry.get_job(job.id).progress == {"done": 3, "total": 10, "stage": "fitting"}
    failed = registry.finish_job(job.id, "failed", {"code": "training_failed", "detail": "x"})
    assert failed.status == "failed" and failed.finished_at is not None
    assert failed.error == {"code": "training_failed", "detail": "x"}
    registry.update_progress(job.id, 9, 10, "late")  # ignored once ended
    assert registry.get_job(job.id).progress["done"] == 3
    with pytest.raises(ConflictError):
        registry.finish_job(job.id, "cancelled", None)
    with pytest.raises(ConflictError):
        registry.publish_version(job.id, {}, {})


def test_publishing_needs_a_running_job(registry: SqlRegistry) -> None:
    job = registry.submit_job("iris", {})
    with pytest.raises(ConflictError, match="queued"):
        registry.publish_version(job.id, {}, {})
    assert registry.get_job(job.id).status == "queued"


def test_cancel_a_queued_job_at_once(registry: SqlRegistry) -> None:
    job = registry.submit_job("iris", {})
    cancelled = registry.request_cancel(job.id)
    assert cancelled.status == "cancelled" and cancelled.finished_at is not None
    with pytest.raises(ConflictError):
        registry.start_job(job.id)
    with pytest.raises(ConflictError, match="already ended"):
        registry.request_cancel(job.id)
    assert publish(registry, "iris").version == 2


def test_cancel_a_running_job_before_it_publishes(registry: SqlRegistry) -> None:
    job = registry.submit_job("iris", {})
    registry.start_job(job.id)
    flagged = registry.request_cancel(job.id)
    assert flagged.status == "running" and flagged.cancel_requested
    with pytest.raises(TrainingCancelledError):
        registry.publish_version(job.id, {"w": 1}, {})
    assert registry.get_job(job.id).status == "cancelled"
    assert not registry.store.artifacts.path("iris", 1).exists()
    assert registry.list_models() == []


def test_cancel_arriving_while_the_artifact_is_written(
    registry: SqlRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = registry.submit_job("iris", {})
    registry.start_job(job.id)
    write = registry.store.artifacts.write

    def write_then_cancel(model: str, version: int, value: object):  # type: ignore[no-untyped-def]
        written = write(model, version, value)
        registry.request_cancel(job.id)
        return written

    monkeypatch.setattr(registry.store.artifacts, "write", write_then_cancel)
    with pytest.raises(TrainingCancelledError):
        registry.publish_version(job.id, {"w": 1}, {})
    assert registry.get_job(job.id).status == "cancelled"
    assert not registry.store.artifacts.path("iris", 1).exists()
    assert temp_files(registry.data_dir) == []


def test_a_succeeded_job_cannot_be_cancelled(registry: SqlRegistry) -> None:
    publish(registry, "iris")
    (job,) = registry.list_jobs()
    assert job.status == "succeeded" and job.progress["stage"] == "done"
    with pytest.raises(ConflictError):
        registry.request_cancel(job.id)


def test_list_jobs_filters_and_orders_newest_first(registry: SqlRegistry) -> None:
    a = registry.submit_job("a", {})
    b = registry.submit_job("b", {})
    c = registry.submit_job("a", {})
    registry.start_job(b.id)
    assert [j.id for j in registry.list_jobs()] == [c.id, b.id, a.id]
    assert [j.id for j in registry.list_jobs(status="queued")] == [c.id, a.id]
    assert [j.id for j in registry.list_jobs(status="running", model="b")] == [b.id]
    assert [j.id for j in registry.list_jobs(limit=1)] == [c.id]
    with pytest.raises(SpecError) as raised:
        registry.list_jobs(status="done")
    assert raised.value.problems[0].loc == ("status",)


@pytest.mark.parametrize("job_id", ["job_0000", "nope", ""])
def test_unknown_jobs_are_not_found(registry: SqlRegistry, job_id: str) -> None:
    for call in (
        lambda: registry.get_job(job_id),
        lambda: registry.start_job(job_id),
        lambda: registry.request_cancel(job_id),
        lambda: registry.update_progress(job_id, 1, 2, "x"),
        lambda: registry.finish_job(job_id, "failed", None),
    ):
        with pytest.raises(NotFoundError):
            call()


def test_a_request_that_is_not_json_is_refused(registry: SqlRegistry) -> None:
    with pytest.raises(TypeError, match="not storable as JSON"):
        registry.submit_job("iris", {"x": object()})
    with pytest.raises(NotFoundError):
        registry.get_model("iris")


def test_count_jobs_by_status_names_every_status(registry: SqlRegistry) -> None:
    assert registry.count_jobs_by_status() == {
        "queued": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0,
    }  # fmt: skip
    a = registry.submit_job("a", {})
    registry.submit_job("a", {})
    c = registry.submit_job("b", {})
    registry.start_job(a.id)
    registry.request_cancel(c.id)
    publish(registry, "d")
    assert registry.count_jobs_by_status() == {
        "queued": 1, "running": 1, "succeeded": 1, "failed": 0, "cancelled": 1,
    }  # fmt: skip
