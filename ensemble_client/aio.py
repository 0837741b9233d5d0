"""The asynchronous client: ``AsyncClient``, the same surface as ``Client`` with ``await``.

Each method runs the same operation as its synchronous twin (``ensemble_client.operations``)
and carries the same docstring; only the sending and the waiting are asynchronous::

    async with AsyncClient() as client:
        version = await client.models.train("iris-rf", dataset="iris", target="species",
                                            ensemble="random_forest")
        frame = await client.models.predict("iris-rf", rows, proba=True)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import httpx

from ensemble_client import client as sync
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
from ensemble_client.sessions import DEFAULT_TIMEOUT_S, AsyncSession

if TYPE_CHECKING:
    import pandas as pd

F = TypeVar("F", bound=Callable[..., Any])


def same_doc(twin: Callable[..., Any]) -> Callable[[F], F]:
    """Give an async method its synchronous twin's docstring (examples without await)."""

    def apply(method: F) -> F:
        method.__doc__ = f"{twin.__doc__}\n\n(Async: ``await`` it.)" if twin.__doc__ else None
        return method

    return apply


class _Resource:
    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def _run(self, operation: Operation[Any]) -> Any:
        return await self._client._session.run(operation)


class AsyncDatasets(_Resource):
    __doc__ = sync.Datasets.__doc__

    @same_doc(sync.Datasets.upload)
    async def upload(self, source: Any, name: str | None = None) -> Dataset:
        dataset: Dataset = await self._run(ops.upload_dataset(source, name))
        return dataset

    @same_doc(sync.Datasets.list)
    async def list(self) -> list[Dataset]:
        datasets: list[Dataset] = await self._run(ops.list_datasets())
        return datasets

    @same_doc(sync.Datasets.get)
    async def get(self, dataset_id: str) -> Dataset:
        dataset: Dataset = await self._run(ops.get_dataset(dataset_id))
        return dataset

    @same_doc(sync.Datasets.resolve)
    async def resolve(self, id_or_name: str) -> Dataset:
        dataset: Dataset = await self._run(ops.resolve_dataset(id_or_name))
        return dataset

    @same_doc(sync.Datasets.delete)
    async def delete(self, dataset_id: str) -> None:
        await self._run(ops.delete_dataset(dataset_id))


class AsyncJobs(_Resource):
    __doc__ = sync.Jobs.__doc__

    @same_doc(sync.Jobs.list)
    async def list(
        self, status: str | None = None, model: str | None = None, limit: int | None = None
    ) -> list[Job]:
        jobs: list[Job] = await self._run(ops.list_jobs(status, model, limit))
        return jobs

    @same_doc(sync.Jobs.get)
    async def get(self, job_id: str) -> Job:
        job: Job = await self._run(ops.get_job(job_id))
        return job

    @same_doc(sync.Jobs.cancel)
    async def cancel(self, job_id: str) -> Job:
        job: Job = await self._run(ops.cancel_job(job_id))
        return job

    @same_doc(sync.Jobs.wait)
    async def wait(
        self,
        job: Job | str,
        *,
        progress: bool | None = None,
        timeout: float | None = None,
        poll_interval: float = sync.POLL_INTERVAL_S,
    ) -> Job:
        operation = ops.wait_job(job, progress_for(progress), timeout, poll_interval)
        finished: Job = await self._run(operation)
        return finished


class AsyncVersions(_Resource):
    __doc__ = sync.Versions.__doc__

    @same_doc(sync.Versions.list)
    async def list(self, model: str) -> list[Version]:
        versions: list[Version] = await self._run(ops.list_versions(model))
        return versions

    @same_doc(sync.Versions.get)
    async def get(self, model: str, ref: str | int = "latest") -> Version:
        version: Version = await self._run(ops.get_version(model, ref))
        return version

    @same_doc(sync.Versions.delete)
    async def delete(self, model: str, version: int) -> None:
        await self._run(ops.delete_version(model, version))


