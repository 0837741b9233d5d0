"""The registry on an object store (a real S3 API server): publishing, crashes, tampering.

Object stores have no rename: a version becomes visible only in the transaction that
records its object's sha256, readers build the key from that sha256, and whatever a
crash leaves unreferenced is swept once it is older than the grace period.
"""

from __future__ import annotations

import io
import signal
from pathlib import Path
from typing import Any

import joblib
import pytest

from ensembles.errors import IntegrityError, NotFoundError, StorageError
from ensembles.registry import SqlRegistry
from ensembles.registry.sql import INTERRUPTED_RUNNING
from ensembles.registry.stores import StoreConfig
from ensembles.registry.stores.location import parse_s3_url
from ensembles.registry.stores.s3 import S3Store
from tests.s3server import S3Server

from .support import COLUMNS, child_line, parquet_bytes, publish, spawn_child

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


def _keys(server: S3Server, config: StoreConfig) -> list[str]:
    location = parse_s3_url(str(config.url))
    listing = server.client().list_objects_v2(Bucket=location.bucket, Prefix=location.prefix)
    return sorted(item["Key"] for item in listing.get("Contents", []))


def _uploads(server: S3Server, config: StoreConfig) -> list[str]:
    bucket = parse_s3_url(str(config.url)).bucket
    return [
        u["Key"] for u in server.client().list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    ]


def _open(data_dir: Path, config: StoreConfig, grace_s: float | None = None) -> SqlRegistry:
    if grace_s is not None:
        config = StoreConfig(url=config.url, endpoint_url=config.endpoint_url, grace_s=grace_s)
    return SqlRegistry.open(data_dir, None, config)


def test_versions_and_datasets_live_in_the_bucket_under_content_keys(
    data_dir: Path, s3_store: StoreConfig, s3_server: S3Server
) -> None:
    with _open(data_dir, s3_store) as registry:
        assert isinstance(registry.store, S3Store)
        record = publish(registry, "iris", value={"w": [1, 2]})
        dataset = registry.create_dataset(
            name="t", parquet=parquet_bytes(), n_rows=3, columns=COLUMNS
        )
        keys = _keys(s3_server, s3_store)
        assert any(k.endswith(f"/1/{record.artifact_sha256}.joblib") for k in keys)
        assert any(k.endswith(f"{dataset.id}/{dataset.sha256}.parquet") for k in keys)
        assert registry.load_model("iris", 1) == {"w": [1, 2]}
        assert registry.read_dataset_parquet(dataset.id) == parquet_bytes()
        registry.delete_version("iris", 1)
        registry.delete_dataset(dataset.id)
        assert _keys(s3_server, s3_store) == []
        with pytest.raises(NotFoundError):
            registry.load_model("iris", 1)
    assert not (data_dir / "artifacts").exists() and not (data_dir / "datasets").exists()


def test_a_deleted_model_takes_its_objects_along(
    data_dir: Path, s3_store: StoreConfig, s3_server: S3Server
) -> None:
    with _open(data_dir, s3_store) as registry:
        publish(registry, "gone")
        publish(registry, "gone")
        kept = publish(registry, "kept")
        registry.delete_model("gone")
        assert [k.split("/")[2].split("--")[0] for k in _keys(s3_server, s3_store)] == ["kept"]
        assert registry.load_model("kept", kept.version) is not None


def _tamper(server: S3Server, config: StoreConfig, suffix: str, body: bytes) -> None:
    bucket = parse_s3_url(str(config.url)).bucket
    (key,) = [k for k in _keys(server, config) if k.endswith(suffix)]
    server.client().put_object(Bucket=bucket, Key=key, Body=body)


class _Planted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.touch, (self.marker,))


def test_a_replaced_object_is_refused_and_never_unpickled(
    data_dir: Path, s3_store: StoreConfig, s3_server: S3Server, tmp_path: Path
) -> None:
    with _open(data_dir, s3_store) as registry:
        record = publish(registry, "iris")
        marker = tmp_path / "pwned"
        planted = io.BytesIO()
        joblib.dump(_Planted(marker), planted)
        _tamper(s3_server, s3_store, f"{record.artifact_sha256}.joblib", planted.getvalue())
        with pytest.raises(IntegrityError, match="model 'iris' version 1 is damaged"):
            registry.load_model("iris", 1)
        with pytest.raises(IntegrityError):
            registry.read_artifact("iris", 1)
        assert not marker.exists()

        dataset = registry.create_dataset(name="t", parquet=parquet_bytes(), n_rows=3, columns=[])
        _tamper(s3_server, s3_store, ".parquet", parquet_bytes(4))
        with pytest.raises(IntegrityError, match=f"dataset '{dataset.id}' is damaged"):
            registry.read_dataset_parquet(dataset.id)


