"""The ``ArtifactStore`` contract, run against both stores: the local folder and a real
S3 API server (moto in a subprocess, see ``tests/s3server.py``).

Whatever the store, the registry relies on the same things: bytes come back only if they
match the sha256 and size recorded when they were written; a removed or never-written
version is "missing" (an IntegrityError naming it), not some other error; listings show
what is stored whatever the database says; bad names never reach a path or a key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

import joblib
import numpy as np
import pytest

from ensembles.errors import IntegrityError, SpecError
from ensembles.registry import ArtifactStore
from ensembles.registry.stores import LocalStore, StoreConfig, open_store
from ensembles.registry.stores.s3 import PART_SIZE, S3Store
from tests.s3server import S3Server

from .support import parquet_bytes

OWNER = "0123456789abcdef"
StoreFactory = Callable[..., ArtifactStore]


@pytest.fixture(params=["local", "s3"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory of stores of one kind over the same place (``grace_s`` varies)."""
    if request.param == "local":
        return lambda grace_s=3600.0: open_store(StoreConfig(grace_s=grace_s), tmp_path, OWNER)
    server: S3Server = request.getfixturevalue("s3_server")
    url = f"s3://{server.new_bucket()}/some/prefix"
    return lambda grace_s=3600.0: open_store(
        StoreConfig(url=url, endpoint_url=server.endpoint, grace_s=grace_s), tmp_path, OWNER
    )


@pytest.fixture
def store(make_store: StoreFactory) -> ArtifactStore:
    return make_store()


def test_each_store_satisfies_the_protocol(store: ArtifactStore) -> None:
    assert isinstance(store, ArtifactStore)
    assert isinstance(store, LocalStore | S3Store)
    store.probe()


def test_an_artifact_comes_back_equal_and_its_bytes_match_the_recorded_sha256(
    store: ArtifactStore,
) -> None:
    value = {"weights": [1.0, 2.5], "name": "iris"}
    written = store.write_artifact("iris", 3, value)
    data = store.read_artifact("iris", 3, written.sha256, written.size)
    assert hashlib.sha256(data).hexdigest() == written.sha256 and len(data) == written.size
    assert store.load_artifact("iris", 3, written.sha256, written.size) == value
    assert list(store.stored_artifacts()) == [("iris", 3)]


def test_a_wrong_checksum_or_size_is_refused_naming_the_version(store: ArtifactStore) -> None:
    written = store.write_artifact("iris", 1, [1, 2, 3])
    other = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(IntegrityError, match="model 'iris' version 1"):
        store.load_artifact("iris", 1, other, written.size)
    with pytest.raises(IntegrityError, match="model 'iris' version 1 is damaged"):
        store.read_artifact("iris", 1, written.sha256, written.size + 1)


def test_a_removed_artifact_is_missing_and_removing_twice_is_quiet(store: ArtifactStore) -> None:
    written = store.write_artifact("iris", 1, "v1")
    kept = store.write_artifact("iris", 2, "v2")
    store.remove_artifact("iris", 1)
    store.remove_artifact("iris", 1)
    store.remove_artifact("never-written", 9)
    with pytest.raises(IntegrityError, match="model 'iris' version 1 is missing"):
        store.read_artifact("iris", 1, written.sha256, written.size)
    assert store.load_artifact("iris", 2, kept.sha256, kept.size) == "v2"
    assert list(store.stored_artifacts()) == [("iris", 2)]


def test_models_differing_only_in_case_keep_their_own_artifacts(store: ArtifactStore) -> None:
    upper = store.write_artifact("Iris", 1, "upper")
    lower = store.write_artifact("iris", 1, "lower")
    assert store.load_artifact("Iris", 1, upper.sha256, upper.size) == "upper"
    assert store.load_artifact("iris", 1, lower.sha256, lower.size) == "lower"
    assert sorted(store.stored_artifacts()) == [("Iris", 1), ("iris", 1)]


@pytest.mark.parametrize("name", ["../escape", "a/b", "", ".hidden"])
def test_a_bad_model_name_never_reaches_a_path_or_a_key(store: ArtifactStore, name: str) -> None:
    with pytest.raises((SpecError, ValueError)):
        store.write_artifact(name, 1, "x")
    assert list(store.stored_artifacts()) == []


def test_a_dataset_round_trips_verified_and_a_removed_one_is_missing(
    store: ArtifactStore,
) -> None:
    data = parquet_bytes(50)
    dataset_id = "ds_" + "ab" * 12
    written = store.write_dataset(dataset_id, data)
    assert written.sha256 == hashlib.sha256(data).hexdigest() and written.size == len(data)
    assert store.read_dataset(dataset_id, written.sha256, written.size) == data
    with pytest.raises(IntegrityError, match=f"dataset '{dataset_id}'"):
        store.read_dataset(dataset_id, hashlib.sha256(b"x").hexdigest(), written.size)
    store.remove_dataset(dataset_id)
    with pytest.raises(IntegrityError, match="is missing"):
        store.read_dataset(dataset_id, written.sha256, written.size)


def test_stored_datasets_lists_only_bytes_older_than_the_grace_period(
    make_store: StoreFactory,
) -> None:
    patient, eager = make_store(grace_s=3600.0), make_store(grace_s=0.0)
    dataset_id = "ds_" + "cd" * 12
    patient.write_dataset(dataset_id, parquet_bytes())
    assert list(patient.stored_datasets()) == []  # may be another process's upload in flight
    assert list(eager.stored_datasets()) == [dataset_id]


def test_a_sweep_leaves_stored_bytes_alone(store: ArtifactStore) -> None:
    written = store.write_artifact("iris", 1, {"a": 1})
    store.sweep(lambda owner: True)
    assert store.load_artifact("iris", 1, written.sha256, written.size) == {"a": 1}


def test_a_large_artifact_goes_in_parts_and_comes_back_equal(store: ArtifactStore) -> None:
    array = np.random.default_rng(0).random(PART_SIZE // 8 * 2 + 1000)  # > 2 parts
    written = store.write_artifact("big", 1, array)
    assert written.size > 2 * PART_SIZE
    loaded = store.load_artifact("big", 1, written.sha256, written.size)
    assert isinstance(loaded, np.ndarray) and np.array_equal(loaded, array)


def test_artifacts_are_plain_joblib_files(store: ArtifactStore, tmp_path: Path) -> None:
    """The bytes are joblib's, so an operator can load a downloaded artifact directly."""
    written = store.write_artifact("iris", 1, {"k": [1, 2]})
    copy = tmp_path / "copy.joblib"
    copy.write_bytes(store.read_artifact("iris", 1, written.sha256, written.size))
    assert joblib.load(copy) == {"k": [1, 2]}
