"""One thread beside the event loop that answers the loop's joined batches of JSON records.

A batch of one-row requests (:mod:`app.batching`) was answered on the event loop, at the
end of the loop turn that collected it: the check of its rows, the servable's predict
(GTIL's C call, which releases the GIL, about a third of it) and the split, while the
loop could read and parse nothing. Under wrk at 16 clients the server process used
62-81% of one core (issue 24: ~220 us of CPU a request) and the host's second core,
where wrk runs, was partly idle. Here the batch's answer is computed on this thread,
and the loop, back at once, reads and parses the next requests, runs their middleware
and writes the answers ready, in particular while GTIL runs without the GIL; the
answers come back to the loop (``call_soon_threadsafe``), which settles the requests'
futures as before.

What is computed is the same call with the same arguments (the servable's, which the
worker-thread path of :class:`app.batching.Batcher` already calls from several threads),
so the bits are the same; the work runs in a copy of the context the loop would have run
it in (the request id of the log lines it writes). Only batches of one-record JSON
requests come here (:func:`app.batching._beside`): a request answered alone (the first
of its loop turn, nobody else waiting: one client), a batch of fewer than four
(:data:`app.batching._BESIDE_FROM`) and a batch of table bodies stay on the loop:
handing them over and back costs two wake-ups and the GIL's hand-overs, more than the
engine time it frees (one-row Arrow requests at 16 clients: 1.20x req/s with the thread
off, alternating rounds).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, Final

__all__ = ["EngineThread"]

Done = Callable[[list[Any] | None], None]  # the outcomes; None: the work was interrupted
_STOP: Final = None


class EngineThread:
    """A thread answering work handed to it in order, each answer handed back to the
    event loop that gave the work (started at the first work, stopped by :meth:`close`)."""

    def __init__(self, name: str = "batch-engine") -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[
            tuple[Callable[[], list[Any]], asyncio.AbstractEventLoop, Done, contextvars.Context]
            | None
        ] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(
        self, work: Callable[[], list[Any]], loop: asyncio.AbstractEventLoop, done: Done
    ) -> None:
        """``work()`` on the thread, in a copy of the caller's context, then
        ``done(outcomes)`` on ``loop`` (``done(None)`` if ``work`` raised)."""
        if self._thread is None:
            self._start()
        self._jobs.put((work, loop, done, contextvars.copy_context()))

    def close(self) -> None:
        """Stop the thread once the work handed to it is done (without waiting for it)."""
        with self._lock:
            if self._thread is not None:
                self._jobs.put(_STOP)
                self._thread = None

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                thread.start()
                self._thread = thread

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            work, loop, done, context = job
            outcomes: list[Any] | None = None
            try:
                outcomes = context.run(work)
            except BaseException:  # answered as interrupted: never lost, never raised here
                outcomes = None
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
                loop.call_soon_threadsafe(done, outcomes)
