"""The schema is created and upgraded by the shipped Alembic migrations only."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path

import joblib
import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from ensembles.errors import StorageError
from ensembles.registry import SqlRegistry, database
from ensembles.registry.schema import metadata
from ensembles.registry.stores.artifacts import ArtifactFolder

FIRST = "0001_initial"


def _engine(data_dir: Path, url: str | None) -> sa.Engine:
    return database.create_engine(database.database_url(data_dir, url))


def test_an_empty_database_is_created_at_head(data_dir: Path, database_url: str | None) -> None:
    with SqlRegistry.open(data_dir, database_url):
        pass
    engine = _engine(data_dir, database_url)
    try:
        assert database.current_revision(engine) == database.head_revision()
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
            if database_url is None:
                assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
                assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
                assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            else:
                assert conn.exec_driver_sql("SHOW application_name").scalar() == "ensemble-service"
    finally:
        engine.dispose()
    expected = {"artifacts", "datasets"} | ({"registry.db"} if database_url is None else set())
    assert {p.name for p in data_dir.iterdir()} >= expected


def test_a_folder_made_by_the_first_migration_upgrades_in_place(
    data_dir: Path, database_url: str | None
) -> None:
    data_dir.mkdir(parents=True)
    engine = _engine(data_dir, database_url)
    database.upgrade(engine, FIRST)
    assert database.current_revision(engine) == FIRST
    written = ArtifactFolder(data_dir / "artifacts", "0" * 16)
    (data_dir / "artifacts").mkdir()
    artifact = written.write("old-model", 1, {"trained": "before the upgrade"})
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO models VALUES ('old-model', 2, :now)"), {"now": now.isoformat()}
        )
        conn.execute(
            sa.text(
                "INSERT INTO versions VALUES ('old-model', 1, :now, '{\"task\": \"regression\"}',"
                " :sha, :size, 'joblib', NULL)"
            ),
            {"now": now.isoformat(), "sha": artifact.sha256, "size": artifact.size},
        )
        conn.execute(
            sa.text("INSERT INTO aliases VALUES ('old-model', 'prod', 1, :now)"),
            {"now": now.isoformat()},
        )
        conn.execute(
            sa.text(
                "INSERT INTO jobs (id, model, version, status, progress, request, created_at)"
                " VALUES ('job_old', 'old-model', 2, 'running', '{}', '{}', :now)"
            ),
            {"now": now.isoformat()},
        )
    engine.dispose()

    with SqlRegistry.open(data_dir, database_url) as registry:
        version = registry.get_version("old-model", "prod")
        assert version.version == 1 and version.metadata == {"task": "regression"}
        assert registry.load_model("old-model", 1) == {"trained": "before the upgrade"}
        job = registry.get_job("job_old")
        assert job.status == "failed" and job.cancel_requested is False  # owner unknown: dead
        assert registry.submit_job("old-model", {}).version == 3
    engine = _engine(data_dir, database_url)
    try:
        assert database.current_revision(engine) == database.head_revision()
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    finally:
        engine.dispose()
    assert hashlib.sha256(written.path("old-model", 1).read_bytes()).hexdigest() == artifact.sha256
    assert joblib.load(written.path("old-model", 1)) == {"trained": "before the upgrade"}


def test_downgrade_to_first_and_back(data_dir: Path, database_url: str | None) -> None:
    with SqlRegistry.open(data_dir, database_url) as registry:
        job = registry.submit_job("m", {})
    engine = _engine(data_dir, database_url)
    try:
        database.downgrade(engine, FIRST)
        assert database.current_revision(engine) == FIRST
        database.upgrade(engine)
        assert database.current_revision(engine) == database.head_revision()
    finally:
        engine.dispose()
    with SqlRegistry.open(data_dir, database_url) as registry:
        assert registry.get_job(job.id).model == "m"


def test_a_database_from_a_newer_release_is_refused_clearly(
    data_dir: Path, database_url: str | None
) -> None:
    with SqlRegistry.open(data_dir, database_url):
        pass
    engine = _engine(data_dir, database_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999_future'"))
    engine.dispose()
    with pytest.raises(StorageError, match="9999_future"):
        SqlRegistry.open(data_dir, database_url)
    assert list((data_dir / "locks").glob("*.lock")) == []


def test_the_migrations_render_for_postgres(capsys: pytest.CaptureFixture[str]) -> None:
    config = database.alembic_config()
    config.set_main_option("sqlalchemy.url", "postgresql://offline/registry")
    command.upgrade(config, "head", sql=True)
    ddl = capsys.readouterr().out
    assert "CREATE TABLE jobs" in ddl and "TIMESTAMP WITH TIME ZONE" in ddl
    assert "CREATE INDEX ix_jobs_status_created_at" in ddl
    assert "sqlite" not in ddl.lower() and "PRAGMA" not in ddl
