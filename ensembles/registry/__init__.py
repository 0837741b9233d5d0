"""Registry and storage: datasets, training jobs, versioned models, aliases, artifacts.

``open_registry(data_dir, database_url, store)`` is the entry point; callers type
against the ``Registry`` protocol (or the one role they use: ``DatasetRegistry``,
``JobRegistry``, ``VersionRegistry``, ``AliasRegistry``, ``ExportRegistry``), and the
registry keeps its bytes in the ``ArtifactStore`` that ``store`` (a ``StoreConfig``)
names: ``LocalStore`` by default, an S3-compatible bucket by configuration.
``ModelCache`` keeps loaded models in memory. No HTTP here: errors are
``ensembles.errors`` classes.
"""

from ensembles.registry.base import (
    AliasRegistry,
    ArtifactStore,
    DatasetRegistry,
    ExportRegistry,
    JobRegistry,
    Registry,
    StoredObject,
    VersionRegistry,
)
from ensembles.registry.cache import CacheEvent, CacheKey, CacheObserver, ModelCache
from ensembles.registry.factory import open_registry
from ensembles.registry.names import (
    ALIAS_PATTERN,
    LATEST,
    MAX_VERSION,
    MODEL_NAME_PATTERN,
    validate_alias,
    validate_model_name,
)
from ensembles.registry.records import (
    JOB_STATUSES,
    AliasRecord,
    DatasetRecord,
    JobRecord,
    JobStatus,
    ModelRecord,
    ShadowStatsRecord,
    VersionRecord,
    job_problem,
)
from ensembles.registry.sql import SqlRegistry
from ensembles.registry.stores import LocalStore

__all__ = [
    "ALIAS_PATTERN",
    "JOB_STATUSES",
    "LATEST",
    "MAX_VERSION",
    "MODEL_NAME_PATTERN",
    "AliasRecord",
    "AliasRegistry",
    "ArtifactStore",
    "CacheEvent",
    "CacheKey",
    "CacheObserver",
    "DatasetRecord",
    "DatasetRegistry",
    "ExportRegistry",
    "JobRecord",
    "JobRegistry",
    "JobStatus",
    "LocalStore",
    "ModelCache",
    "ModelRecord",
    "Registry",
    "ShadowStatsRecord",
    "SqlRegistry",
    "StoredObject",
    "VersionRecord",
    "VersionRegistry",
    "job_problem",
    "open_registry",
    "validate_alias",
    "validate_model_name",
]