def test_a_missing_bucket_fails_at_open_naming_it(data_dir: Path, s3_server: S3Server) -> None:
    config = StoreConfig(url="s3://no-such-bucket/x", endpoint_url=s3_server.endpoint)
    with pytest.raises(StorageError, match="bucket 'no-such-bucket' does not exist"):
        SqlRegistry.open(data_dir, None, config)


def test_an_unreachable_store_is_a_quick_storage_error_and_fails_readiness(
    data_dir: Path, tmp_path: Path
) -> None:
    with S3Server(tmp_path / "own") as server:
        config = StoreConfig(url=f"s3://{server.new_bucket()}", endpoint_url=server.endpoint)
        registry = _open(data_dir, config)
        publish(registry, "iris")
    try:  # the server is gone now
        with pytest.raises(StorageError, match=r"the object store s3://test-\w+ at http"):
            registry.load_model("iris", 1)
        check = registry.check()
        assert check["database"] == "ok"
        assert check["artifact_store"].startswith("cannot write to the object store s3://")
        job = registry.submit_job("iris", {})
        registry.start_job(job.id)
        with pytest.raises(StorageError):
            registry.publish_version(job.id, {"x": 1}, {})
        assert registry.get_job(job.id).status == "failed"
        assert [v.version for v in registry.list_versions("iris")] == [1]
    finally:
        registry.close()


# ---------------------------------------------------------------------- crashes

POINTS = ["part", "uploaded", "commit", "dataset"]


def test_a_crash_between_upload_and_publish_leaves_nothing_visible_and_is_swept(
    data_dir: Path, s3_store: StoreConfig, s3_server: S3Server
) -> None:
    with _open(data_dir, s3_store) as registry:
        first = publish(registry, "crashy", value={"keep": "me"})
    url, endpoint = str(s3_store.url), str(s3_store.endpoint_url)
    children = {
        point: spawn_child("s3crash", str(data_dir), url, endpoint, point) for point in POINTS
    }
    jobs: dict[str, str] = {}
    try:
        for child in children.values():
            assert child_line(child) == "ready"
        for point, child in children.items():  # one at a time: each stops at its point
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
            jobs[point] = child_line(child).split()[1]
            assert child_line(child) == "at-point", point
            child.send_signal(signal.SIGKILL)
            assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
            child.communicate()

    # What the crashes left: complete objects nobody refers to, an unfinished upload.
    keys = _keys(s3_server, s3_store)
    assert len([k for k in keys if "/crashy--" in k]) == 3  # first + "uploaded" + "commit"
    assert len([k for k in keys if "/datasets/" in k]) == 1
    assert len(_uploads(s3_server, s3_store)) == 1

    with _open(data_dir, s3_store) as registry:  # a restart; the default grace period
        assert [v.version for v in registry.list_versions("crashy")] == [first.version]
        assert registry.list_datasets() == []
        for point in ("part", "uploaded", "commit"):
            job = registry.get_job(jobs[point])
            assert job.status == "failed" and job.error is not None, point
            assert job.error["detail"] == INTERRUPTED_RUNNING
        # Versions of ended jobs are removed at once; young datasets and uploads wait.
        assert [k for k in _keys(s3_server, s3_store) if "/crashy--" in k] == [
            k for k in keys if f"/{first.version}/{first.artifact_sha256}" in k
        ]
        assert len([k for k in _keys(s3_server, s3_store) if "/datasets/" in k]) == 1
        assert len(_uploads(s3_server, s3_store)) == 1

    with _open(data_dir, s3_store, grace_s=0.0) as registry:  # later: past the grace period
        assert [k for k in _keys(s3_server, s3_store) if "/datasets/" in k] == []
        assert _uploads(s3_server, s3_store) == []
        assert registry.load_model("crashy", first.version) == {"keep": "me"}
        again = publish(registry, "crashy")
        assert again.version == first.version + 4  # reserved numbers are never reused


def test_credentials_in_an_endpoint_url_never_reach_messages() -> None:
    store = S3Store(parse_s3_url("s3://bucket/p"), "0" * 16, "http://key:secret@minio:9000")
    assert store.location == "the object store s3://bucket/p at http://minio:9000"
    assert "secret" not in store.location
