"""Following a job from the terminal: a live progress bar, and Ctrl-C that asks whether
to cancel the job (and cancels it without asking when nobody can answer)."""

from __future__ import annotations

import contextlib
import sys

import click

from ensemble_client.cli.app import INTERRUPTED, State
from ensemble_client.errors import ConflictError
from ensemble_client.models import Job

CANCEL_WAIT_S = 60.0


def follow(state: State, job: Job) -> Job:
    """Wait for ``job`` with a progress bar (in a terminal); the ended job."""
    try:
        return state.client.jobs.wait(job)
    except KeyboardInterrupt:
        click.echo(err=True)
        if _wants_cancel(job):
            _cancel(state, job)
        else:
            click.echo(
                f"job {job.id} keeps running; follow it with: ensemble jobs wait {job.id}",
                err=True,
            )
        raise click.exceptions.Exit(INTERRUPTED) from None


def _wants_cancel(job: Job) -> bool:
    """Ask in a terminal (yes by default); with no terminal to answer, cancel."""
    if not sys.stdin.isatty():
        return True
    try:
        return click.confirm(f"Cancel job {job.id} ({job.model} v{job.version})?",
                             default=True, err=True)  # fmt: skip
    except click.Abort:  # a second Ctrl-C: leave without cancelling
        return False


def _cancel(state: State, job: Job) -> None:
    client = state.client
    with contextlib.suppress(ConflictError):  # it ended meanwhile: said below
        client.jobs.cancel(job.id)
    ended = client.jobs.wait(job.id, progress=False, timeout=CANCEL_WAIT_S)
    if ended.status == "cancelled":
        click.echo(f"cancelled job {job.id}; no version was made", err=True)
    else:
        click.echo(f"job {job.id} had already ended: {ended.status}", err=True)
