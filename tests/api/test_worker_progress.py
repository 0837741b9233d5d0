"""What a training worker records of a job's progress: a stage's last count is never
dropped by the write throttle (the job would read 208/300 until the next stage)."""

from __future__ import annotations

from pathlib import Path

from ensembles.jobs import _Progress
from ensembles.registry import SqlRegistry


def test_a_stages_last_count_is_recorded(tmp_path: Path) -> None:
    registry = SqlRegistry.open(tmp_path / "data", None)
    try:
        job = registry.start_job(registry.submit_job("m", {}).id)
        progress = _Progress(registry, job.id)
        progress(1, 300, "fitting")
        progress(208, 300, "fitting")  # within the write interval: dropped
        progress(300, 300, "fitting")  # the stage's last count: written all the same
        assert registry.get_job(job.id).progress == {"done": 300, "total": 300, "stage": "fitting"}
        progress(0, 1, "evaluating")
        assert registry.get_job(job.id).progress["stage"] == "evaluating"
    finally:
        registry.close()
