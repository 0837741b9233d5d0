"""Fixtures every test folder may use: a real PostgreSQL server (:mod:`tests.postgres`),
the S3 API server (:mod:`tests.s3server`) and the backends replicas share
(:mod:`tests.replicas`).

The test processes run OpenMP as the service does, idle threads sleeping: importing
:mod:`app` first sets ``OMP_WAIT_POLICY=PASSIVE`` before anything loads an OpenMP runtime
(why: app/__init__.py). The unit tests never imported it, so their LightGBM, XGBoost and
histogram-boosting fits ran with spinning threads: with two xdist workers (and their
servers) on two cores, each waiting thread burnt the core another worker needed.
The LightGBM files and ``test_kinds.py`` under ``-n 2``: 193 s of CPU (user+sys) with
spinning threads, 106 s sleeping (wall 157 -> 99 s); ``test_lightgbm_scores.py`` alone on a
busy host 117.5 -> 20.0 s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

import app  # noqa: F401  (first: sets OMP_WAIT_POLICY before an OpenMP runtime loads)
from ensembles.registry.stores import StoreConfig
from tests.postgres import PostgresServer, PostgresUnavailableError
from tests.replicas import SharedBackends
from tests.s3server import S3Server, use_test_credentials


def pytest_configure(config: pytest.Config) -> None:
    # Before any test starts a process (the training workers' fork server inherits the
    # environment once, at its start): throw-away credentials for the S3 server.
    use_test_credentials()
    share_the_cores_among_workers()


def share_the_cores_among_workers() -> None:
    """Under pytest-xdist, each worker's BLAS gets its share of the cores (as scikit-learn's
    own conftest does): OpenBLAS would start a thread per core in every worker, and on small
    matrices its threads spin waiting for one another while the other workers hold the
    cores. An unscaled LogisticRegression fit of breast_cancer (2,000 iterations) took
    9 s of CPU and 30 s wall with 2 BLAS threads on a busy host, 0.4 s and 1.2 s with one.
    The variable reaches the BLAS libraries loaded later and the processes tests start
    (servers, training workers); an operator's own setting wins. Without xdist nothing
    changes."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers is None or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    threads = max((os.cpu_count() or 1) // int(workers), 1)
    os.environ["OPENBLAS_NUM_THREADS"] = str(threads)
    threadpool_limits(threads, user_api="blas")  # those this process loaded already


# Files first in collection order: the longest ones, so that no worker is left alone at the
# end with one of them. The client-libraries file builds its own virtualenv on a fresh clone
# (minutes), the other end-to-end files start real servers. Order within a file is kept.
# pytest-xdist 3 hands files out by their number of tests, most first, and keeps this order
# only among files with as many (or all of it with --no-loadscope-reorder). Replayed on one
# full run's measured times (2 workers), its order ended the workers 65 s apart in ~51 min,
# this order alone (test_training.py, collected late, last) 308 s apart: `make test` keeps
# xdist's.
FIRST = ("tests/e2e/test_oip_clients.py", "tests/e2e/", "tests/api/test_rollout.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::", 1)[0]
        return next((i for i, prefix in enumerate(FIRST) if path.startswith(prefix)), len(FIRST))

    items.sort(key=rank)  # stable: every other file keeps its place


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """One moto server for the session, started on first use, stopped at the end."""
    with S3Server(tmp_path_factory.mktemp("moto")) as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A fresh bucket of the session's server, for this test alone."""
    return s3_server.new_bucket()


@pytest.fixture
def s3_store(s3_server: S3Server, s3_bucket: str) -> StoreConfig:
    """An object-store configuration on the test's bucket (under a key prefix)."""
    return StoreConfig(url=f"s3://{s3_bucket}/service", endpoint_url=s3_server.endpoint)


@pytest.fixture
def shared_backends(tmp_path: Path, s3_store: StoreConfig) -> SharedBackends:
    """The database and object store replicas share: a SQLite file and the test's bucket
    (a PostgreSQL fixture may provide the same with another ``database_url``)."""
    return SharedBackends.sqlite(tmp_path / "shared", s3_store)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One server for the whole session, started on first use, removed at the end.

    Fails (never skips) when no server can be run here, saying how to get one.
    """
    try:
        server = PostgresServer()
    except PostgresUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server.start()
    finally:
        server.remove()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """The SQLAlchemy URL of a new empty database, dropped after the test."""
    if not (postgres_server.data / "postmaster.pid").exists():
        postgres_server.start()  # a test stopped it (a fault test): serve the next one
    name = postgres_server.create_database()
    yield postgres_server.url(name)
    if not (postgres_server.data / "postmaster.pid").exists():
        postgres_server.start()
    postgres_server.drop_database(name)
