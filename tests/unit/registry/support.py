"""Helpers shared by the registry tests (plain functions, importable by child processes)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import ensembles.registry
from ensembles.registry import SqlRegistry, VersionRecord
from ensembles.registry.stores import LocalStore

REPO_ROOT = Path(ensembles.registry.__file__).resolve().parents[2]
CHILDREN = Path(__file__).with_name("children.py")


def parquet_bytes(n_rows: int = 3) -> bytes:
    table = pa.table({"x": list(range(n_rows)), "y": [f"v{i}" for i in range(n_rows)]})
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


COLUMNS: list[dict[str, object]] = [
    {"name": "x", "dtype": "int64", "n_missing": 0, "n_unique": 3},
    {"name": "y", "dtype": "string", "n_missing": 0, "n_unique": 3},
]


def publish(
    registry: SqlRegistry,
    model: str = "iris",
    value: object = None,
    metadata: dict[str, object] | None = None,
) -> VersionRecord:
    """Submit, start and publish one version, as the job runner will."""
    job = registry.submit_job(model, {"dataset_id": "ds_x", "target": "y"})
    registry.start_job(job.id)
    stored = {"weights": [1.0, 2.0], "model": model} if value is None else value
    return registry.publish_version(job.id, stored, metadata or {"task": "classification"})


def artifact_path(registry: SqlRegistry, model: str, version: int) -> Path:
    """Where a visible version's artifact lives in the registry's local store."""
    registry.get_version(model, version)  # visible, or the registry's own error
    store = registry.store
    assert isinstance(store, LocalStore)
    return store.artifacts.path(model, version)


def temp_files(data_dir: Path) -> list[Path]:
    """Temporary files of the stores (any owner)."""
    return sorted(p for p in data_dir.rglob(".*.tmp") if p.is_file())


DATABASE_ENV = "ENSEMBLE_TEST_CHILD_DATABASE_URL"


def spawn_child(*args: str, database_url: str | None = None) -> subprocess.Popen[str]:
    """Run ``children.py`` in a fresh interpreter (no state shared with the test), on
    ``database_url`` (None: SQLite in the data folder given in ``args``)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(CHILDREN.parent)])}
    env.pop(DATABASE_ENV, None)
    if database_url is not None:
        env[DATABASE_ENV] = database_url
    return subprocess.Popen(
        [sys.executable, str(CHILDREN), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def child_line(child: subprocess.Popen[str]) -> str:
    """The next line a child process printed; the test fails (with its stderr) if none."""
    import pytest  # here, not at the top: child processes import this module too

    assert child.stdout is not None
    line = child.stdout.readline().strip()
    if not line:
        child.kill()
        pytest.fail(f"child ended early: {child.communicate()[1]}")
    return line