class AsyncModels(_Resource):
    __doc__ = sync.Models.__doc__

    @overload
    async def train(
        self, name: str, *, dataset: Any, target: str, ensemble: Mapping[str, Any] | str,
        params: Mapping[str, Any] | None = ..., wait: Literal[True] = ...,
        progress: bool | None = ..., timeout: float | None = ..., **options: Any,
    ) -> Version: ...  # fmt: skip

    @overload
    async def train(
        self, name: str, *, dataset: Any, target: str, ensemble: Mapping[str, Any] | str,
        params: Mapping[str, Any] | None = ..., wait: Literal[False],
        progress: bool | None = ..., timeout: float | None = ..., **options: Any,
    ) -> Job: ...  # fmt: skip

    @same_doc(sync.Models.train)
    async def train(
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
        spec = ops.ensemble_spec(ensemble, params)
        operation = ops.train(
            name, dataset, target, spec, options, wait=wait,
            progress=progress_for(progress if wait else False), timeout=timeout,
            interval=sync.POLL_INTERVAL_S,
        )  # fmt: skip
        result: Version | Job = await self._run(operation)
        return result

    @same_doc(sync.Models.predict)
    async def predict(
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
        options = ops.prediction_options(proba, votes, std, voting, explain, top)
        prediction, index = await self._run(
            ops.predict(name, ref, rows, options, self._client.arrow_min_rows)
        )
        frame: pd.DataFrame = prediction.to_frame(index)
        return frame

    @same_doc(sync.Models.predict_result)
    async def predict_result(
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
        options = ops.prediction_options(proba, votes, std, voting, explain, top)
        prediction, _ = await self._run(
            ops.predict(name, ref, rows, options, self._client.arrow_min_rows)
        )
        result: Prediction = prediction
        return result

    @same_doc(sync.Models.list)
    async def list(self) -> list[Model]:
        models: list[Model] = await self._run(ops.list_models())
        return models

    @same_doc(sync.Models.get)
    async def get(self, name: str) -> Model:
        model: Model = await self._run(ops.get_model(name))
        return model

    @same_doc(sync.Models.delete)
    async def delete(self, name: str) -> None:
        await self._run(ops.delete_model(name))

    @same_doc(sync.Models.alias)
    async def alias(self, name: str, alias: str, version: int) -> Alias:
        result: Alias = await self._run(ops.set_alias(name, alias, version))
        return result

    @same_doc(sync.Models.set_alias)
    async def set_alias(
        self,
        name: str,
        alias: str,
        version: int | None = None,
        *,
        versions: Mapping[int, float] | Mapping[str, float] | None = None,
        shadow: int | None = None,
    ) -> Alias:
        result: Alias = await self._run(ops.set_alias(name, alias, version, versions, shadow))
        return result

    @same_doc(sync.Models.get_alias)
    async def get_alias(self, name: str, alias: str) -> Alias:
        result: Alias = await self._run(ops.get_alias(name, alias))
        return result

    @same_doc(sync.Models.shadow_stats)
    async def shadow_stats(self, name: str, alias: str) -> ShadowStats:
        result: ShadowStats = await self._run(ops.shadow_stats(name, alias))
        return result

    @same_doc(sync.Models.remove_alias)
    async def remove_alias(self, name: str, alias: str) -> None:
        await self._run(ops.remove_alias(name, alias))

    @same_doc(sync.Models.download_artifact)
    async def download_artifact(
        self, name: str, ref: str | int = "latest", to: str | os.PathLike[str] | None = None
    ) -> bytes:
        data: bytes = await self._run(ops.download_artifact(name, ref, to))
        return data

    @same_doc(sync.Models.export)
    async def export(
        self,
        name: str,
        ref: str | int = "latest",
        format: ExportFormat = "onnx",
        to: str | os.PathLike[str] | None = None,
    ) -> tuple[bytes, ExportInfo]:
        result: tuple[bytes, ExportInfo] = await self._run(exports.export(name, ref, format, to))
        return result


class AsyncClient:
    """An asynchronous client of the Ensemble service: ``Client``'s surface, awaited.

    ``url`` defaults to ``ENSEMBLE_URL`` (else http://127.0.0.1:8000), ``api_key`` to
    ``ENSEMBLE_API_KEY``; ``http`` may be your own ``httpx.AsyncClient`` (for instance one
    over ``httpx.ASGITransport(app)``).

    >>> async with AsyncClient() as client:
    ...     (await client.health()).status
    'ok'
    """

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 3,
        arrow_min_rows: int = sync.ARROW_MIN_ROWS,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        retry = RetryPolicy(max_retries=max_retries)
        self._session = AsyncSession(url, api_key, timeout=timeout, retry=retry, http=http)
        self.arrow_min_rows = arrow_min_rows
        self.datasets = AsyncDatasets(self)
        self.models = AsyncModels(self)
        self.versions = AsyncVersions(self)
        self.jobs = AsyncJobs(self)

    @property
    def url(self) -> str:
        return self._session.url

    @same_doc(sync.Client.health)
    async def health(self) -> Health:
        result: Health = await self._session.run(ops.health())
        return result

    @same_doc(sync.Client.ready)
    async def ready(self) -> Health:
        result: Health = await self._session.run(ops.ready())
        return result

    @same_doc(sync.Client.kinds)
    async def kinds(self) -> Catalog:
        result: Catalog = await self._session.run(ops.kinds())
        return result

    async def close(self) -> None:
        await self._session.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"
