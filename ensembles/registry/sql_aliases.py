"""Aliases on SQL: on one version, weighted over several, or with a shadow."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection

from ensembles.registry import rollout, rows, versioning
from ensembles.registry.names import LATEST, is_alias, validate_alias, validate_model_name
from ensembles.registry.records import AliasRecord, ModelRecord, ShadowStatsRecord
from ensembles.registry.transactions import RESOLVED_MAX, SqlBase, utc_now
from ensembles.routing import ShadowCounts


class SqlAliases(SqlBase):
    """The :class:`~ensembles.registry.base.AliasRegistry` role on SQL."""

    def set_alias(
        self,
        name: str,
        alias: str,
        version: int | None = None,
        *,
        weights: dict[int, float] | None = None,
        shadow: int | None = None,
    ) -> ModelRecord:
        """Point ``alias`` at ``version``, or split it by ``weights`` (checked already:
        :func:`ensembles.routing.check_weights`), with an optional ``shadow``; one
        transaction, so readers see the old setting or the new one."""
        name, alias = validate_model_name(name), validate_alias(alias)

        def move(conn: Connection) -> ModelRecord:
            rollout.set_route(conn, name, alias, version, weights, shadow, utc_now())
            return rows.model_record(conn, name)

        return self._run_write(move)

    def get_alias(self, name: str, alias: str) -> AliasRecord:
        """An alias with its weights and shadow."""
        name, alias = validate_model_name(name), validate_alias(alias)
        with self._read() as conn:
            return rollout.fetch_alias(conn, name, alias)

    def list_aliases(self, name: str) -> list[AliasRecord]:
        name = validate_model_name(name)
        with self._read() as conn:
            return rollout.alias_records(conn, name)

    def resolve_alias(self, name: str, ref: str | int) -> AliasRecord | None:
        """The alias ``ref`` names, if it splits its traffic or has a shadow (None for
        numbers, ``latest`` and aliases on one version without one); answered from memory
        while the database is unchanged, like :meth:`resolve_version`."""
        if not isinstance(ref, str) or not is_alias(ref) or ref == LATEST:
            return None
        token = self._changes.value()
        key = (name, ref)
        hit = self._routes.get(key) if token is not None else None
        if hit is not None and hit[0] == token:
            return hit[1]
        name = validate_model_name(name)
        with self._read() as conn:
            found = rollout.alias_records(conn, name, ref)
        route = found[0] if found and (found[0].weights or found[0].shadow) else None
        if token is not None:
            if len(self._routes) >= RESOLVED_MAX:
                self._routes.clear()
            self._routes[key] = (token, route)
        return route

    def resolved_alias(self, name: str, ref: str | int) -> tuple[bool, AliasRecord | None]:
        """(known, what :meth:`resolve_alias` holds for ``ref``) without I/O; known is
        False when the database must be asked."""
        if not isinstance(ref, str) or not is_alias(ref) or ref == LATEST:
            return True, None
        token = self._changes.value()
        hit = self._routes.get((name, ref)) if token is not None else None
        if hit is None or hit[0] != token:
            return False, None
        return True, hit[1]

    def shadow_stats(self, name: str, alias: str) -> ShadowStatsRecord:
        """The alias's shadow counts since it was set (NotFoundError without a shadow)."""
        name, alias = validate_model_name(name), validate_alias(alias)
        with self._read() as conn:
            return rollout.fetch_stats(conn, name, alias)

    def add_shadow_counts(self, name: str, alias: str, epoch: str, counts: ShadowCounts) -> bool:
        """Add one process's batch of shadow counts; False if that shadow is gone."""
        return self._run_write(lambda conn: rollout.add_counts(conn, name, alias, epoch, counts))

    def delete_alias(self, name: str, alias: str) -> None:
        name, alias = validate_model_name(name), validate_alias(alias)
        self._run_write(lambda conn: versioning.delete_alias(conn, name, alias))


if TYPE_CHECKING:
    from ensembles.registry.base import AliasRegistry

    def _implements_the_role(part: SqlAliases) -> AliasRegistry:
        return part  # mypy proves the part alone satisfies its role
