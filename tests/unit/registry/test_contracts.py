"""The typed documents the service keeps in the registry, and the registry protocols.

The documents below are literal copies of what the service wrote before they were
typed: stored JSON must keep loading, and a loaded document must give back exactly
what was stored (the version resource serves it).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ensembles.registry import (
    AliasRegistry,
    ArtifactStore,
    DatasetRegistry,
    ExportRegistry,
    JobRegistry,
    LocalStore,
    Registry,
    SqlRegistry,
    VersionRegistry,
    open_registry,
)
from ensembles.registry.documents import JobDocument, VersionMetadata
from ensembles.reports import Metrics
from ensembles.specs import EstimatorSpec, EvaluationSpec

OLD_JOB: dict[str, Any] = {
    "model": "iris-clf",
    "dataset": {"id": "ds_7f3a2b1c0d9e8f7a6b5c4d3e", "sha256": "ab" * 32, "n_rows": 150},
    "target": "species",
    "features": ["sepal_length", "sepal_width", "petal_length", "petal_width"],
    "task": "classification",
    "task_inferred": True,
    "kind": "voting",
    "ensemble": {
        "kind": "voting",
        "params": {"voting": "soft", "weights": None},
        "estimators": [
            {"kind": "logistic_regression", "params": {"C": 1.0}, "name": "lr"},
            {"kind": "gaussian_nb", "params": {}, "name": "nb"},
        ],
    },
    "evaluation": {"holdout_fraction": 0.2, "cv_folds": 0},
    "random_state": 42,
    "description": None,
    "tags": {"team": "fraud"},
}

OLD_VERSION: dict[str, Any] = {
    "task": "regression",
    "kind": "random_forest",
    "spec": {"kind": "random_forest", "params": {"n_estimators": 10, "max_depth": None}},
    "dataset": {"id": "ds_7f3a2b1c0d9e8f7a6b5c4d3e", "sha256": "cd" * 32, "n_rows": 442},
    "target": "y",
    "features": [{"name": "age", "dtype": "float64"}, {"name": "sex", "dtype": "string"}],
    "classes": None,
    # An older report: no "estimators" nor "curve" blocks.
    "metrics": {
        "oob": {"r2": 0.41, "rmse": 58.2, "n_scored": 350},
        "holdout": {"r2": 0.44, "rmse": 55.0, "mae": 44.1, "n": 89},
        "cv": None,
        "train": {"r2": 0.91},
        "notes": ["no cross-validation (cv_folds = 0)"],
    },
    "feature_importances": {"age": 0.7, "sex": 0.3},
    "training": {"duration_s": 0.2, "n_estimators": 10, "random_state": 0},
    "artifact": {
        "format": "joblib",
        "library_versions": {"scikit-learn": "1.9.1"},
        "sha256": "ef" * 32,
        "size_bytes": 1234,
    },
    "description": "first try",
    "tags": {},
    "job_id": "job_4e1f0a9b8c7d6e5f4a3b2c1d",
    "signature": {"task": "regression", "kind": "random_forest", "features": []},
    # No "inference": versions made before the compiled engine lack it.
    "an_unknown_field": [1, 2],
}


def test_an_old_job_document_loads_and_round_trips() -> None:
    document = JobDocument.model_validate(copy.deepcopy(OLD_JOB))
    assert document.dataset.id == "ds_7f3a2b1c0d9e8f7a6b5c4d3e" and document.random_state == 42
    assert isinstance(document.ensemble, EstimatorSpec) and document.ensemble.kind == "voting"
    assert document.evaluation == EvaluationSpec(holdout_fraction=0.2, cv_folds=0)
    assert document.to_json() == OLD_JOB


def test_a_job_document_written_now_reads_back_equal() -> None:
    document = JobDocument.model_validate(OLD_JOB)
    assert JobDocument.model_validate(document.to_json()) == document


def test_a_job_document_missing_a_field_is_refused_with_its_name() -> None:
    broken = {k: v for k, v in OLD_JOB.items() if k != "random_state"}
    with pytest.raises(ValidationError) as raised:
        JobDocument.model_validate(broken)
    assert [e["loc"] for e in raised.value.errors()] == [("random_state",)]


def test_old_version_metadata_loads_and_gives_back_what_was_stored() -> None:
    metadata = VersionMetadata.model_validate(copy.deepcopy(OLD_VERSION))
    assert metadata.inference is None and metadata.features[1].dtype == "string"
    assert metadata.metrics.holdout == {"r2": 0.44, "rmse": 55.0, "mae": 44.1, "n": 89}
    assert metadata.metrics.estimators == [] and metadata.metrics.curve is None
    assert metadata.to_json() == OLD_VERSION


def test_metrics_written_in_full_keep_every_block() -> None:
    metrics = Metrics(
        oob=None, holdout={"r2": 0.5}, cv=None, train={"r2": 1.0}, estimators=[], curve=None
    )
    dumped = metrics.model_dump(mode="json", exclude_unset=True)
    assert set(dumped) == {"oob", "holdout", "cv", "train", "estimators", "curve"}
    assert Metrics.model_validate(dumped) == metrics


def test_sql_registry_and_local_store_satisfy_the_protocols(
    tmp_path: Path, database_url: str | None
) -> None:
    with SqlRegistry.open(tmp_path / "data", database_url) as registry:
        typed: Registry = registry  # and mypy checks these assignments in the packages
        assert isinstance(typed, Registry)
        assert isinstance(registry.store, LocalStore)
        assert isinstance(registry.store, ArtifactStore)


def test_open_registry_opens_one_registry_playing_every_role(
    tmp_path: Path, database_url: str | None
) -> None:
    registry = open_registry(tmp_path / "data", database_url)
    try:
        roles = (DatasetRegistry, JobRegistry, VersionRegistry, AliasRegistry, ExportRegistry)
        assert all(isinstance(registry, role) for role in roles)
        assert registry.check() == {"database": "ok", "artifact_store": "ok"}
        assert registry.list_datasets() == [] and registry.list_models() == []
    finally:
        registry.close()
