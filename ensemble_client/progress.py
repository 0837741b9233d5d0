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
    """A rich progress bar for one job; the bar restarts when the stage changes (each
    stage counts its own units: trees fitted, folds scored), so the ETA is the stage's."""

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
        self._started = False

    def update(self, job: Job) -> None:
        total: int | None = job.progress.total or None
        done = job.progress.done
        if job.status == "succeeded":
            total = total or 1
            done = total
        description = describe(job)
        if not self._started:
            self._progress.start()
            self._started = True
        if self._task is None:
            self._task = self._progress.add_task(description, total=total, completed=done)
        elif job.progress.stage != self._stage:
            self._progress.reset(self._task, total=total, completed=done, description=description)
        else:
            self._progress.update(self._task, total=total, completed=done, description=description)
        self._stage = job.progress.stage

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
