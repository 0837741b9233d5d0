"""Requests the server process has taken whose app call has not begun yet.

uvicorn parses every request whose bytes arrived in an event-loop turn (``data_received``
of each ready socket, one after the other) before any of their tasks runs: each task is
created and waits in the loop's ready queue. So when a request's app call begins, the
requests counted here are the ones that will run in the same turn after it.  The
batcher (:mod:`app.batching`) reads the count: the first one-row prediction of a turn,
answered alone at once when nothing else came with it (a lone client never waits), joins
a batch instead when others are already waiting, and the turn's requests share one check
and one engine call where they shared two (issue 24: at 16 clients about six requests
arrive per turn, and half the engine calls answered the first of a turn alone; counted
under wrk, 3.3 requests per engine call before, 6.1 with the count, and the server's CPU
per request 13-17% lower, ``benchmarks/batch_turn_ab.py``).

The service's HTTP protocol (:class:`app.server.http_protocol.OneWriteHTTPProtocol`)
counts a request when it starts its task and uncounts it when the app call begins.  Any
other server (a test's client, plain uvicorn) counts nothing: every first request of a
turn is then answered alone, as before.  A task cancelled before it ever ran (uvicorn's
forced shutdown) stays counted: first requests of a turn would then join a batch closed
at the end of their turn, the same answers a turn later, in a process that is ending.
"""

from __future__ import annotations

from typing import Final

__all__ = ["ARRIVALS", "Arrivals"]


class Arrivals:
    """The count of requests taken whose app call has not begun (see the module)."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = 0


ARRIVALS: Final = Arrivals()  # the server process's
