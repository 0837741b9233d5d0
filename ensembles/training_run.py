"""A training run's progress, cancel token and member pool, shared by fitting and
the measuring after it (:mod:`ensembles.evaluation`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from joblib import parallel_config

from ensembles.errors import TrainingCancelledError
from ensembles.parallel import MemberPool, members_in_parallel

ProgressCallback = Callable[[int, int, str], None]


class CancelToken(Protocol):
    """Anything with ``is_set()``: threading.Event, multiprocessing.Event."""

    def is_set(self) -> bool: ...


@dataclass
class Run:
    on_progress: ProgressCallback | None
    cancel: CancelToken | None
    pool: MemberPool

    def report(self, done: int, total: int, stage: str) -> None:
        if self.on_progress is not None:
            self.on_progress(done, total, stage)

    def check(self) -> None:
        if self.cancelled():
            raise TrainingCancelledError("training was cancelled")

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    @contextmanager
    def predicting(self) -> Iterator[None]:
        """Measuring after the fit: scikit-learn's predictions and the members' own on
        threads of this process (the pool's size; never shipped to a cluster), whatever
        the estimators' ``n_jobs``. The member backend keeps a failing member's frames, so
        a refusal at predict time (k above the rows a member saw) is still placed."""
        local = MemberPool.local(self.pool.threads)
        with (
            members_in_parallel(local, cancelled=self.cancelled),
            parallel_config(n_jobs=self.pool.threads),
        ):
            yield

    @contextmanager
    def parallel(self, members: int | None = None, stage: str = "fitting") -> Iterator[None]:
        """Fit inside with members on the pool; ``members``: how many, for progress."""

        def progress(done: int) -> None:
            assert members is not None
            self.report(done, members, stage)

        with members_in_parallel(
            self.pool, members=members, on_progress=progress, cancelled=self.cancelled
        ):
            yield
