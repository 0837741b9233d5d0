"""Concurrent writers never collide: version numbers and alias moves under contention."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

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
