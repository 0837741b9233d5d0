"""Damaged or planted artifacts are refused before unpickling; a full disk fails cleanly."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import joblib
import pytest

from ensembles.errors import IntegrityError, StorageError
from ensembles.registry import SqlRegistry, versioning
from ensembles.registry.stores import files

from .support import COLUMNS, artifact_path, parquet_bytes, publish, temp_files


class _Planted:
    """Unpickling this creates ``marker``: stands for any code an attacker would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_one_flipped_byte_is_refused_with_the_version_named(registry: SqlRegistry) -> None:
    publish(registry, "iris")
    record = publish(registry, "iris", value=list(range(1000)))
    path = artifact_path(registry, "iris", record.version)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))

    with pytest.raises(IntegrityError, match=r"model 'iris' version 2 is damaged"):
        registry.load_model("iris", 2)
    with pytest.raises(IntegrityError):
        registry.read_artifact("iris", 2)
    assert registry.load_model("iris", 1) == {"weights": [1.0, 2.0], "model": "iris"}


def test_missing_artifact_is_an_integrity_error(registry: SqlRegistry) -> None:
    publish(registry, "iris")
    artifact_path(registry, "iris", 1).unlink()
    with pytest.raises(IntegrityError, match="model 'iris' version 1 is missing"):
        registry.load_model("iris", 1)


def test_planted_pickle_is_never_unpickled(registry: SqlRegistry, tmp_path: Path) -> None:
    publish(registry, "iris")
    path = artifact_path(registry, "iris", 1)
    marker = tmp_path / "pwned"
    joblib.dump(_Planted(marker), path)  # replaced behind the registry's back

    with pytest.raises(IntegrityError):
        registry.load_model("iris", 1)
    assert not marker.exists()

    # Control: the planted file is a real threat when loaded without the check.
    control = tmp_path / "control"
    joblib.dump(_Planted(control), tmp_path / "control.joblib")
    joblib.load(tmp_path / "control.joblib")
    assert control.exists() and not marker.exists()


@pytest.mark.parametrize("where", ["write", "fsync"])
def test_disk_full_fails_the_job_and_keeps_earlier_versions(
    registry: SqlRegistry, data_dir: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    earlier = publish(registry, "iris", value={"v": 1})
    job = registry.submit_job("iris", {"n": 2})
    registry.start_job(job.id)
    if where == "write":
        real_write, calls = files.HashingWriter.write, [0]

        def write(self: files.HashingWriter, data: Any) -> int:
            calls[0] += 1
            if calls[0] == 3:  # some bytes are already on disk
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return real_write(self, data)

        monkeypatch.setattr(files.HashingWriter, "write", write)
    else:

        def fsync(fd: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "fsync", fsync)

    big = [os.urandom(70_000) for _ in range(5)]
    with pytest.raises(StorageError, match="No space left on device") as raised:
        registry.publish_version(job.id, big, {"task": "regression"})
    assert "model 'iris' version 2" in raised.value.detail
    monkeypatch.undo()

    failed = registry.get_job(job.id)
    assert failed.status == "failed"
    assert failed.error is not None and failed.error["code"] == "storage"
    assert "No space left on device" in str(failed.error["detail"])
    assert [v.version for v in registry.list_versions("iris")] == [earlier.version]
    assert registry.get_version("iris", "latest").version == earlier.version
    assert registry.load_model("iris", earlier.version) == {"v": 1}
    assert temp_files(data_dir) == []
    assert not registry.store.artifacts.path("iris", 2).exists()
    assert publish(registry, "iris").version == 3  # the failed job's number stays used


def test_failed_database_commit_removes_the_artifact(
    registry: SqlRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = registry.submit_job("iris", {})
    registry.start_job(job.id)

    def broken(*args: Any) -> None:
        raise StorageError("registry database error: disk I/O error")

    monkeypatch.setattr(versioning, "insert_version", broken)
    with pytest.raises(StorageError):
        registry.publish_version(job.id, {"a": 1}, {})
    assert registry.get_job(job.id).status == "failed"
    assert not registry.store.artifacts.path("iris", 1).exists()
    with pytest.raises(Exception, match="not found"):
        registry.get_model("iris")


def test_unstorable_metadata_fails_the_job_before_writing(registry: SqlRegistry) -> None:
    job = registry.submit_job("iris", {})
    registry.start_job(job.id)
    with pytest.raises(StorageError, match="not storable as JSON"):
        registry.publish_version(job.id, {"a": 1}, {"metrics": {"log_loss": float("nan")}})
    assert registry.get_job(job.id).status == "failed"
    assert not registry.store.artifacts.path("iris", 1).exists()


def test_tampered_dataset_is_refused(registry: SqlRegistry) -> None:
    record = registry.create_dataset(name="t", parquet=parquet_bytes(), n_rows=3, columns=COLUMNS)
    path = registry.store.datasets.path(record.id)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=record.id):
        registry.read_dataset_parquet(record.id)


def test_readiness_names_a_broken_artifact_store(registry: SqlRegistry, data_dir: Path) -> None:
    assert registry.check() == {"database": "ok", "artifact_store": "ok"}
    (data_dir / "artifacts").rename(data_dir / "elsewhere")
    (data_dir / "artifacts").write_text("not a folder")
    report = registry.check()
    assert report["database"] == "ok"
    assert report["artifact_store"].startswith("cannot write to")
