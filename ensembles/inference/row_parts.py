"""A big request's rows answered in parts, on several threads, with the same bits.

Why: the stored models predict in one thread (their ``n_jobs`` is one, so that answers
are repeatable), and so does the in-process floor a served request is measured against.
A request of 10,000 rows is the floor's work plus a fixed cost of the service (reading
the body, uvicorn receiving it, writing the answer) that no single-threaded prediction can
hide; the server's other cores sit idle meanwhile.  Answered in contiguous parts on
``threads`` threads (the calling one takes the first part), the prediction itself takes
about ``1 / threads`` of its wall time.  Figures: docs/performance.md.

Exactness: only engines whose answer for a row reads that row alone, in the calling
thread (``Engine.rows_apart``: tree ensembles of one thread, GTIL), are split; each part
is the same computation on fewer rows, so every row's bits are those of one call on all
of them.  Everything else is answered in one call, as before.

An engine may answer a part its own way (``answer_part``: scikit-learn's gradient
boosting walks its trees outside the GIL, which costs more CPU than the library's own
walk, about a tenth, :mod:`ensembles.inference.boosted_sum`); such an engine is split only
while no other request's part is running on the pool, since otherwise the cores are busy
already and the extra CPU buys nothing.

An engine whose library splits rows among threads of its own with the same bits (XGBoost,
:mod:`ensembles.inference.library_threads`) answers a big request in one call on
``threads`` threads instead, while no other request's parts are running: one call costs
less than the parts' calls.

Small requests never split (``min_rows`` rows per part at least): a thread's handoff costs
tens of microseconds, and concurrent small requests already use every core.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.inference.engines import Answer, Engine

__all__ = ["DEFAULT_MIN_ROWS", "RowParts"]

DEFAULT_MIN_ROWS = 2_000  # rows per part at least (measured: docs/performance.md)


@dataclass(frozen=True)
class RowParts:
    """How many threads one request's rows may be answered on, and the least rows a part
    takes.  The default (one thread) answers every request in one call."""

    threads: int = 1
    min_rows: int = DEFAULT_MIN_ROWS

    def __post_init__(self) -> None:
        if self.threads < 1 or self.min_rows < 1:
            raise ValueError(f"threads and min_rows must be at least 1, not {self}")

    def parts_for(self, n_rows: int) -> int:
        """Into how many parts a request of ``n_rows`` rows is cut (1: not cut)."""
        return max(1, min(self.threads, n_rows // self.min_rows))

    def answer(self, engine: Engine, Xt: NDArray[Any], *, with_proba: bool = False) -> Answer:
        """The engine's answer for ``Xt``: in parts when it is big and the engine allows."""
        parts = self.parts_for(Xt.shape[0])
        if parts == 1 or not engine.rows_apart:
            return engine.answer(Xt, with_proba=with_proba)
        threaded = _threaded(engine, Xt, parts, with_proba)
        if threaded is not None:
            return threaded
        # An engine may answer parts its own way, which lets them run side by side at a
        # price in CPU (scikit-learn's gradient boosting: its trees walked outside the
        # GIL, about a tenth more CPU): worth it only while the pool's threads are idle;
        # when another request's parts are running, the cores are busy already.
        answer = getattr(engine, "answer_part", None)
        if answer is not None and _BUSY[0] > 0:
            return engine.answer(Xt, with_proba=with_proba)
        answer = answer or engine.answer
        bounds = np.linspace(0, Xt.shape[0], parts + 1).astype(np.intp).tolist()
        (lo, hi), *others = itertools.pairwise(bounds)
        pool = _pool(self.threads - 1)
        with _BUSY_LOCK:
            _BUSY[0] += len(others)
        futures: list[Future[Answer]] = [
            pool.submit(_part, answer, Xt[a:b], with_proba) for a, b in others
        ]
        first = answer(Xt[lo:hi], with_proba=with_proba)
        return _joined([first, *(f.result() for f in futures)])


def _threaded(engine: Engine, Xt: NDArray[Any], threads: int, with_proba: bool) -> Answer | None:
    """The engine's answer in one call on ``threads`` threads of its library, when it can
    give one with the same bits (XGBoost: ``SklearnEngine.answer_threads``) and no other
    request's parts are running (its threads then count as parts); else None."""
    answer = getattr(engine, "answer_threads", None)
    if answer is None or _BUSY[0] > 0:
        return None
    with _BUSY_LOCK:
        _BUSY[0] += threads - 1
    try:
        found: Answer | None = answer(Xt, threads, with_proba=with_proba)
        return found
    finally:
        with _BUSY_LOCK:
            _BUSY[0] -= threads - 1


def _joined(answers: list[Answer]) -> Answer:
    """The parts' answers as one, rows in order."""
    predictions = np.concatenate([a.predictions for a in answers])
    first = answers[0].probabilities
    probabilities = None if first is None else np.concatenate([a.probabilities for a in answers])
    engines = {a.engine for a in answers}
    if len(engines) != 1:  # one engine answered every part: it was asked by name
        raise RuntimeError(f"the parts of one answer came from {sorted(engines)}")
    return Answer(predictions, probabilities, answers[0].engine)


_BUSY = [0]  # parts submitted to a pool and not done yet (any pool of this process)
_BUSY_LOCK = threading.Lock()


def _part(answer: Callable[..., Answer], Xt: NDArray[Any], with_proba: bool) -> Answer:
    """One part answered on a pool thread, counted as running until its answer is made."""
    try:
        return answer(Xt, with_proba=with_proba)
    finally:
        with _BUSY_LOCK:
            _BUSY[0] -= 1


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools() -> None:
    """A forked child has none of its parent's threads, nor their parts."""
    _POOLS.clear()
    _BUSY[0] = 0


os.register_at_fork(after_in_child=_forget_pools)


def _pool(workers: int) -> ThreadPoolExecutor:
    """The process's pool of ``workers`` threads for the other parts (made on first use,
    so a forked process makes its own)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="row-parts")
            _POOLS[workers] = pool
        return pool
