"""Shadow predictions: a bounded queue, one thread serving it, counts kept in the registry.

A prediction through an alias with a shadow offers its rows here once its answer is sent.
Offering never waits: when the queue (``ENSEMBLE_SHADOW_QUEUE``) is full the request is
dropped and counted. One daemon thread per server process predicts the rows with the
shadow version and compares them with the answer; whatever the shadow does (a version
whose columns differ, a failure to load) is counted as an error, never raised. Counts are
added to the shadow's row in the registry database in batches (at most every
``FLUSH_S`` seconds, and before a read of them in this process), so every replica and
server process contributes to the one figure ``GET .../shadow`` returns.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from ensembles.routing import ShadowCounts

__all__ = ["FLUSH_S", "ShadowQueue", "ShadowRequest"]

log = logging.getLogger(__name__)

FLUSH_S: Final = 0.25
_JOIN_S: Final = 10.0

Key = tuple[str, str, str]  # model, alias, epoch of the shadow's setting


@dataclass(frozen=True, eq=False)
class ShadowRequest:
    """The rows one answer was given for, and the answer, for the shadow to compare with.

    ``rows`` are what the request's version checked: JSON instances (records or columnar)
    or an Arrow table; the shadow checks them against its own signature.
    """

    model: str
    alias: str
    epoch: str
    version: int
    rows: object
    task: str
    answered: Sequence[object] | np.ndarray

    @property
    def key(self) -> Key:
        return (self.model, self.alias, self.epoch)


# The shadow's (task, predictions) for a request; raises whatever the shadow raises.
Answer = Callable[[ShadowRequest], tuple[str, Sequence[object] | np.ndarray]]
# Adds counts to the shadow's row; False when that shadow is no longer set.
Record = Callable[[str, str, str, ShadowCounts], bool]


class ShadowQueue:
    """The shadow requests of one server process (thread-safe)."""

    def __init__(self, size: int) -> None:
        self._queue: queue.Queue[ShadowRequest] = queue.Queue(maxsize=size)
        self._pending: defaultdict[Key, ShadowCounts] = defaultdict(ShadowCounts)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._record: Record | None = None
        self._failing: set[Key] = set()

    def start(self, answer: Answer, record: Record) -> None:
        self._record = record
        self._thread = threading.Thread(
            target=self._serve, args=(answer,), name="shadow-predictions", daemon=True
        )
        self._thread.start()

    def offer(self, request: ShadowRequest) -> None:
        """Queue the request, or count it dropped; never blocks."""
        if not self._stopping.is_set():
            try:
                self._queue.put_nowait(request)
                return
            except queue.Full:
                pass
        with self._lock:
            self._pending[request.key].dropped += 1

    async def offer_later(self, request: ShadowRequest) -> None:
        """:meth:`offer` as a response's background task (on the event loop, after the
        answer was sent)."""
        self.offer(request)

    def flush(self) -> None:
        """Add what this process counted to the registry (blocking: a thread's job)."""
        with self._lock:
            batch, self._pending = self._pending, defaultdict(ShadowCounts)
        if self._record is None:
            return
        for (model, alias, epoch), counts in batch.items():
            if counts.empty():
                continue
            try:
                self._record(model, alias, epoch, counts)
            except Exception as exc:  # the database is away: keep them for the next flush
                log.warning("could not record shadow counts of %s@%s: %s", model, alias, exc)
                with self._lock:
                    self._pending[(model, alias, epoch)].add(counts)

    def close(self) -> None:
        """Stop the thread; requests still queued count as dropped; counts are flushed."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(_JOIN_S)
        while True:
            try:
                left = self._queue.get_nowait()
            except queue.Empty:
                break
            with self._lock:
                self._pending[left.key].dropped += 1
        self.flush()

    def _serve(self, answer: Answer) -> None:
        flushed = time.monotonic()
        while not self._stopping.is_set():
            try:
                request = self._queue.get(timeout=FLUSH_S)
            except queue.Empty:
                request = None
            if request is not None:
                counts = self._compare(answer, request)
                with self._lock:
                    self._pending[request.key].add(counts)
            if self._queue.empty() or time.monotonic() - flushed >= FLUSH_S:
                self.flush()
                flushed = time.monotonic()

    def _compare(self, answer: Answer, request: ShadowRequest) -> ShadowCounts:
        n = len(request.answered)
        counts = ShadowCounts(requests=1, rows=n)
        try:
            task, predictions = answer(request)
            if task != request.task:
                raise ValueError(f"the shadow is a {task} model, the alias a {request.task} one")
            if len(predictions) != n:
                raise ValueError(f"the shadow gave {len(predictions)} answers for {n} rows")
        except Exception as exc:
            counts.errors = 1
            if request.key not in self._failing:  # once per shadow setting, not per request
                self._failing.add(request.key)
                log.warning(
                    "shadow version %d of %s@%s failed: %s",
                    request.version,
                    request.model,
                    request.alias,
                    exc,
                )
            return counts
        counts.compared = n
        if task == "classification":
            same = np.asarray(request.answered, dtype=object) == np.asarray(
                predictions, dtype=object
            )
            counts.agreements = int(np.count_nonzero(same))
        else:
            given = np.asarray(request.answered, dtype=np.float64)
            counts.abs_difference = float(np.abs(given - np.asarray(predictions, np.float64)).sum())
        return counts
