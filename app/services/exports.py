"""Exports of versions: found in the store, or computed once and kept there.

A computed format is made at most once per version *per process* at a time (one lock
per version and format; the second request waits and then finds the first one's
result) and at most :data:`MAX_RUNNING` conversions run at once, each in a worker
thread, so the event loop and the prediction path keep going. Across replicas a double
computation is harmless: exports are content-addressed and every replica then serves
the same one (:mod:`ensembles.registry.stores.exports`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Final

import anyio
import anyio.to_thread

from app.threads import in_thread
from ensembles import NotFoundError, Problem
from ensembles.export import (
    COMPUTED,
    ExportError,
    ExportFormat,
    FidelityRows,
    export_model,
    fidelity_rows,
)
from ensembles.registry import Registry
from ensembles.registry.records import VersionRecord

log = logging.getLogger(__name__)

MAX_RUNNING: Final = 2
"""Conversions at once per process: each holds a model and its graph in memory."""


@dataclass(frozen=True)
class Served:
    data: bytes
    sha256: str
    info: dict[str, str]


class Exports:
    """The exports of one app: the store first, a bounded computation otherwise."""

    def __init__(self, registry: Registry, max_running: int = MAX_RUNNING) -> None:
        self.registry = registry
        self._limiter = anyio.CapacityLimiter(max_running)
        self._locks: dict[tuple[str, int, str], tuple[asyncio.Lock, int]] = {}
        self.computed: Counter[str] = Counter()  # conversions run by this process, by format

    async def get(self, record: VersionRecord, fmt: ExportFormat) -> Served:
        name, version = record.model, record.version
        if fmt not in COMPUTED:  # joblib: the artifact itself
            data = await in_thread(self.registry.read_artifact, name, version)
            return Served(data, record.artifact_sha256, {})
        key = (name, version, fmt)
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                kept = await in_thread(self.registry.read_export, name, version, fmt)
                if kept is not None:
                    return Served(kept.data, kept.sha256, kept.info)
                return await anyio.to_thread.run_sync(
                    self._compute, record, fmt, limiter=self._limiter
                )
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    def _compute(self, record: VersionRecord, fmt: ExportFormat) -> Served:
        started = time.perf_counter()
        self.computed[fmt] += 1
        model = self.registry.load_model(record.model, record.version)
        rows = self._rows(record) if fmt == "onnx" else None
        exported = export_model(model, fmt, rows)
        kept = self.registry.write_export(
            record.model, record.version, fmt, exported.data, exported.info
        )
        log.info(
            "made the %s export of model %r version %d in %.2f s (%d bytes)",
            fmt,
            record.model,
            record.version,
            time.perf_counter() - started,
            len(kept.data),
        )
        return Served(kept.data, kept.sha256, kept.info)

    def _rows(self, record: VersionRecord) -> FidelityRows:
        dataset = record.metadata.get("dataset")
        dataset_id = str(dataset.get("id")) if isinstance(dataset, dict) else ""
        try:
            parquet = self.registry.read_dataset_parquet(dataset_id)
        except NotFoundError as exc:
            msg = (
                f"the version's dataset {dataset_id!r} was deleted: there are no rows to "
                "measure the ONNX graph's fidelity on, so it is not served"
            )
            raise ExportError(msg, [Problem(("dataset",), msg)]) from exc
        return fidelity_rows(parquet, record.metadata)
