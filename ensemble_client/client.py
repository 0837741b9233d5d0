"""The synchronous client: ``Client(url=None, api_key=None)``.

Example::

    from ensemble_client import Client

    client = Client()                        # ENSEMBLE_URL, ENSEMBLE_API_KEY
    iris = client.datasets.upload("iris.csv", name="iris")
    version = client.models.train(
        "iris-rf", dataset=iris, target="species",
        ensemble="random_forest", params={"n_estimators": 200},
    )
    print(version.metrics.oob)               # {'accuracy': 0.95, ..., 'n_scored': 120}
    frame = client.models.predict("iris-rf", rows, proba=True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal, overload

import httpx

from ensemble_client import exports
from ensemble_client import operations as ops
from ensemble_client.calls import Operation, RetryPolicy
from ensemble_client.exports import ExportFormat, ExportInfo
from ensemble_client.models import (
    Alias,
    Catalog,
    Dataset,
    Health,
    Job,
    Model,
    Prediction,
    ShadowStats,
    Version,
)
from ensemble_client.progress import progress_for
from ensemble_client.sessions import DEFAULT_TIMEOUT_S, Session

if TYPE_CHECKING:
    import pandas as pd

ARROW_MIN_ROWS = 1000
POLL_INTERVAL_S = 0.5


class _Resource:
    def __init__(self, client: Client) -> None:
        self._client = client

    def _run(self, operation: Operation[Any]) -> Any:
        return self._client._session.run(operation)


class Datasets(_Resource):
    """``client.datasets``: upload, list, get, resolve and delete tables."""

    def upload(self, source: Any, name: str | None = None) -> Dataset:
        """Upload a table: a pandas DataFrame (sent as Parquet), a path to a CSV, Parquet
        or JSON Lines file (its stem is the default name), or a list of records.

        >>> iris = client.datasets.upload("iris.csv", name="iris")
        >>> iris.n_rows, [c.dtype for c in iris.columns][:2]
        (150, ['float64', 'float64'])
        """
        dataset: Dataset = self._run(ops.upload_dataset(source, name))
        return dataset

    def list(self) -> list[Dataset]:
        """Every dataset, newest first."""
        datasets: list[Dataset] = self._run(ops.list_datasets())
        return datasets

    def get(self, dataset_id: str) -> Dataset:
        """A dataset by id (``NotFoundError`` if there is none)."""
        dataset: Dataset = self._run(ops.get_dataset(dataset_id))
        return dataset

    def resolve(self, id_or_name: str) -> Dataset:
        """A dataset by id, or else the newest dataset uploaded under that name.

        >>> client.datasets.resolve("iris").id
        'ds_7f3a...'
        """
        dataset: Dataset = self._run(ops.resolve_dataset(id_or_name))
        return dataset

    def delete(self, dataset_id: str) -> None:
        """Delete a dataset (models trained on it keep working)."""
        self._run(ops.delete_dataset(dataset_id))


class Jobs(_Resource):
    """``client.jobs``: follow and cancel training jobs."""

    def list(
        self, status: str | None = None, model: str | None = None, limit: int | None = None
    ) -> list[Job]:
        """Jobs, newest first, optionally only one ``status`` or one ``model``'s."""
        jobs: list[Job] = self._run(ops.list_jobs(status, model, limit))
        return jobs

    def get(self, job_id: str) -> Job:
        """A job: status, progress, times, and for a failed job its ``error`` problem."""
        job: Job = self._run(ops.get_job(job_id))
        return job

    def cancel(self, job_id: str) -> Job:
        """Ask a queued or running job to stop (``ConflictError`` if it already ended)."""
        job: Job = self._run(ops.cancel_job(job_id))
        return job

    def wait(
        self,
        job: Job | str,
        *,
        progress: bool | None = None,
        timeout: float | None = None,
        poll_interval: float = POLL_INTERVAL_S,
    ) -> Job:
        """Wait for a job to end and return it (whatever its status), showing a progress
        bar in a terminal or notebook (``progress=None``; True or False to force).
        ``WaitTimeoutError`` after ``timeout`` seconds; the job keeps running.

        >>> client.jobs.wait("job_4e1f...").status
        'succeeded'
        """
        operation = ops.wait_job(job, progress_for(progress), timeout, poll_interval)
        finished: Job = self._run(operation)
        return finished


class Versions(_Resource):
    """``client.versions``: a model's versions."""

    def list(self, model: str) -> list[Version]:
        """Every version of a model, newest first."""
        versions: list[Version] = self._run(ops.list_versions(model))
        return versions

    def get(self, model: str, ref: str | int = "latest") -> Version:
        """A version by number, ``latest`` or alias, with its metrics.

        >>> client.versions.get("iris-rf", "production").metrics.holdout["accuracy"]
        0.966...
        """
        version: Version = self._run(ops.get_version(model, ref))
        return version

    def delete(self, model: str, version: int) -> None:
        """Delete one version (``ConflictError`` while an alias points at it)."""
        self._run(ops.delete_version(model, version))


