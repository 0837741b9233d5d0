"""Making versions visible or gone, and moving aliases: SQL inside the caller's transaction.

Kept apart from the job transitions (``lifecycle.py``) because these rows are what
readers see: each function here is one step of a transaction that ``sql.py`` commits
only when the files on disk already agree.

Every transaction that adds, deletes or re-points a model's versions or aliases first
locks that model's counter row (:func:`lock_model`), so on PostgreSQL they are
serialized per model exactly as SQLite's database lock serializes all writers: a
version is never deleted under an alias being moved onto it, and a model deleted while
one of its jobs publishes ends with no version, whichever commits first.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ensembles.errors import ConflictError, StorageError
from ensembles.registry import rows
from ensembles.registry.base import StoredObject
from ensembles.registry.records import ARTIFACT_FORMAT, JobRecord
from ensembles.registry.schema import alias_shadows, alias_weights, aliases, models, versions


def artifact_block(given: object, written: StoredObject) -> dict[str, object]:
    """The document's ``artifact`` member: the caller's extras plus what was written."""
    block = dict(given) if isinstance(given, dict) else {}
    block.update(format=ARTIFACT_FORMAT, sha256=written.sha256, size_bytes=written.size)
    return block


def insert_version(
    conn: Connection,
    job: JobRecord,
    written: StoredObject,
    document: dict[str, object],
    now: datetime,
) -> None:
    """Insert the job's version; the model's ``created_at`` restarts if it had none."""
    if rows.latest_version(conn, job.model) is None:
        conn.execute(sa.update(models).where(models.c.name == job.model).values(created_at=now))
    conn.execute(
        sa.insert(versions).values(
            {
                "model": job.model,
                "version": job.version,
                "created_at": now,
                "metadata": document,
                "artifact_sha256": written.sha256,
                "artifact_size": written.size,
                "artifact_format": ARTIFACT_FORMAT,
                "job_id": job.id,
            }
        )
    )


def lock_model(conn: Connection, name: str) -> None:
    """Hold ``name``'s counter row until the transaction ends (a no-op on SQLite, whose
    write transactions hold the database lock already); nothing when it does not exist."""
    conn.execute(sa.select(models.c.name).where(models.c.name == name).with_for_update())


def delete_version(conn: Connection, name: str, number: int) -> None:
    """Delete one version row; refused while an alias points at it."""
    lock_model(conn, name)
    record = rows.fetch_version(conn, name, number)
    if record.aliases:
        listed = ", ".join(repr(alias) for alias in record.aliases)
        raise ConflictError(
            f"version {number} of model {name!r} is the target of alias {listed}: "
            "move or delete the alias first"
        )
    shadowing = conn.execute(
        sa.select(alias_shadows.c.alias).where(
            alias_shadows.c.model == name, alias_shadows.c.version == number
        )
    ).scalars()
    listed = ", ".join(repr(alias) for alias in sorted(shadowing))
    if listed:
        raise ConflictError(
            f"version {number} of model {name!r} is the shadow of alias {listed}: "
            "change the alias's shadow first"
        )
    conn.execute(sa.delete(versions).where(versions.c.model == name, versions.c.version == number))


def delete_model(conn: Connection, name: str) -> list[int]:
    """Delete every version and alias row of a model (the counter row stays)."""
    lock_model(conn, name)
    query = sa.select(versions.c.version).where(versions.c.model == name)
    numbers = [int(number) for number in conn.execute(query).scalars()]
    if not numbers:
        raise rows.model_missing(name)
    forget_routes(conn, name)
    conn.execute(sa.delete(aliases).where(aliases.c.model == name))
    conn.execute(sa.delete(versions).where(versions.c.model == name))
    return numbers


def set_alias(conn: Connection, name: str, alias: str, number: int, now: datetime) -> None:
    """Create or move an alias with a single UPDATE (or INSERT), never delete+insert.

    A reader therefore sees the old target or the new one, never no target. Two
    concurrent first settings of one alias are settled by the primary key: the loser's
    INSERT fails inside a savepoint and it moves the winner's row instead.
    """
    lock_model(conn, name)
    rows.fetch_version(conn, name, number)
    key = (aliases.c.model == name, aliases.c.alias == alias)
    for _ in range(3):
        moved = conn.execute(sa.update(aliases).where(*key).values(version=number, updated_at=now))
        if moved.rowcount == 1:
            return
        try:
            with conn.begin_nested():
                conn.execute(
                    sa.insert(aliases).values(
                        model=name, alias=alias, version=number, updated_at=now
                    )
                )
            return
        except sa.exc.IntegrityError:
            continue
    raise StorageError(f"could not set alias {alias!r} of model {name!r}")


def forget_routes(conn: Connection, name: str, alias: str | None = None) -> None:
    """Remove the weights and shadow of one alias, or of every alias of the model."""
    for table in (alias_weights, alias_shadows):
        where = [table.c.model == name] + ([table.c.alias == alias] if alias else [])
        conn.execute(sa.delete(table).where(*where))


def delete_alias(conn: Connection, name: str, alias: str) -> None:
    lock_model(conn, name)
    forget_routes(conn, name, alias)
    gone = conn.execute(
        sa.delete(aliases).where(aliases.c.model == name, aliases.c.alias == alias)
    ).rowcount
    if gone == 0:
        if rows.latest_version(conn, name) is None:
            raise rows.model_missing(name)
        raise rows.alias_missing(name, alias)
