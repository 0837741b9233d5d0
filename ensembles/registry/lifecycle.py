"""Job state transitions, as SQL run inside the caller's write transaction.

queued -> running -> succeeded | failed | cancelled, and queued -> cancelled | failed.
Each function reads the job under the write lock (``FOR UPDATE`` on Postgres; SQLite's
``BEGIN IMMEDIATE`` already excludes other writers), checks the transition is allowed
and applies it, so two processes can never both move one job.

The jobs table is also the service's queue, shared by every process of the service:
:func:`submit` refuses a job beyond a bound on open jobs and :func:`start_next` starts
the oldest queued job only while fewer than a bound run, each counting inside its write
transaction (serialized by the database lock on SQLite, by an advisory lock on
Postgres), so no interleaving of processes exceeds either bound.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Final, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ensembles.errors import ConflictError, QueueFullError, StorageError
from ensembles.registry import rows
from ensembles.registry.records import UNFINISHED, JobRecord, job_problem
from ensembles.registry.schema import jobs, models

INTERRUPTED_RUNNING: Final = "interrupted: the service stopped while this job was running"
INTERRUPTED_QUEUED: Final = "interrupted: the service stopped before this job started"
_SCHEDULING_LOCK_KEY: Final = 0x456E734A  # arbitrary, constant: "EnsJ"

Ending = Literal["succeeded", "failed", "cancelled"]


def new_job_id() -> str:
    return f"job_{secrets.token_hex(12)}"


def allocate_version(conn: Connection, name: str, now: datetime) -> int:
    """Increment the model's counter (creating it at 1); never ``max(version) + 1``.

    The UPDATE takes the row lock (Postgres) inside the caller's write transaction
    (SQLite: the database lock), so concurrent submitters get consecutive numbers. A
    concurrent first use of a name is settled by the primary key: the loser's INSERT
    fails inside a savepoint and it increments the winner's row instead.
    """
    for _ in range(3):
        bumped = conn.execute(
            sa.update(models)
            .where(models.c.name == name)
            .values(last_version=models.c.last_version + 1)
        )
        if bumped.rowcount == 1:
            query = sa.select(models.c.last_version).where(models.c.name == name)
            return int(conn.execute(query).scalar_one())
        try:
            with conn.begin_nested():
                conn.execute(sa.insert(models).values(name=name, last_version=1, created_at=now))
            return 1
        except sa.exc.IntegrityError:
            continue
    raise StorageError(f"could not allocate a version number for model {name!r}")


def lock_scheduling(conn: Connection) -> None:
    """Serialize the transactions that count open jobs before adding or starting one.

    SQLite: nothing to do, ``BEGIN IMMEDIATE`` holds the database's write lock already.
    Postgres: row locks cannot guard a count, so an advisory lock for the transaction.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEDULING_LOCK_KEY})


def open_counts(conn: Connection) -> tuple[int, int]:
    """How many jobs are queued and how many are running (one indexed ``GROUP BY``)."""
    query = (
        sa.select(jobs.c.status, sa.func.count())
        .where(jobs.c.status.in_(UNFINISHED))
        .group_by(jobs.c.status)
    )
    counts = {str(status): int(n) for status, n in conn.execute(query)}
    return counts.get("queued", 0), counts.get("running", 0)


def submit(
    conn: Connection,
    name: str,
    request: dict[str, object],
    owner: str,
    now: datetime,
    max_open: int | None = None,
) -> JobRecord:
    """Reserve the model's next version and queue a job holding it; with ``max_open``,
    QueueFullError when that many jobs are already queued or running."""
    if max_open is not None:
        lock_scheduling(conn)
        queued, running = open_counts(conn)
        if queued + running >= max_open:
            raise QueueFullError(
                f"{queued} jobs are waiting and {running} running; retry when some have finished"
            )
    number = allocate_version(conn, name, now)
    job_id = new_job_id()
    conn.execute(
        sa.insert(jobs).values(
            id=job_id,
            model=name,
            version=number,
            status="queued",
            progress={"done": 0, "total": 0, "stage": "queued"},
            request=request,
            error=None,
            created_at=now,
            cancel_requested=False,
            owner=owner,
        )
    )
    return rows.fetch_job(conn, job_id)


def start(conn: Connection, job_id: str, owner: str, now: datetime) -> JobRecord:
    job = rows.fetch_job(conn, job_id, for_update=True)
    if job.status != "queued":
        raise ConflictError(f"job {job_id} is {job.status}; only a queued job can start")
    conn.execute(
        sa.update(jobs)
        .where(jobs.c.id == job_id)
        .values(
            status="running",
            started_at=now,
            owner=owner,
            progress={**job.progress, "stage": "starting"},
        )
    )
    return rows.fetch_job(conn, job_id)


def can_start_next(conn: Connection, max_running: int) -> bool:
    """Whether :func:`start_next` would start a job now (a read: no lock taken)."""
    queued, running = open_counts(conn)
    return queued > 0 and running < max_running


