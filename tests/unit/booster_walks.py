"""Counting what a fitted LightGBM model's booster walks, for tests that a figure is
taken without predicting again."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ensembles.kinds import lightgbm_kind

__all__ = ["walked_rounds"]


@contextmanager
def walked_rounds(estimator: Any) -> Iterator[list[int]]:
    """Rows x rounds that LightGBM's booster walks (its predict wrapped on this instance;
    it answers as before)."""
    booster = estimator.booster_
    walked = [0]
    own: Callable[..., Any] = booster.predict

    def predict(data: Any, *args: Any, **kwargs: Any) -> Any:
        rounds = kwargs.get("num_iteration")
        if rounds is None or rounds <= 0:
            rounds = lightgbm_kind.rounds_kept(estimator)
        walked[0] += len(data) * int(rounds)
        return own(data, *args, **kwargs)

    booster.predict = predict
    try:
        yield walked
    finally:
        del booster.__dict__["predict"]