class Models(_Resource):
    """``client.models``: train, predict, aliases, artifacts, and the models themselves."""

    @overload
    def train(
        self, name: str, *, dataset: Any, target: str, ensemble: Mapping[str, Any] | str,
        params: Mapping[str, Any] | None = ..., wait: Literal[True] = ...,
        progress: bool | None = ..., timeout: float | None = ..., **options: Any,
    ) -> Version: ...  # fmt: skip

    @overload
    def train(
        self, name: str, *, dataset: Any, target: str, ensemble: Mapping[str, Any] | str,
        params: Mapping[str, Any] | None = ..., wait: Literal[False],
        progress: bool | None = ..., timeout: float | None = ..., **options: Any,
    ) -> Job: ...  # fmt: skip

    def train(
        self,
        name: str,
        *,
        dataset: Any,
        target: str,
        ensemble: Mapping[str, Any] | str,
        params: Mapping[str, Any] | None = None,
        wait: bool = True,
        progress: bool | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> Version | Job:
        """Train a new version of model ``name``.

        ``dataset`` is a Dataset, an id, a name (its newest dataset), or a DataFrame or
        ``pathlib.Path`` to upload first. ``ensemble`` is a kind (``"random_forest"``,
        with ``params``) or a whole spec (``{"kind": "bagging", "estimator": {...}}``).
        ``options`` are the other fields of a training request: ``features``, ``task``,
        ``evaluation``, ``random_state``, ``description``, ``tags``.

        With ``wait`` (the default) a progress bar follows the job (in a terminal or a
        notebook; ``progress`` forces it on or off) and the trained Version is returned;
        a failed job raises ``JobFailedError`` with the job's problem. Without, the Job.

        >>> v = client.models.train("iris-rf", dataset="iris", target="species",
        ...                         ensemble="random_forest", params={"n_estimators": 200},
        ...                         random_state=42)
        >>> v.version, v.metrics.oob["accuracy"]
        (1, 0.95)
        """
        spec = ops.ensemble_spec(ensemble, params)
        operation = ops.train(
            name, dataset, target, spec, options, wait=wait,
            progress=progress_for(progress if wait else False), timeout=timeout,
            interval=POLL_INTERVAL_S,
        )  # fmt: skip
        result: Version | Job = self._run(operation)
        return result

    def predict(
        self,
        name: str,
        rows: Any,
        ref: str | int = "latest",
        *,
        proba: bool = False,
        votes: bool = False,
        std: bool = False,
        voting: str | None = None,
        explain: bool = False,
        top: int | None = None,
    ) -> pd.DataFrame:
        """Predict rows with a version (number, ``latest`` or alias) as a DataFrame.

        ``rows`` is a DataFrame (1,000 rows or more go as Arrow), a path to a CSV or
        Parquet file, a list of records or a mapping of columns. The answer has the rows'
        index and the columns ``prediction``, ``proba_<class>`` (``proba``),
        ``votes_<class>`` and ``agreement`` (``votes``), ``std`` (``std``, regression);
        ``frame.attrs`` holds the version and the server's ``warnings``; with
        ``explain``, ``frame.attrs["explanations"]`` each input column's contribution to
        each row's output (``top``: the k largest per row and class, the rest as
        ``(other)``).

        >>> client.models.predict("iris-rf", flowers, proba=True).round(2)
          prediction  proba_setosa  proba_versicolor  proba_virginica
        0     setosa          1.00              0.00             0.00
        """
        options = ops.prediction_options(proba, votes, std, voting, explain, top)
        prediction, index = self._run(
            ops.predict(name, ref, rows, options, self._client.arrow_min_rows)
        )
        frame: pd.DataFrame = prediction.to_frame(index)
        return frame

    def predict_result(
        self,
        name: str,
        rows: Any,
        ref: str | int = "latest",
        *,
        proba: bool = False,
        votes: bool = False,
        std: bool = False,
        voting: str | None = None,
        explain: bool = False,
        top: int | None = None,
    ) -> Prediction:
        """As ``predict``, the answer as the server wrote it (no pandas needed)."""
        options = ops.prediction_options(proba, votes, std, voting, explain, top)
        prediction, _ = self._run(
            ops.predict(name, ref, rows, options, self._client.arrow_min_rows)
        )
        result: Prediction = prediction
        return result

    def list(self) -> list[Model]:
        """Every model with its latest version and aliases."""
        models: list[Model] = self._run(ops.list_models())
        return models

    def get(self, name: str) -> Model:
        """A model's latest version and aliases."""
        model: Model = self._run(ops.get_model(name))
        return model

    def delete(self, name: str) -> None:
        """Delete a model, every version and alias (numbers are never reused)."""
        self._run(ops.delete_model(name))

    def alias(self, name: str, alias: str, version: int) -> Alias:
        """Point ``alias`` of the model at ``version`` (created or moved atomically).

        >>> client.models.alias("iris-rf", "production", 3)
        Alias(model='iris-rf', alias='production', version=3)
        """
        result: Alias = self._run(ops.set_alias(name, alias, version))
        return result

    def set_alias(
        self,
        name: str,
        alias: str,
        version: int | None = None,
        *,
        versions: Mapping[int, float] | Mapping[str, float] | None = None,
        shadow: int | None = None,
    ) -> Alias:
        """Point ``alias`` at one ``version``, or split it by weight between ``versions``
        (weights > 0 summing to 1); ``shadow`` also gets every prediction's rows.

        >>> client.models.set_alias("iris-rf", "production", versions={3: 0.9, 4: 0.1}, shadow=5)
        Alias(model='iris-rf', alias='production', version=3, versions={3: 0.9, 4: 0.1}, shadow=5)
        """
        result: Alias = self._run(ops.set_alias(name, alias, version, versions, shadow))
        return result

    def get_alias(self, name: str, alias: str) -> Alias:
        """An alias with its weights and shadow."""
        result: Alias = self._run(ops.get_alias(name, alias))
        return result

    def shadow_stats(self, name: str, alias: str) -> ShadowStats:
        """How the alias's shadow compared since it was set (``NotFoundError`` without one)."""
        result: ShadowStats = self._run(ops.shadow_stats(name, alias))
        return result

    def remove_alias(self, name: str, alias: str) -> None:
        """Remove an alias; the version stays."""
        self._run(ops.remove_alias(name, alias))

    def download_artifact(
        self, name: str, ref: str | int = "latest", to: str | os.PathLike[str] | None = None
    ) -> bytes:
        """The version's joblib file (a scikit-learn Pipeline), checked against its sha256
        (``ArtifactIntegrityError`` if it differs); written atomically to ``to`` if given.

        >>> import io, joblib
        >>> pipeline = joblib.load(io.BytesIO(client.models.download_artifact("iris-rf")))
        """
        data: bytes = self._run(ops.download_artifact(name, ref, to))
        return data

    def export(
        self,
        name: str,
        ref: str | int = "latest",
        format: ExportFormat = "onnx",
        to: str | os.PathLike[str] | None = None,
    ) -> tuple[bytes, ExportInfo]:
        """The version as ``joblib``, ``skops`` or ``onnx``, checked against its sha256
        (``ArtifactIntegrityError`` if it differs), with what came with it; written
        atomically to ``to`` if given.

        >>> data, info = client.models.export("iris-rf", "production", "skops")
        >>> model = skops.io.loads(data, trusted=list(info.untrusted_types))
        >>> data, info = client.models.export("iris-rf", 3, "onnx")
        >>> info.fidelity.max_abs_diff, info.fidelity.rows_from
        (3.1e-07, 'holdout')
        """
        result: tuple[bytes, ExportInfo] = self._run(exports.export(name, ref, format, to))
        return result


class Client:
    """A synchronous client of the Ensemble service.

    ``url`` defaults to ``ENSEMBLE_URL`` (else http://127.0.0.1:8000), ``api_key`` to
    ``ENSEMBLE_API_KEY``. Idempotent calls are retried on 429 and 503 (``max_retries``
    times, honouring ``Retry-After``). Pass ``http`` to use your own ``httpx.Client``
    (its base URL is the service's). Use it as a context manager, or call ``close()``.

    >>> with Client("http://127.0.0.1:8000") as client:
    ...     client.health().status
    'ok'
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 3,
        arrow_min_rows: int = ARROW_MIN_ROWS,
        http: httpx.Client | None = None,
    ) -> None:
        retry = RetryPolicy(max_retries=max_retries)
        self._session = Session(url, api_key, timeout=timeout, retry=retry, http=http)
        self.arrow_min_rows = arrow_min_rows
        self.datasets = Datasets(self)
        self.models = Models(self)
        self.versions = Versions(self)
        self.jobs = Jobs(self)

    @property
    def url(self) -> str:
        """The service's base URL."""
        return self._session.url

    def health(self) -> Health:
        """Liveness (``/healthz``)."""
        result: Health = self._session.run(ops.health())
        return result

    def ready(self) -> Health:
        """Readiness (``/readyz``): each check; ``ServiceUnavailableError`` when not ready."""
        result: Health = self._session.run(ops.ready())
        return result

    def kinds(self) -> Catalog:
        """Every ensemble and base-learner kind, with a JSON Schema of its parameters."""
        result: Catalog = self._session.run(ops.kinds())
        return result

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"
