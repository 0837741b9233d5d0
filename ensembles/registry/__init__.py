"""Registry and storage: datasets, training jobs, versioned models, aliases, artifacts.

``SqlRegistry.open(data_dir, database_url, store)`` is the entry point; callers type
against the ``Registry`` protocol, and the registry keeps its bytes in the
``ArtifactStore`` that ``store`` (a ``StoreConfig``) names: ``LocalStore`` by default, an
S3-compatible bucket by configuration. ``ModelCache`` keeps loaded models in memory. No HTTP
here: errors are ``ensembles.errors`` classes.
"""

from ensembles.registry.base import ArtifactStore, Registry, StoredObject
from ensembles.registry.cache import CacheEvent, CacheKey, CacheObserver, ModelCache
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
    "ArtifactStore",
    "CacheEvent",
    "CacheKey",
    "CacheObserver",
    "DatasetRecord",
    "JobRecord",
    "JobStatus",
    "LocalStore",
    "ModelCache",
    "ModelRecord",
    "Registry",
    "ShadowStatsRecord",
    "SqlRegistry",
    "StoredObject",
    "VersionRecord",
    "job_problem",
    "validate_alias",
    "validate_model_name",
]
