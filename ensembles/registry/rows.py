"""Reading the registry tables: row-to-record conversion and reference resolution.

Functions here take an open connection and never commit, so ``sql.py`` decides the
transaction boundaries (a read can then see one consistent snapshot, and a write can
check and change state under the same lock).
"""

from __future__ import annotations

from collections import defaultdict
from typing import cast

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from ensembles.errors import NotFoundError
from ensembles.registry.names import LATEST, is_alias, is_version_number, parse_version_number
from ensembles.registry.records import DatasetRecord, JobRecord, ModelRecord, VersionRecord
from ensembles.registry.schema import alias_weights, aliases, datasets, jobs, models, versions


def dataset_record(row: RowMapping) -> DatasetRecord:
    return DatasetRecord(
        id=row["id"],
        name=row["name"],
        n_rows=int(row["n_rows"]),
        n_columns=int(row["n_columns"]),
        sha256=row["sha256"],
        size_bytes=int(row["size_bytes"]),
        columns=list(row["columns"]),
        created_at=row["created_at"],
    )


def job_record(row: RowMapping) -> JobRecord:
    return JobRecord(
        id=row["id"],
        model=row["model"],
        version=int(row["version"]),
        status=row["status"],
        progress=dict(row["progress"]),
        request=dict(row["request"]),
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        error=None if row["error"] is None else dict(row["error"]),
        cancel_requested=bool(row["cancel_requested"]),
    )


def version_record(row: RowMapping, alias_names: list[str]) -> VersionRecord:
    return VersionRecord(
        model=row["model"],
        version=int(row["version"]),
        created_at=row["created_at"],
        aliases=sorted(alias_names),
        metadata=dict(row["metadata"]),
        artifact_sha256=row["artifact_sha256"],
        artifact_size=int(row["artifact_size"]),
        artifact_format=row["artifact_format"],
    )


def fetch_dataset(conn: Connection, dataset_id: str) -> DatasetRecord:
    row = conn.execute(sa.select(datasets).where(datasets.c.id == dataset_id)).mappings().first()
    if row is None:
        raise NotFoundError(f"dataset {dataset_id!r} not found")
    return dataset_record(row)


def fetch_job(conn: Connection, job_id: str, *, for_update: bool = False) -> JobRecord:
    query = sa.select(jobs).where(jobs.c.id == job_id)
    if for_update:
        query = query.with_for_update()
    row = conn.execute(query).mappings().first()
    if row is None:
        raise NotFoundError(f"job {job_id!r} not found")
    return job_record(row)


def model_missing(name: str) -> NotFoundError:
    return NotFoundError(f"model {name!r} not found")


def alias_missing(name: str, alias: str) -> NotFoundError:
    return NotFoundError(f"model {name!r} has no alias {alias!r}")


def alias_map(conn: Connection, name: str | None = None) -> dict[str, dict[str, int]]:
    """model -> {alias: version}, for one model or for all."""
    query = sa.select(aliases.c.model, aliases.c.alias, aliases.c.version)
    if name is not None:
        query = query.where(aliases.c.model == name)
    result: defaultdict[str, dict[str, int]] = defaultdict(dict)
    for row in conn.execute(query).mappings():
        result[row["model"]][row["alias"]] = int(row["version"])
    return {model: dict(sorted(found.items())) for model, found in result.items()}


def model_records(conn: Connection, name: str | None = None) -> list[ModelRecord]:
    """Models with at least one visible version (the definition of "a model exists")."""
    latest = sa.func.max(versions.c.version).label("latest")
    query = (
        sa.select(models.c.name, models.c.created_at, latest)
        .join(versions, versions.c.model == models.c.name)
        .group_by(models.c.name, models.c.created_at)
        .order_by(models.c.name)
    )
    if name is not None:
        query = query.where(models.c.name == name)
    by_model = alias_map(conn, name)
    return [
        ModelRecord(
            name=row["name"],
            created_at=row["created_at"],
            latest_version=int(row["latest"]),
            aliases=by_model.get(row["name"], {}),
        )
        for row in conn.execute(query).mappings()
    ]


def model_record(conn: Connection, name: str) -> ModelRecord:
    found = model_records(conn, name)
    if not found:
        raise model_missing(name)
    return found[0]


def latest_version(conn: Connection, name: str) -> int | None:
    value = conn.execute(
        sa.select(sa.func.max(versions.c.version)).where(versions.c.model == name)
    ).scalar_one_or_none()
    return None if value is None else int(value)


def resolve_ref(conn: Connection, name: str, ref: str | int) -> int:
    """The version number ``ref`` names: an int, a digit string, ``latest`` or an alias."""
    if isinstance(ref, bool):
        raise NotFoundError(f"model {name!r} has no version {ref!r}")
    if isinstance(ref, int):
        return ref
    if ref == LATEST:
        number = latest_version(conn, name)
        if number is None:
            raise model_missing(name)
        return number
    parsed = parse_version_number(ref)
    if parsed is not None:
        return parsed
    if is_alias(ref):
        target = conn.execute(
            sa.select(aliases.c.version).where(aliases.c.model == name, aliases.c.alias == ref)
        ).scalar_one_or_none()
        if target is not None:
            return int(target)
        if latest_version(conn, name) is None:
            raise model_missing(name)
        raise alias_missing(name, ref)
    raise NotFoundError(f"model {name!r} has no version or alias {ref!r}")


def fetch_version(conn: Connection, name: str, number: int) -> VersionRecord:
    if not is_version_number(number):  # the driver would overflow on it
        raise NotFoundError(f"model {name!r} has no version {number}")
    row = (
        conn.execute(
            sa.select(versions).where(versions.c.model == name, versions.c.version == number)
        )
        .mappings()
        .first()
    )
    if row is None:
        if latest_version(conn, name) is None:
            raise model_missing(name)
        raise NotFoundError(f"model {name!r} has no version {number}")
    pointing = conn.execute(
        sa.union(
            sa.select(aliases.c.alias).where(aliases.c.model == name, aliases.c.version == number),
            sa.select(alias_weights.c.alias).where(
                alias_weights.c.model == name, alias_weights.c.version == number
            ),
        )
    ).scalars()
    return version_record(row, [cast(str, alias) for alias in pointing])


def version_records(conn: Connection, name: str) -> list[VersionRecord]:
    """Visible versions of ``name``, newest first (NotFoundError when there are none)."""
    rows = (
        conn.execute(
            sa.select(versions).where(versions.c.model == name).order_by(versions.c.version.desc())
        )
        .mappings()
        .all()
    )
    if not rows:
        raise model_missing(name)
    by_version: defaultdict[int, list[str]] = defaultdict(list)
    for alias, number in alias_map(conn, name).get(name, {}).items():
        by_version[number].append(alias)
    split = sa.select(alias_weights.c.alias, alias_weights.c.version).where(
        alias_weights.c.model == name
    )
    for alias, number in conn.execute(split):
        if alias not in by_version[int(number)]:
            by_version[int(number)].append(str(alias))
    return [version_record(row, by_version[int(row["version"])]) for row in rows]
