"""Weighted aliases and shadows: SQL inside the caller's transaction (see ``versioning``).

An alias row always names one version (the heaviest of its weights), so every reader
that expects one target still finds one; ``alias_weights`` adds the split and
``alias_shadows`` the shadow with its counts. A shadow's counts are one row that each
process adds its batches to (``UPDATE ... SET n = n + :d``, atomic on every backend),
guarded by the epoch of the setting they belong to: counts of a shadow since replaced are
dropped, never added to its successor.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ensembles.errors import NotFoundError, Problem
from ensembles.registry import rows, versioning
from ensembles.registry.records import AliasRecord, ShadowStatsRecord
from ensembles.registry.schema import alias_shadows, alias_weights, aliases, versions
from ensembles.routing import RouteError, ShadowCounts

_COUNTERS = tuple(ShadowCounts().as_dict())


def heaviest(weights: dict[int, float]) -> int:
    """The version an alias row names: the largest weight, the lowest number on a tie."""
    return min(weights, key=lambda number: (-weights[number], number))


def set_route(
    conn: Connection,
    name: str,
    alias: str,
    version: int | None,
    weights: dict[int, float] | None,
    shadow: int | None,
    now: datetime,
) -> None:
    """Point ``alias`` at one version or split it by ``weights``, with or without a shadow.

    Missing weighted or shadow versions are a RouteError naming each; a plain ``version``
    that is missing stays the 404 it always was. The shadow's counts restart only when
    the shadow changes.
    """
    versioning.lock_model(conn, name)
    if rows.latest_version(conn, name) is None:
        raise rows.model_missing(name)
    _check_exist(conn, name, weights, shadow)
    target = heaviest(weights) if weights is not None else version
    if target is None:
        raise ValueError("give a version or weights")
    conn.execute(sa.delete(alias_weights).where(*_key(alias_weights, name, alias)))
    versioning.set_alias(conn, name, alias, target, now)
    if weights is not None:
        conn.execute(
            sa.insert(alias_weights),
            [
                {"model": name, "alias": alias, "version": number, "weight": weight}
                for number, weight in weights.items()
            ],
        )
    _set_shadow(conn, name, alias, shadow, now)


def _check_exist(
    conn: Connection, name: str, weights: dict[int, float] | None, shadow: int | None
) -> None:
    wanted = set(weights or ()) | ({shadow} if shadow is not None else set())
    if not wanted:
        return
    query = sa.select(versions.c.version).where(
        versions.c.model == name, versions.c.version.in_(sorted(wanted))
    )
    found = {int(number) for number in conn.execute(query).scalars()}
    problems = [
        Problem(("versions", str(number)), f"model {name!r} has no version {number}")
        for number in (weights or {})
        if number not in found
    ]
    if shadow is not None and shadow not in found:
        problems.append(Problem(("shadow",), f"model {name!r} has no version {shadow}"))
    if problems:
        raise RouteError(f"{len(problems)} unknown version(s) for the alias", problems)


def _set_shadow(conn: Connection, name: str, alias: str, shadow: int | None, now: datetime) -> None:
    key = _key(alias_shadows, name, alias)
    current = conn.execute(sa.select(alias_shadows.c.version).where(*key)).scalar_one_or_none()
    if shadow is None or current != shadow:
        conn.execute(sa.delete(alias_shadows).where(*key))
    if shadow is not None and current != shadow:
        zeros = dict.fromkeys(_COUNTERS, 0)
        conn.execute(
            sa.insert(alias_shadows).values(
                model=name,
                alias=alias,
                version=shadow,
                epoch=uuid.uuid4().hex,
                since=now,
                **zeros,
            )
        )


def _key(table: sa.Table, name: str, alias: str) -> tuple[sa.ColumnElement[bool], ...]:
    return (table.c.model == name, table.c.alias == alias)


def fetch_alias(conn: Connection, name: str, alias: str) -> AliasRecord:
    found = alias_records(conn, name, alias)
    if not found:
        if rows.latest_version(conn, name) is None:
            raise rows.model_missing(name)
        raise rows.alias_missing(name, alias)
    return found[0]


def alias_records(conn: Connection, name: str, alias: str | None = None) -> list[AliasRecord]:
    """The aliases of a model (or one of them) with their weights and shadows, by name."""
    query = sa.select(aliases.c.alias, aliases.c.version).where(aliases.c.model == name)
    weights_query = sa.select(alias_weights).where(alias_weights.c.model == name)
    shadow_query = sa.select(alias_shadows).where(alias_shadows.c.model == name)
    if alias is not None:
        query = query.where(aliases.c.alias == alias)
        weights_query = weights_query.where(alias_weights.c.alias == alias)
        shadow_query = shadow_query.where(alias_shadows.c.alias == alias)
    split: defaultdict[str, dict[int, float]] = defaultdict(dict)
    for row in conn.execute(weights_query.order_by(alias_weights.c.version)).mappings():
        split[row["alias"]][int(row["version"])] = float(row["weight"])
    shadows = {row["alias"]: row for row in conn.execute(shadow_query).mappings()}
    records = []
    for row in conn.execute(query.order_by(aliases.c.alias)).mappings():
        shadow = shadows.get(row["alias"])
        records.append(
            AliasRecord(
                model=name,
                alias=row["alias"],
                version=int(row["version"]),
                weights=split.get(row["alias"]),
                shadow=None if shadow is None else int(shadow["version"]),
                shadow_epoch=None if shadow is None else str(shadow["epoch"]),
            )
        )
    return records


def add_counts(conn: Connection, name: str, alias: str, epoch: str, counts: ShadowCounts) -> bool:
    """Add a batch of counts to the shadow's row; False when the shadow was changed since."""
    increments = {
        column: alias_shadows.c[column] + value for column, value in counts.as_dict().items()
    }
    done = conn.execute(
        sa.update(alias_shadows)
        .where(*_key(alias_shadows, name, alias), alias_shadows.c.epoch == epoch)
        .values(increments)
    )
    return done.rowcount == 1


def fetch_stats(conn: Connection, name: str, alias: str) -> ShadowStatsRecord:
    row = (
        conn.execute(sa.select(alias_shadows).where(*_key(alias_shadows, name, alias)))
        .mappings()
        .first()
    )
    if row is None:
        fetch_alias(conn, name, alias)  # 404 for the model or the alias first
        raise NotFoundError(f"alias {alias!r} of model {name!r} has no shadow")
    return ShadowStatsRecord(
        model=name,
        alias=alias,
        shadow=int(row["version"]),
        since=row["since"],
        requests=int(row["requests"]),
        rows=int(row["rows"]),
        compared=int(row["compared"]),
        agreements=int(row["agreements"]),
        abs_difference=float(row["abs_difference"]),
        errors=int(row["errors"]),
        dropped=int(row["dropped"]),
    )