def start_next(conn: Connection, owner: str, max_running: int, now: datetime) -> JobRecord | None:
    """Start the oldest queued job, whoever queued it, if fewer than ``max_running`` run."""
    lock_scheduling(conn)
    _, running = open_counts(conn)
    if running >= max_running:
        return None
    # SKIP LOCKED: a queued job being cancelled right now is passed over, not waited for.
    oldest = (
        sa.select(jobs.c.id)
        .where(jobs.c.status == "queued")
        .order_by(jobs.c.created_at, jobs.c.id)
        .limit(1)
        .with_for_update(skip_locked=True)
    )
    job_id = conn.execute(oldest).scalar()
    if job_id is None:
        return None
    return start(conn, str(job_id), owner, now)


def fail_queued_of(
    conn: Connection, owner: str, problem: dict[str, object], now: datetime
) -> list[str]:
    """Fail the jobs ``owner`` queued that nobody has started; their ids.

    One conditional UPDATE: a job another process starts meanwhile is left alone.
    """
    failed = conn.execute(
        sa.update(jobs)
        .where(jobs.c.owner == owner, jobs.c.status == "queued")
        .values(status="failed", finished_at=now, error=problem)
        .returning(jobs.c.id)
    )
    return sorted(str(job_id) for job_id in failed.scalars())


def record_progress(conn: Connection, job_id: str, progress: dict[str, object]) -> None:
    """Progress of a running job; silently ignored once the job has ended."""
    changed = conn.execute(
        sa.update(jobs)
        .where(jobs.c.id == job_id, jobs.c.status == "running")
        .values(progress=progress)
    ).rowcount
    if changed == 0:
        rows.fetch_job(conn, job_id)  # NotFoundError for an unknown id


def request_cancel(conn: Connection, job_id: str, now: datetime) -> JobRecord:
    """Queued: cancelled at once. Running: flagged, it ends at its next check."""
    job = rows.fetch_job(conn, job_id, for_update=True)
    if job.status == "queued":
        end(conn, job, "cancelled", now)
    elif job.status == "running":
        conn.execute(sa.update(jobs).where(jobs.c.id == job_id).values(cancel_requested=True))
    else:
        raise ConflictError(f"job {job_id} already ended: it is {job.status}")
    return rows.fetch_job(conn, job_id)


def finish(
    conn: Connection,
    job_id: str,
    status: Literal["failed", "cancelled"],
    error: dict[str, object] | None,
    now: datetime,
) -> JobRecord:
    job = rows.fetch_job(conn, job_id, for_update=True)
    if job.status not in UNFINISHED:
        raise ConflictError(f"job {job_id} already ended: it is {job.status}")
    end(conn, job, status, now, error)
    return rows.fetch_job(conn, job_id)


def end(
    conn: Connection,
    job: JobRecord,
    status: Ending,
    now: datetime,
    error: dict[str, object] | None = None,
) -> None:
    """Write a final state; ``progress.stage`` says how it ended."""
    progress = {**job.progress, "stage": "done" if status == "succeeded" else status}
    if status == "succeeded":
        progress["done"] = progress.get("total", 0)
    values: dict[str, object] = {
        "status": status,
        "finished_at": now,
        "error": error,
        "progress": progress,
    }
    if status == "cancelled":
        values["cancel_requested"] = True
    conn.execute(sa.update(jobs).where(jobs.c.id == job.id).values(**values))


def cancel_if_unfinished(conn: Connection, job_id: str, now: datetime) -> None:
    job = rows.fetch_job(conn, job_id, for_update=True)
    if job.status in UNFINISHED:
        end(conn, job, "cancelled", now)


def fail_if_unfinished(
    conn: Connection, job_id: str, problem: dict[str, object], now: datetime
) -> None:
    conn.execute(
        sa.update(jobs)
        .where(jobs.c.id == job_id, jobs.c.status.in_(UNFINISHED))
        .values(status="failed", finished_at=now, error=problem)
    )


def interrupt(conn: Connection, owners: set[str | None], now: datetime) -> list[str]:
    """Fail the unfinished jobs of dead ``owners`` (None: jobs that never had one).

    Conditional UPDATEs: a queued job a live process starts meanwhile (it becomes its
    owner) is left alone.
    """
    named = {owner for owner in owners if owner is not None}
    owned: sa.ColumnElement[bool] = jobs.c.owner.in_(named)
    if None in owners:
        owned = sa.or_(owned, jobs.c.owner.is_(None))
    failed: list[str] = []
    for status, detail in (("running", INTERRUPTED_RUNNING), ("queued", INTERRUPTED_QUEUED)):
        problem = job_problem("interrupted", "Training interrupted", detail)
        ended = conn.execute(
            sa.update(jobs)
            .where(owned, jobs.c.status == status)
            .values(status="failed", finished_at=now, error=problem)
            .returning(jobs.c.id)
        )
        failed.extend(sorted(str(job_id) for job_id in ended.scalars()))
    return failed


def stop_jobs_of_deleted_model(conn: Connection, name: str, now: datetime) -> None:
    """Cancel queued jobs and flag running ones, so a deleted model does not reappear."""
    conn.execute(
        sa.update(jobs)
        .where(jobs.c.model == name, jobs.c.status == "queued")
        .values(
            status="cancelled",
            finished_at=now,
            cancel_requested=True,
            error=job_problem("cancelled", "Training cancelled", "the model was deleted"),
        )
    )
    conn.execute(
        sa.update(jobs)
        .where(jobs.c.model == name, jobs.c.status == "running")
        .values(cancel_requested=True)
    )
