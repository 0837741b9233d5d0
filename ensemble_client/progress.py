"""A training job's progress as a live bar: stage, done of total, elapsed time and ETA.

Shown with rich when it is installed and someone is watching (a terminal on stderr, or a
Jupyter notebook); silent otherwise, so scripts and logs stay clean.
"""

from __future__ import annotations

from typing import Any, Protocol

from ensemble_client.models import Job
from ensemble_client.tables import has


class JobProgress(Protocol):
    """What waiting for a job reports to: each polled state, then the end."""

    def update(self, job: Job) -> None: ...

    def close(self) -> None: ...


class Silent:
    """Reports nothing."""

    def update(self, job: Job) -> None:
        pass

    def close(self) -> None:
        pass


def describe(job: Job) -> str:
    stage = job.progress.stage or job.status
    return f"{job.model} v{job.version} {stage}"


class Bar:
    """A rich progress bar for one job, a line per counted stage (each stage counts its own
    units: trees fitted, folds scored, so the ETA is the stage's).

    Polling sees a stage's count now and then (1/300, 208/300, then the next stage): a stage
    the job has left is shown at its last count, N/N, and keeps its line; a stage without a
    count (preprocessing, 0/1) gives its line to the next. The job's success completes the
    stage it ended in.
    """

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console or Console(stderr=True),
            refresh_per_second=8,
        )
        self._task: Any = None
        self._stage: str | None = None
        self._total: int | None = None
        self._started = False

    def update(self, job: Job) -> None:
        total: int | None = job.progress.total or None
        done = job.progress.done
        if job.status == "succeeded":
            total = total or 1
            done = total
        if not self._started:
            self._progress.start()
            self._started = True
        if self._task is not None and job.progress.stage != self._stage:
            self._leave_stage()
        if self._task is None:
            self._task = self._progress.add_task(describe(job), total=total)
        self._progress.update(self._task, total=total, completed=done, description=describe(job))
        self._stage, self._total = job.progress.stage, total

    def _leave_stage(self) -> None:
        """The stage is over: a counted one shows N/N and stays, the others go."""
        if self._total is not None and self._total > 1:
            self._progress.update(self._task, completed=self._total)
            self._progress.stop_task(self._task)
        else:
            self._progress.remove_task(self._task)
        self._task = None

    def close(self) -> None:
        if self._started:
            self._progress.stop()
            self._started = False


def watching(console: Any = None) -> bool:
    """Whether a person sees stderr: a terminal or a notebook (and rich is installed)."""
    if not has("rich"):
        return False
    from rich.console import Console

    seen = console or Console(stderr=True)
    return bool(seen.is_terminal or seen.is_jupyter)


def progress_for(show: bool | None, console: Any = None) -> JobProgress:
    """A bar if ``show`` is True (and rich is installed), none if False, and if None a bar
    only when someone is watching."""
    if show is None:
        show = watching(console)
    if show and has("rich"):
        return Bar(console)
    return Silent()
