"""A process SIGKILLed while publishing leaves nothing visible and nothing reused.

Each trial starts a child that reserves a version and stops dead at one point of the
publish sequence (see ``children.py``); the parent kills it with SIGKILL there, then
opens the registry as a restarted service would and checks the aftermath. The next
child is started one trial ahead so that its (slow) imports overlap with the current one.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from ensembles.registry import SqlRegistry
from ensembles.registry.sql import INTERRUPTED_RUNNING

from .support import child_line, publish, spawn_child, temp_files

POINTS = [
    "write:1",
    "write:7",
    "write:60",
    "write:180",
    "write:390",
    "fsync-file",
    "replace",
    "fsync-folder",
    "commit",
    "write:2",
]

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def _kill_at_point(child: subprocess.Popen[str], point: str) -> tuple[str, int]:
    try:
        assert child_line(child) == "ready"
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        _, job_id, number = child_line(child).split()
        assert child_line(child) == "at-point", point
        child.send_signal(signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    return job_id, int(number)


def test_sigkill_during_publish_leaves_no_partial_version(
    data_dir: Path, database_url: str | None
) -> None:
    with SqlRegistry.open(data_dir, database_url) as registry:
        first = publish(registry, "crashy", value={"keep": "me"})
    reserved: list[int] = []
    started = time.perf_counter()
    children = [spawn_child("crash", str(data_dir), POINTS[0], database_url=database_url)]
    for trial, point in enumerate(POINTS):
        if trial + 1 < len(POINTS):
            children.append(
                spawn_child("crash", str(data_dir), POINTS[trial + 1], database_url=database_url)
            )
        job_id, number = _kill_at_point(children[trial], point)
        reserved.append(number)
        with SqlRegistry.open(data_dir, database_url) as registry:
            job = registry.get_job(job_id)
            assert job.status == "failed", point
            assert job.error is not None and job.error["detail"] == INTERRUPTED_RUNNING
            assert [v.version for v in registry.list_versions("crashy")] == [first.version]
            assert registry.load_model("crashy", first.version) == {"keep": "me"}
            orphan = registry.store.artifacts.path("crashy", number)
            assert not orphan.exists(), f"{point}: orphaned artifact left behind"
            assert temp_files(data_dir) == [], point
    elapsed = time.perf_counter() - started

    assert reserved == list(range(2, 2 + len(POINTS))), "a reserved number was reused"
    with SqlRegistry.open(data_dir, database_url) as registry:
        after = publish(registry, "crashy")
        assert after.version == 2 + len(POINTS)
        assert [v.version for v in registry.list_versions("crashy")] == [after.version, 1]
        assert registry.check() == {"database": "ok", "artifact_store": "ok"}
    print(f"\ncrash: {len(POINTS)} trials, 0 failures, {elapsed:.1f} s")
