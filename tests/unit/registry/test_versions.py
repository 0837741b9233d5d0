"""Models and versions: numbering, references, deletion, the stored document."""

from __future__ import annotations

import hashlib
from datetime import UTC

import joblib
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from ensembles.errors import NotFoundError, SpecError
from ensembles.registry import SqlRegistry

from .support import artifact_path, publish


def test_versions_count_from_one_and_list_newest_first(registry: SqlRegistry) -> None:
    assert [publish(registry, "iris").version for _ in range(3)] == [1, 2, 3]
    assert [v.version for v in registry.list_versions("iris")] == [3, 2, 1]
    model = registry.get_model("iris")
    assert model.latest_version == 3 and model.aliases == {}
    assert model.created_at.tzinfo is UTC


@pytest.mark.parametrize(("ref", "expected"), [(2, 2), ("2", 2), ("latest", 3), ("best", 1)])
def test_references(registry: SqlRegistry, ref: str | int, expected: int) -> None:
    for _ in range(3):
        publish(registry, "iris")
    registry.set_alias("iris", "best", 1)
    assert registry.get_version("iris", ref).version == expected


@pytest.mark.parametrize("ref", [4, "4", "0", "-1", "unknown", "no such", "../1", True])
def test_unknown_references_are_not_found(registry: SqlRegistry, ref: str | int) -> None:
    publish(registry, "iris")
    with pytest.raises(NotFoundError):
        registry.get_version("iris", ref)


def test_a_model_without_a_visible_version_does_not_exist(registry: SqlRegistry) -> None:
    registry.submit_job("pending", {})
    for call in (
        lambda: registry.get_model("pending"),
        lambda: registry.list_versions("pending"),
        lambda: registry.get_version("pending", "latest"),
        lambda: registry.get_version("pending", 1),
        lambda: registry.delete_model("pending"),
    ):
        with pytest.raises(NotFoundError, match="model 'pending' not found"):
            call()
    assert registry.list_models() == []


def test_the_document_gets_the_artifact_block(registry: SqlRegistry) -> None:
    metadata: dict[str, object] = {
        "task": "classification",
        "artifact": {"library_versions": {"scikit-learn": "1.9.1"}},
    }
    record = publish(registry, "iris", value={"w": [1, 2]}, metadata=metadata)
    data = artifact_path(registry, "iris", 1).read_bytes()
    assert record.artifact_sha256 == hashlib.sha256(data).hexdigest()
    assert record.artifact_size == len(data) and record.artifact_format == "joblib"
    assert record.metadata == {
        "task": "classification",
        "artifact": {
            "library_versions": {"scikit-learn": "1.9.1"},
            "format": "joblib",
            "sha256": record.artifact_sha256,
            "size_bytes": record.artifact_size,
        },
    }
    assert registry.read_artifact("iris", 1) == data
    assert registry.load_model("iris", 1) == {"w": [1, 2]}
    assert record.created_at.tzinfo is UTC
    assert metadata["artifact"] == {"library_versions": {"scikit-learn": "1.9.1"}}  # untouched


def test_delete_version(registry: SqlRegistry) -> None:
    for _ in range(3):
        publish(registry, "iris")
    path = artifact_path(registry, "iris", 3)
    registry.delete_version("iris", 3)
    assert not path.exists()
    assert registry.get_version("iris", "latest").version == 2
    with pytest.raises(NotFoundError, match="has no version 3"):
        registry.delete_version("iris", 3)
    with pytest.raises(NotFoundError):
        registry.load_model("iris", 3)
    assert publish(registry, "iris").version == 4


def test_delete_model_then_retrain_continues_numbering(registry: SqlRegistry) -> None:
    publish(registry, "iris")
    first = publish(registry, "iris")
    registry.set_alias("iris", "production", 2)
    folder = registry.store.artifacts.folder("iris")
    registry.delete_model("iris")
    assert list(folder.glob("*.joblib")) == []
    assert registry.list_models() == []
    with pytest.raises(NotFoundError):
        registry.get_version("iris", "production")
    again = publish(registry, "iris")
    assert again.version == 3
    model = registry.get_model("iris")
    assert model.aliases == {} and model.latest_version == 3
    assert model.created_at > first.created_at


def test_delete_model_stops_its_unfinished_jobs(registry: SqlRegistry) -> None:
    publish(registry, "iris")
    queued = registry.submit_job("iris", {})
    running = registry.submit_job("iris", {})
    registry.start_job(running.id)
    registry.delete_model("iris")
    assert registry.get_job(queued.id).status == "cancelled"
    assert registry.get_job(running.id).cancel_requested
    with pytest.raises(Exception, match="cancelled"):
        registry.publish_version(running.id, {}, {})
    assert registry.list_models() == []


def test_models_differing_in_case_are_kept_apart(registry: SqlRegistry) -> None:
    publish(registry, "Iris", value="upper")
    publish(registry, "iris", value="lower")
    assert (
        registry.store.artifacts.folder("Iris").name.lower()
        != registry.store.artifacts.folder("iris").name
    )
    assert registry.load_model("Iris", 1) == "upper" and registry.load_model("iris", 1) == "lower"
    assert [m.name for m in registry.list_models()] == ["Iris", "iris"]


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".x"])
def test_invalid_names_never_reach_a_path(registry: SqlRegistry, name: str) -> None:
    for call in (
        lambda: registry.submit_job(name, {}),
        lambda: registry.get_model(name),
        lambda: registry.get_version(name, 1),
        lambda: artifact_path(registry, name, 1),
        lambda: registry.store.artifacts.folder(name),
        lambda: registry.delete_model(name),
    ):
        with pytest.raises(SpecError) as raised:
            call()
        assert raised.value.problems[0].loc == ("model",)


def test_a_fitted_scikit_learn_model_round_trips(registry: SqlRegistry) -> None:
    rng = np.random.RandomState(0)
    X = rng.rand(120, 4)
    y = (X[:, 0] + X[:, 1] > 1).astype(int)
    fitted = make_pipeline(
        StandardScaler(), RandomForestClassifier(n_estimators=5, random_state=0)
    ).fit(X, y)
    publish(registry, "forest", value=fitted)
    loaded = registry.load_model("forest", 1)
    assert isinstance(loaded, Pipeline)
    np.testing.assert_array_equal(loaded.predict_proba(X), fitted.predict_proba(X))
    plain = joblib.load(artifact_path(registry, "forest", 1))  # a plain joblib file
    np.testing.assert_array_equal(plain.predict(X), fitted.predict(X))
