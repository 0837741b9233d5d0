"""Concurrent writers never collide: version numbers and alias moves under contention."""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from ensembles.errors import ConflictError, NotFoundError, TrainingCancelledError
from ensembles.registry import SqlRegistry

from .support import publish, spawn_child

PROCESSES = 8
VERSIONS_EACH = 25


def test_processes_creating_versions_get_distinct_gap_free_numbers(
    tmp_path: Path, database_url: str | None
) -> None:
    # The children also open the fresh folder together: migrations must serialise too.
    data_dir, go_file = tmp_path / "data", tmp_path / "go"
    children = [
        spawn_child(
            "versions",
            str(data_dir),
            "shared",
            str(VERSIONS_EACH),
            str(go_file),
            database_url=database_url,
        )
        for _ in range(PROCESSES)
    ]
    for child in children:  # every child has imported and opened the registry
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "ready", child.communicate()[1]
    started = time.perf_counter()
    go_file.touch()
    outputs = [child.communicate(timeout=300) for child in children]
    elapsed = time.perf_counter() - started

    failures = [err for child, (_, err) in zip(children, outputs, strict=True) if child.returncode]
    assert failures == []
    got = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    numbers = [number for each in got for number in each]
    assert all(len(each) == VERSIONS_EACH and each == sorted(each) for each in got)
    assert sorted(numbers) == list(range(1, PROCESSES * VERSIONS_EACH + 1))

    with SqlRegistry.open(data_dir, database_url) as registry:
        listed = registry.list_versions("shared")
        assert [v.version for v in listed] == list(range(PROCESSES * VERSIONS_EACH, 0, -1))
        jobs = registry.list_jobs(model="shared")
        assert len(jobs) == PROCESSES * VERSIONS_EACH
        assert {job.status for job in jobs} == {"succeeded"}
        loaded = [registry.load_model("shared", v.version) for v in listed[:: VERSIONS_EACH // 5]]
        assert all(isinstance(value, dict) for value in loaded)
    print(
        f"\nconcurrency: {PROCESSES} processes x {VERSIONS_EACH} versions, "
        f"{len(set(numbers))} distinct numbers, 0 errors, {elapsed:.1f} s"
    )


def test_alias_moves_while_other_threads_resolve_it(registry: SqlRegistry) -> None:
    for _ in range(5):
        publish(registry, "moving")
    registry.set_alias("moving", "production", 1)
    stop = threading.Event()
    errors: list[BaseException] = []
    seen: list[int] = []
    moved: list[int] = []  # list.append is atomic; ``+=`` on a shared int is not

    def mover(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(60):
                target = rng.randint(1, 5)
                assert registry.set_alias("moving", "production", target).aliases == {
                    "production": target
                }
                moved.append(target)
        except BaseException as exc:
            errors.append(exc)

    def resolver() -> None:
        try:
            while not stop.is_set():
                seen.append(registry.get_version("moving", "production").version)
                assert registry.get_model("moving").aliases["production"] in range(1, 6)
        except BaseException as exc:
            errors.append(exc)

    movers = [threading.Thread(target=mover, args=(seed,)) for seed in range(3)]
    resolvers = [threading.Thread(target=resolver) for _ in range(4)]
    for thread in resolvers + movers:
        thread.start()
    for thread in movers:
        thread.join()
    stop.set()
    for thread in resolvers:
        thread.join()

    assert errors == []
    assert len(moved) == 180
    assert len(seen) > 0 and set(seen) <= {1, 2, 3, 4, 5}
    print(f"\nalias moves: {len(moved)} moves, {len(seen)} resolutions, 0 errors")


def _race(*workers: Callable[[], None]) -> list[BaseException]:
    """Run ``workers`` in threads released together; what they raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(workers))

    def run(work: Callable[[], None]) -> None:
        try:
            barrier.wait()
            work()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(work,)) for work in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_versions_deleted_while_an_alias_moves_onto_them(registry: SqlRegistry) -> None:
    # Each step is refused cleanly (an alias on it: 409; gone: 404), never a database
    # error, and the alias always ends on a version that exists.
    count = 24
    for _ in range(count):
        publish(registry, "racy")
    order = list(range(1, count + 1))
    random.Random(7).shuffle(order)
    # The alias exists before the race: else deleters scheduled first could remove every
    # version before a mover runs, and the model with them (a flake seen under CI load).
    registry.set_alias("racy", "production", order[0])
    refused: list[str] = []

    def mover(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            try:
                registry.set_alias("racy", "production", rng.randint(1, count))
            except NotFoundError:
                refused.append("gone")

    def deleter(numbers: list[int]) -> None:
        for number in numbers:
            try:
                registry.delete_version("racy", number)
            except ConflictError:
                refused.append("aliased")
            except NotFoundError:
                refused.append("already gone")

    errors = _race(
        lambda: mover(1),
        lambda: mover(2),
        lambda: deleter(order[::2]),
        lambda: deleter(order[1::2]),
    )
    assert errors == []
    target = registry.get_model("racy").aliases["production"]
    assert registry.get_version("racy", "production").version == target


def test_a_model_deleted_while_its_jobs_publish_keeps_no_version(registry: SqlRegistry) -> None:
    # Whichever commits first, a model deleted while its jobs publish has no version
    # left: published before, the delete removes it; after, the job ends cancelled.
    for trial in range(4):
        name = f"doomed-{trial}"
        publish(registry, name)
        running = [registry.submit_job(name, {}) for _ in range(4)]
        for job in running:
            registry.start_job(job.id)

        def publisher(job_id: str) -> None:
            with contextlib.suppress(TrainingCancelledError):
                registry.publish_version(job_id, {"late": True}, {})

        publishers = [partial(publisher, job.id) for job in running]
        errors = _race(*publishers, lambda: registry.delete_model(name))  # noqa: B023
        assert errors == []
        with pytest.raises(NotFoundError):
            registry.get_model(name)
        assert {registry.get_job(job.id).status for job in running} <= {"succeeded", "cancelled"}
