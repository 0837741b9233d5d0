"""A Python client of the Ensemble service, sync and async, and the ``ensemble`` CLI.

>>> from ensemble_client import Client
>>> client = Client()                                   # ENSEMBLE_URL, ENSEMBLE_API_KEY
>>> iris = client.datasets.upload("iris.csv", name="iris")
>>> version = client.models.train("iris-rf", dataset=iris, target="species",
...                               ensemble="random_forest", params={"n_estimators": 200})
>>> client.models.predict("iris-rf", rows, proba=True)

Needs httpx and pydantic; pandas (and pyarrow) only for DataFrames and Parquet.
"""

from ensemble_client.aio import AsyncClient
from ensemble_client.client import Client
from ensemble_client.errors import (
    ApiError,
    ArtifactIntegrityError,
    AuthenticationError,
    ConflictError,
    EnsembleClientError,
    InvalidArgumentError,
    InvalidRequestError,
    JobCancelledError,
    JobFailedError,
    MissingDependencyError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    Problem,
    ProblemItem,
    RateLimitedError,
    ServerError,
    ServerUnreachableError,
    ServiceUnavailableError,
    UnsupportedFormatError,
    WaitTimeoutError,
)
from ensemble_client.models import (
    Alias,
    Catalog,
    Dataset,
    Explanations,
    Health,
    Job,
    Metrics,
    Model,
    Prediction,
    ShadowStats,
    Version,
)

__all__ = [
    "Alias",
    "ApiError",
    "ArtifactIntegrityError",
    "AsyncClient",
    "AuthenticationError",
    "Catalog",
    "Client",
    "ConflictError",
    "Dataset",
    "EnsembleClientError",
    "Explanations",
    "Health",
    "InvalidArgumentError",
    "InvalidRequestError",
    "Job",
    "JobCancelledError",
    "JobFailedError",
    "Metrics",
    "MissingDependencyError",
    "Model",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Prediction",
    "Problem",
    "ProblemItem",
    "RateLimitedError",
    "ServerError",
    "ServerUnreachableError",
    "ServiceUnavailableError",
    "ShadowStats",
    "UnsupportedFormatError",
    "Version",
    "WaitTimeoutError",
]
