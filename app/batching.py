"""Adaptive batching: concurrent predictions of one version, with the same options, answered
by one engine call and split back per request (:mod:`ensembles.inference.batches`).

Two ways in, one for each place a prediction runs:

* on the event loop (:meth:`Batcher.predict`; small requests that native engines answer):
  the first request of a key in a loop turn is answered at once, alone, as it would be
  without batching, unless other requests came in the same turn and are yet to run
  (the server's count, :mod:`app.server.arrivals`; then it opens the batch, and the
  turn's requests share one call where they shared two); the next ones of the same turn
  (requests whose bytes arrived together) join one batch, flushed with
  ``loop.call_soon`` at the end of the turn, when it holds ``max_rows`` rows, or when a
  request finds it open for ``max_wait`` already (on a fine clock, not the loop's
  coarse one: see ``_now``).
  The loop never sleeps for batch-mates: on this 2-core machine, loaded by other work, a
  timer wait of 1 ms (until as many requests as the last batch held had joined) cost the
  process its CPU slice at every wait, and 16 clients got 184 req/s instead of 854;
* in a worker thread (:meth:`Batcher.predict_blocking`): a request whose engine is idle
  runs at once; while a call for the same key is running, requests queue behind it and
  the first of them, when it ends, answers every queued one in one call.  Nobody waits
  for a timer: only for the engine, as it would have anyway.

A small Arrow body read from its bytes joins by its matrix
(:class:`~ensembles.inference.cells.MatrixRows`, made
columns only where it is answered alone): the 30 column views of a one-row request cost
it 7 us of CPU, and the batch joins the matrices in one call.

A one-row JSON request of records (:meth:`Batcher.predict_record`) joins its batch before
its row is checked: at the flush the batch's records are checked together, in one call
(:func:`~ensembles.inference.check_records_together`), and answered by one engine call;
if they cannot be checked together (a bad cell, an extra column, anything that is not a
plain number), each is checked alone, as it would have been, and the good ones are
answered together.  At 16 clients the loop takes about 6 such requests per turn
(``benchmarks/batch_census.py``), and each one's own check cost ~23 us of CPU, ~7 us
when six are checked together (``benchmarks/batch_check_cost.py``; issue 24).

A batch never changes an answer: its requests share a servable, options and column dtypes
(:func:`batch_key`) and the engine their own size would get, and only requests whose
answers are computed row by row are joined (:func:`batchable`).  If the joined call fails,
each request is answered alone, so one request's error is its own (a 422 stays a 422, and
its batch-mates get their answers).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from app.engine_thread import EngineThread
from app.metrics import Metrics
from app.server.arrivals import ARRIVALS, Arrivals
from ensembles.inference import (
    CheckedColumns,
    Columns,
    Prediction,
    PredictOptions,
    Servable,
    check_records_together,
    check_rows,
)
from ensembles.inference.batches import (
    Part,
    as_columns,
    batch_key,
    batchable,
    concat_columns,
    row_count,
    split_prediction,
)
from ensembles.inference.cells import MatrixRows

Outcome = Prediction | Exception
Checked = tuple[Prediction, list[str]]  # a record's prediction and its request's warnings
_RECORDS: Final = "records"  # the first item of a batch key of unchecked records
# Fewest requests of a batch answered on the engine thread (app/engine_thread.py): a
# smaller one stays on the loop, where its answer costs no wake-ups (at 4 clients, with
# batches of 2-3, the hand-over cost more than it freed: 0.91x req/s).
_BESIDE_FROM: Final = 4
# A batch's age, in seconds, read from a clock finer than the wait it is held to: uvloop's
# ``loop.time()`` is libuv's cached clock in whole milliseconds, so a 1 ms batch was cut
# wherever a millisecond ended inside its turn, however young it was (issue 24: one-row
# Arrow requests at 16 clients, 4.9-5.3 requests an engine call; 10.9 on this clock, 14.3
# with no cap).
_now: Final = time.monotonic


@dataclass(eq=False)
class _Open:
    """A batch collecting on the event loop."""

    servable: Servable
    options: PredictOptions
    opened: float
    parts: list[Part] = field(default_factory=list)  # Columns, or MatrixRows
    waiting: list[asyncio.Future[Prediction]] = field(default_factory=list)
    rows: int = 0


@dataclass(eq=False)
class _OpenRecords:
    """A batch of one-record JSON requests collecting on the event loop, unchecked."""

    servable: Servable
    options: PredictOptions
    max_rows: int | None  # the row limit each request's own check applies
    opened: float
    requests: list[Sequence[object]] = field(default_factory=list)  # each one's instances
    waiting: list[asyncio.Future[Checked]] = field(default_factory=list)
    rows: int = 0


@dataclass(eq=False)
class _Job:
    """One request waiting in a worker thread."""

    columns: Columns
    rows: int
    done: threading.Event = field(default_factory=threading.Event)
    outcome: Outcome | None = None
    lead: list[_Job] | None = None  # set when this job is to answer a batch


@dataclass(eq=False)
class _Lane:
    """The worker-thread requests of one key: is a call running, and who waits for it."""

    queue: list[_Job] = field(default_factory=list)


class Batcher:
    """Joins concurrent predictions (``max_wait`` 0: each request is answered alone)."""

    def __init__(
        self,
        max_rows: int,
        max_wait_ms: float,
        metrics: Metrics,
        arrivals: Arrivals = ARRIVALS,
        engine_thread: bool = False,
    ) -> None:
        self.max_rows = max_rows
        self.max_wait = max_wait_ms / 1000
        self.enabled = max_wait_ms > 0 and max_rows > 1
        self.metrics = metrics
        self._open: dict[Hashable, _Open | _OpenRecords] = {}
        self._seen: set[Hashable] = set()  # keys of the requests of this loop turn
        self._lanes: dict[Hashable, _Lane] = {}
        self._lock = threading.Lock()
        self._arrivals = arrivals  # requests of this turn yet to run (the server's count)
        # joined batches answered beside the loop (see app.engine_thread)
        self._engine = EngineThread() if engine_thread and self.enabled else None

    def _joins(self, servable: Servable, rows: int, options: PredictOptions) -> bool:
        """May this request share an engine call (else it is answered alone)?"""
        return self.enabled and rows < self.max_rows and batchable(servable, rows, options)

    # --- on the event loop ------------------------------------------------------------

    async def predict(
        self, servable: Servable, columns: Part, options: PredictOptions
    ) -> Prediction:
        """The prediction of ``columns`` (or of a :class:`MatrixRows`' rows, made columns
        only if answered alone), answered with those of this loop turn."""
        rows = row_count(columns)
        if not self._joins(servable, rows, options):
            return self._part_alone(servable, columns, options)
        loop = asyncio.get_running_loop()
        key = (id(servable), batch_key(columns, options))
        batch = self._joined(loop, key, servable, rows, lambda: _Open(servable, options, _now()))
        if batch is None:  # the first of its turn, none waiting: answered at once, alone
            return self._part_alone(servable, columns, options)
        if not isinstance(batch, _Open):  # (keys of checked columns name only these)
            raise TypeError(f"unexpected batch {type(batch).__name__}")
        future: asyncio.Future[Prediction] = loop.create_future()
        batch.parts.append(columns)
        batch.waiting.append(future)
        batch.rows += rows
        return await future

    async def predict_record(
        self,
        servable: Servable,
        instances: Sequence[object],
        options: PredictOptions,
        max_rows: int | None,
    ) -> Checked:
        """The prediction and warnings of a request of one JSON record (``instances``, a
        list of one item, unchecked), checked and answered with the other such requests
        of this loop turn (see the module); the check's problems are raised as
        :func:`~ensembles.inference.check_rows` raises them for the request alone."""
        if not self._joins(servable, 1, options):
            return self._checked_alone(servable, instances, options, max_rows)
        loop = asyncio.get_running_loop()
        key = (_RECORDS, id(servable), options, max_rows)
        batch = self._joined(
            loop, key, servable, 1, lambda: _OpenRecords(servable, options, max_rows, _now())
        )
        if batch is None:  # the first of its turn, none waiting: answered at once, alone
            return self._checked_alone(servable, instances, options, max_rows)
        if not isinstance(batch, _OpenRecords):  # (keys of records name only these)
            raise TypeError(f"unexpected batch {type(batch).__name__}")
        future: asyncio.Future[Checked] = loop.create_future()
        batch.requests.append(instances)
        batch.waiting.append(future)
        batch.rows += 1
        return await future

    def _joined(
        self,
        loop: asyncio.AbstractEventLoop,
        key: Hashable,
        servable: Servable,
        rows: int,
        opened: Callable[[], _Open | _OpenRecords],
    ) -> _Open | _OpenRecords | None:
        """The open batch of ``key`` a request of ``rows`` rows joins (a full or old one
        flushed first, a new one ``opened`` and its flush scheduled), or None for the
        first request of ``key`` in this loop turn when no other request of the turn is
        waiting to run, to be answered at once, alone."""
        batch = self._open.get(key)
        if batch is not None and not self._fits(batch, servable, rows, _now()):
            self._flush(key, batch)
            batch = None
        if batch is None:
            if key not in self._seen:
                self._first_of_turn(loop, key)
                if self._arrivals.waiting <= 0:
                    return None  # nothing else came in this turn: answered at once
            batch = opened()
            self._open[key] = batch
            loop.call_soon(self._flush, key, batch)
        return batch

    def _part_alone(self, servable: Servable, part: Part, options: PredictOptions) -> Prediction:
        """A request answered alone: a lone checked row of a matrix (a one-row Arrow
        body) by the servable's lane for lone rows when it takes it (the same answer,
        without the column views, the stack and the general answer:
        ``Servable.predict_row``), else as any request."""
        lone = _lone_row(servable, part, options)
        if lone is not None:
            self.metrics.observe_batch(1, 1)
            return lone
        return self._alone(servable, as_columns(part), options)

    def _checked_alone(
        self,
        servable: Servable,
        instances: Sequence[object],
        options: PredictOptions,
        max_rows: int | None,
    ) -> Checked:
        """A lone record's prediction: by the servable's lane for lone records when it
        takes the record (the same answer, without the layers many rows need:
        ``Servable.predict_record``), else checked and predicted as any request."""
        lone = servable.predict_record(instances, options, max_rows)
        if lone is not None:
            self.metrics.observe_batch(1, 1)
            return lone
        checked = check_rows(servable.signature, instances, max_rows)
        return self._alone(servable, checked.columns, options), checked.warnings

    def _first_of_turn(self, loop: asyncio.AbstractEventLoop, key: Hashable) -> None:
        """Remember, until this loop turn ends, that a request of ``key`` came in it."""
        if not self._seen:
            loop.call_soon(self._seen.clear)
        self._seen.add(key)

    def _fits(self, batch: _Open | _OpenRecords, servable: Servable, rows: int, now: float) -> bool:
        total = batch.rows + rows
        if total > self.max_rows or now - batch.opened >= self.max_wait:
            return False
        return _one_engine(servable, batch.rows, rows)

    def _flush(self, key: Hashable, batch: _Open | _OpenRecords) -> None:
        if self._open.get(key) is not batch:
            return  # flushed already (full, or open too long)
        del self._open[key]
        outcomes: list[Any] = []  # a Prediction (a Checked for records) or an Exception each
        waiting: list[asyncio.Future[Any]] = list(batch.waiting)
        if self._engine is not None and _beside(batch):  # beside the loop
            loop = asyncio.get_running_loop()
            self._engine.run(partial(self._outcomes, batch), loop, partial(_settle, waiting))
            return
        try:
            outcomes = self._outcomes(batch)
        finally:  # interrupted (not by an Exception: those are outcomes): nobody waits on
            for future in waiting if not outcomes else ():
                if not future.done():
                    future.set_exception(RuntimeError("the batched prediction was interrupted"))
        _settle(waiting, outcomes)

    def close(self) -> None:
        """Stop the engine thread (when there is one) once its work is done."""
        if self._engine is not None:
            self._engine.close()

    def _outcomes(self, batch: _Open | _OpenRecords) -> list[Any]:
        """A Prediction (a Checked for records) or an Exception for each request."""
        if isinstance(batch, _OpenRecords):
            return list(self._answer_records(batch))
        return list(self._answer(batch.servable, batch.parts, batch.options))

    # --- in worker threads ------------------------------------------------------------

    def predict_blocking(
        self, servable: Servable, columns: Columns, options: PredictOptions
    ) -> Prediction:
        """The prediction of ``columns``, joined with the requests that queued while the
        engine was busy with the same key (blocking: a worker thread's call)."""
        rows = row_count(columns)
        if not self._joins(servable, rows, options) or _on_event_loop():
            return self._alone(servable, columns, options)
        key = (id(servable), batch_key(columns, options))
        job = _Job(columns, rows)
        with self._lock:
            lane = self._lanes.get(key)
            if lane is None:
                self._lanes[key] = _Lane()
                job.lead = [job]
            else:
                lane.queue.append(job)
        if job.lead is None:
            job.done.wait()
        while job.lead is not None:
            batch, job.lead = job.lead, None
            self._lead(key, servable, options, batch)
        if job.outcome is None:  # its leader was interrupted (not an Exception)
            raise RuntimeError("the batched prediction was interrupted")
        if isinstance(job.outcome, Exception):
            raise job.outcome
        return job.outcome

    def _lead(
        self, key: Hashable, servable: Servable, options: PredictOptions, batch: list[_Job]
    ) -> None:
        """Answer ``batch``, then hand the queue to its first job (or close the lane),
        whatever happened: a lane left busy would hold its key's requests forever."""
        try:
            outcomes = self._answer(servable, [job.columns for job in batch], options)
            for job, outcome in zip(batch, outcomes, strict=True):
                job.outcome = outcome
        finally:
            with self._lock:
                lane = self._lanes[key]
                taken = self._take(servable, lane.queue)
                if taken:
                    taken[0].lead = taken
                else:
                    del self._lanes[key]
            for job in batch:
                job.done.set()
            if taken:
                taken[0].done.set()

    def _take(self, servable: Servable, queue: list[_Job]) -> list[_Job]:
        """The next batch from ``queue`` (in order, within the row cap and one engine)."""
        if not queue:
            return []
        taken: list[_Job] = []
        kept: list[_Job] = []
        total = 0
        for job in queue:
            joined = total + job.rows
            if not taken or (joined <= self.max_rows and _one_engine(servable, total, job.rows)):
                taken.append(job)
                total = joined
            else:
                kept.append(job)
        queue[:] = kept
        return taken

    # --- the engine call --------------------------------------------------------------

    def _answer(
        self, servable: Servable, parts: Sequence[Part], options: PredictOptions
    ) -> list[Outcome]:
        """One call for all ``parts``; if it fails, one call each (each its own outcome)."""
        sizes = [row_count(part) for part in parts]
        try:
            joined = _lone_row(servable, parts[0], options) if len(parts) == 1 else None
            if joined is None:
                joined = servable.predict(concat_columns(parts), options)
        except Exception as exc:
            if len(parts) == 1:
                self.metrics.observe_batch(sizes[0], 1)
                return [exc]
        else:
            self.metrics.observe_batch(sum(sizes), len(parts))
            return list(split_prediction(joined, sizes))
        return [self._outcome(servable, as_columns(part), options) for part in parts]

    def _answer_records(self, batch: _OpenRecords) -> list[Checked | Exception]:
        """The batch's records checked together and answered by one call; else each
        checked alone (its own problems, warnings and dtypes) and the good ones answered
        together, by batch key (see :meth:`_answer`)."""
        servable, options = batch.servable, batch.options
        together = check_records_together(servable.signature, [r[0] for r in batch.requests])
        if together is not None:
            count = len(batch.requests)
            try:
                joined = servable.predict(together.columns, options)
            except Exception:  # answered one by one below, each its own outcome
                pass
            else:
                self.metrics.observe_batch(count, count)
                split = split_prediction(joined, [1] * count)
                return [(answer, list(together.warnings)) for answer in split]
        outcomes: dict[int, Checked | Exception] = {}
        groups: dict[Hashable, list[tuple[int, CheckedColumns]]] = {}
        for i, instances in enumerate(batch.requests):
            try:
                one = check_rows(servable.signature, instances, batch.max_rows)
            except Exception as exc:
                outcomes[i] = exc
            else:
                groups.setdefault(batch_key(one.columns, options), []).append((i, one))
        for members in groups.values():
            answers = self._answer(servable, [one.columns for _, one in members], options)
            for (i, one), answer in zip(members, answers, strict=True):
                outcomes[i] = answer if isinstance(answer, Exception) else (answer, one.warnings)
        return [outcomes[i] for i in range(len(batch.requests))]

    def _outcome(self, servable: Servable, columns: Columns, options: PredictOptions) -> Outcome:
        try:
            return self._alone(servable, columns, options)
        except Exception as exc:
            return exc

    def _alone(self, servable: Servable, columns: Columns, options: PredictOptions) -> Prediction:
        prediction = servable.predict(columns, options)
        self.metrics.observe_batch(len(prediction.predictions), 1)
        return prediction


def _lone_row(servable: Servable, part: Part, options: PredictOptions) -> Prediction | None:
    """The answer to a lone row of a matrix (a one-row Arrow body, answered alone or in
    a batch of its own) by the servable's lane for lone rows, when it takes it: the same
    answer as ``predict``'s, without the column views, the stack and the general answer
    (``Servable.predict_row``); else None."""
    if isinstance(part, MatrixRows) and part.matrix.shape[0] == 1:
        return servable.predict_row(part.names, part.matrix, options)
    return None


def _settle(waiting: list[asyncio.Future[Any]], outcomes: list[Any] | None) -> None:
    """Each waiting request's outcome (None: the batch's answer was interrupted)."""
    if outcomes is None:
        outcomes = [RuntimeError("the batched prediction was interrupted") for _ in waiting]
    for future, outcome in zip(waiting, outcomes, strict=True):
        if future.done():  # the request was cancelled (client gone)
            continue
        if isinstance(outcome, Exception):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def _beside(batch: _Open | _OpenRecords) -> bool:
    """Whether a joined batch is answered on the engine thread: JSON records only, and
    ``_BESIDE_FROM`` of them or more.  Checked tables (Arrow, columnar JSON) stay on the
    loop: one-row Arrow requests of the 100-tree forest at 16 clients, thread off against
    on, alternating rounds, gave 1.20x req/s (6 of 8 rounds) and 336 against 411 us of
    server CPU a request; JSON records gave 1.06x (5 of 8) the other way (issue 24).
    Measured again once one-row Arrow requests were joined by their matrices
    (``MatrixRows``: 250 us of server CPU a request, not 318): tables beside the loop
    gave 0.86x req/s (2 of 8 rounds above), and only their batches of 8 or more 0.86x
    too (2 of 8)."""
    return isinstance(batch, _OpenRecords) and len(batch.waiting) >= _BESIDE_FROM


def _one_engine(servable: Servable, rows: int, more: int) -> bool:
    """Would ``rows`` joined by ``more`` rows be answered by the engine each gets alone?"""
    engine = servable.engine_for(rows)
    return servable.engine_for(rows + more) is engine and servable.engine_for(more) is engine


def _on_event_loop() -> bool:
    """Is this the event loop's thread (which must never wait for another request)?"""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
