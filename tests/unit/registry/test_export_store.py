"""Exports kept beside an artifact, on both stores (a folder and a real S3 API server):
content-addressed, found by any reader without a database row, verified on read,
removed with their version, and harmless when computed twice at once."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import pytest

from ensembles.errors import IntegrityError
from ensembles.registry import ArtifactStore
from ensembles.registry.stores import StoreConfig, open_store
from ensembles.registry.stores.s3 import S3Store
from tests.s3server import S3Server

OWNER = "0123456789abcdef"
StoreFactory = Callable[[], ArtifactStore]


@pytest.fixture(params=["local", "s3"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """Stores over one place: two of them are two replicas sharing it."""
    if request.param == "local":
        return lambda: open_store(StoreConfig(), tmp_path, OWNER)
    server: S3Server = request.getfixturevalue("s3_server")
    url = f"s3://{server.new_bucket()}/prefix"
    return lambda: open_store(StoreConfig(url=url, endpoint_url=server.endpoint), tmp_path, OWNER)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_an_export_is_found_by_another_reader_with_its_facts(make_store: StoreFactory) -> None:
    one, two = make_store(), make_store()
    one.write_artifact("iris", 1, "model")
    assert two.read_export("iris", 1, "onnx") is None
    written = one.write_export("iris", 1, "onnx", b"graph", {"fidelity": "max_abs_diff=0"})
    assert written.sha256 == sha(b"graph") and written.size == 5
    found = two.read_export("iris", 1, "onnx")
    assert found is not None
    info = {"fidelity": "max_abs_diff=0"}
    assert (found.data, found.sha256, found.info) == (b"graph", sha(b"graph"), info)
    assert two.read_export("iris", 1, "skops") is None  # per format
    assert two.read_export("iris", 2, "onnx") is None  # per version
    assert list(two.stored_artifacts()) == [("iris", 1)]  # exports are not artifacts


def test_two_computations_at_once_leave_one_answer_for_every_reader(
    make_store: StoreFactory,
) -> None:
    one, two = make_store(), make_store()
    one.write_artifact("iris", 1, "model")
    one.write_export("iris", 1, "skops", b"made by one", {})
    two.write_export("iris", 1, "skops", b"made by two", {})
    two.write_export("iris", 1, "skops", b"made by two", {})  # the same bytes again: quiet
    smallest = min([b"made by one", b"made by two"], key=sha)
    for reader in (one, two, make_store()):
        found = reader.read_export("iris", 1, "skops")
        assert found is not None and found.data == smallest


def test_exports_go_with_their_version(make_store: StoreFactory) -> None:
    store = make_store()
    for version in (1, 2):
        store.write_artifact("iris", version, "model")
        store.write_export("iris", version, "onnx", b"graph %d" % version, {})
    store.remove_artifact("iris", 1)
    assert store.read_export("iris", 1, "onnx") is None
    kept = store.read_export("iris", 2, "onnx")
    assert kept is not None and kept.data == b"graph 2"


def test_a_damaged_export_is_never_served(make_store: StoreFactory, tmp_path: Path) -> None:
    store = make_store()
    store.write_artifact("iris", 1, "model")
    store.write_export("iris", 1, "onnx", b"graph", {})
    name = f"{sha(b'graph')}.onnx"
    if isinstance(store, S3Store):
        key = f"{store.keys.exports_folder('iris', 1)}{name}"
        store._client.put_object(Bucket=store.bucket, Key=key, Body=b"graft")
    else:
        (path,) = (tmp_path / "artifacts").glob(f"*/1.exports/{name}")
        path.write_bytes(b"graft")
    with pytest.raises(IntegrityError, match="export of model 'iris' version 1 is damaged"):
        store.read_export("iris", 1, "onnx")


def test_format_names_never_reach_a_path(make_store: StoreFactory) -> None:
    store = make_store()
    store.write_artifact("iris", 1, "model")
    for bad in ("../x", "ONNX", "", "a/b"):
        with pytest.raises(ValueError, match="invalid export format"):
            store.write_export("iris", 1, bad, b"x", {})
