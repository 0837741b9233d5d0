"""``python -m app`` with a census of the event loop's batching: how many one-row
requests reach the batcher in one loop turn, and how many requests each engine call
answers.  Written as JSON to ``$BATCH_CENSUS`` when the server stops (SIGTERM).

Used by ``batch_turn_ab.py --census``; it counts by wrapping :class:`app.batching.Batcher`
and :class:`app.metrics.Metrics` methods that every tree of the project has, so it runs
against any tree on ``PYTHONPATH``.  The wrapping costs a little CPU per request: do not
take throughput figures from a census run.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
from collections import Counter
from typing import Any

from app.batching import Batcher
from app.metrics import Metrics

per_turn: Counter[int] = Counter()  # requests reaching the batcher in one loop turn
per_call: Counter[int] = Counter()  # requests answered by one engine call
_turn = [0]


def _end_turn() -> None:
    per_turn[_turn[0]] += 1
    _turn[0] = 0


def _counted(predict: Any) -> Any:
    async def predicting(self: Batcher, *args: Any, **kwargs: Any) -> Any:
        if _turn[0] == 0:
            asyncio.get_running_loop().call_soon(_end_turn)
        _turn[0] += 1
        return await predict(self, *args, **kwargs)

    return predicting


def _observed(observe: Any) -> Any:
    def observing(self: Metrics, rows: int, requests: int) -> None:
        per_call[requests] += 1
        observe(self, rows, requests)

    return observing


def _dump() -> None:
    path = os.environ.get("BATCH_CENSUS")
    if path:
        found = {"per_turn": dict(per_turn), "per_call": dict(per_call)}
        with open(path, "w") as file:
            json.dump(found, file)


def main() -> None:
    Batcher.predict = _counted(Batcher.predict)  # type: ignore[method-assign]
    if hasattr(Batcher, "predict_record"):  # one-record requests, checked in their batch
        Batcher.predict_record = _counted(Batcher.predict_record)  # type: ignore[method-assign]
    Metrics.observe_batch = _observed(Metrics.observe_batch)  # type: ignore[method-assign]
    atexit.register(_dump)
    from app.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
