"""Models, versions, their artifacts and exports on SQL.

Files are removed after the row that refers to them is gone, so a crash leaves at worst
an unreferenced file (removed at the next start).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlalchemy.engine import Connection

from ensembles.errors import NotFoundError
from ensembles.registry import lifecycle, rows, versioning
from ensembles.registry.base import StoredExport
from ensembles.registry.names import validate_model_name
from ensembles.registry.records import ModelRecord, VersionRecord
from ensembles.registry.transactions import RESOLVED_MAX, SqlBase, utc_now


class SqlVersions(SqlBase):
    """The :class:`~ensembles.registry.base.VersionRegistry` and
    :class:`~ensembles.registry.base.ExportRegistry` roles on SQL."""

    def list_models(self) -> list[ModelRecord]:
        """Models with at least one visible version, by name."""
        with self._read() as conn:
            return rows.model_records(conn)

    def get_model(self, name: str) -> ModelRecord:
        name = validate_model_name(name)
        with self._read() as conn:
            return rows.model_record(conn, name)

    def delete_model(self, name: str) -> None:
        """Remove every version, alias and artifact; the counter stays (numbers continue).

        Queued jobs of the model are cancelled and running ones asked to stop, so a
        deleted model does not reappear when an old job finishes.
        """
        name = validate_model_name(name)

        def delete(conn: Connection) -> list[int]:
            numbers = versioning.delete_model(conn, name)
            lifecycle.stop_jobs_of_deleted_model(conn, name, utc_now())
            return numbers

        for number in self._run_write(delete):
            self.store.remove_artifact(name, number)

    def list_versions(self, name: str) -> list[VersionRecord]:
        """Visible versions, newest first."""
        name = validate_model_name(name)
        with self._read() as conn:
            return rows.version_records(conn, name)

    def get_version(self, name: str, ref: str | int) -> VersionRecord:
        """The version ``ref`` names: an int, a digit string, ``latest`` or an alias."""
        name = validate_model_name(name)
        with self._read() as conn:  # autobegun: both queries read the same snapshot
            return rows.fetch_version(conn, name, rows.resolve_ref(conn, name, ref))

    def resolve_version(self, name: str, ref: str | int) -> VersionRecord:
        """:meth:`get_version`, answered from memory while the database is unchanged.

        For the prediction path: a reference resolved once is reused until anything is
        committed to the database, by any process (SQLite's WAL-index header, else its
        ``data_version``: :mod:`ensembles.registry.changes`); other databases are asked
        every time.
        """
        token = self._changes.value()
        key = (name, str(ref))
        hit = self._resolved.get(key) if token is not None else None
        if hit is not None and hit[0] == token:
            return hit[1]
        record = self.get_version(name, ref)  # the token was read first: never too new
        if token is not None:
            if len(self._resolved) >= RESOLVED_MAX:
                self._resolved.clear()
            self._resolved[key] = (token, record)
        return record

    def resolved_version(self, name: str, ref: str | int) -> VersionRecord | None:
        """What :meth:`resolve_version` holds in memory for ``ref`` if still current, else
        None; never reads the database."""
        token = self._changes.value()
        hit = self._resolved.get((name, str(ref))) if token is not None else None
        return hit[1] if hit is not None and hit[0] == token else None

    def delete_version(self, name: str, version: int) -> None:
        """Delete a version and its artifact; ConflictError names the aliases on it."""
        name = validate_model_name(name)
        self._run_write(lambda conn: versioning.delete_version(conn, name, version))
        self.store.remove_artifact(name, version)

    def read_artifact(self, name: str, version: int) -> bytes:
        """A visible version's artifact bytes, verified against the recorded sha256."""
        record = self._visible(name, version)
        try:
            return self.store.read_artifact(
                name, version, record.artifact_sha256, record.artifact_size
            )
        except Exception:
            self._visible(name, version)  # deleted meanwhile: NotFoundError, not damage
            raise

    def load_model(self, name: str, version: int) -> object:
        """Unpickle a version's model, only after its bytes matched the recorded sha256."""
        record = self._visible(name, version)
        try:
            return self.store.load_artifact(
                name, version, record.artifact_sha256, record.artifact_size
            )
        except Exception:
            self._visible(name, version)  # deleted meanwhile: NotFoundError, not damage
            raise

    def read_export(self, name: str, version: int, fmt: str) -> StoredExport | None:
        """A visible version's export kept beside its artifact, verified, or None."""
        self._visible(name, version)
        try:
            return self.store.read_export(name, version, fmt)
        except Exception:
            self._visible(name, version)  # deleted meanwhile: NotFoundError, not damage
            raise

    def write_export(
        self, name: str, version: int, fmt: str, data: bytes, info: Mapping[str, str]
    ) -> StoredExport:
        """Keep an export of a visible version and return the one every reader is served
        (ours, or a twin's computed at the same time by another replica)."""
        self._visible(name, version)
        written = self.store.write_export(name, version, fmt, data, info)
        try:
            self._visible(name, version)
        except NotFoundError:  # deleted while we wrote: remove what may have outlived it
            self.store.remove_artifact(name, version)
            raise
        kept = self.store.read_export(name, version, fmt)
        return kept if kept is not None else StoredExport(data, written.sha256, dict(info))

    def _visible(self, name: str, version: int) -> VersionRecord:
        name = validate_model_name(name)
        with self._read() as conn:
            return rows.fetch_version(conn, name, version)


if TYPE_CHECKING:
    from ensembles.registry.base import ExportRegistry, VersionRegistry

    def _implements_the_roles(part: SqlVersions) -> tuple[VersionRegistry, ExportRegistry]:
        return part, part  # mypy proves the part alone satisfies its roles
