"""Child processes of the crash and concurrency tests (run as a script, never collected).

``children.py crash <data_dir> <point>``: once told to go (a line on stdin), reserve a
version, start publishing a large
artifact and stop dead at ``<point>`` (printing ``at-point``) so the parent can SIGKILL
the process there. Points: ``write:<n>`` (n-th write of the artifact), ``fsync-file``,
``replace`` (before the rename), ``fsync-folder`` (renamed, folder not yet synced),
``commit`` (inside the transaction that makes the version visible).

``children.py s3crash <data_dir> <s3 url> <endpoint> <point>``: the same on an object
store. Points: ``part`` (the first part of a multipart upload is stored), ``uploaded``
(the artifact object is complete, its version not yet recorded), ``commit`` (as above),
``dataset`` (a dataset's object is complete, its row not yet inserted).

``children.py replica <data_dir> <s3 url> <endpoint> <lease_s>``: a replica with its own
data folder on the shared database (``$ENSEMBLE_TEST_CHILD_DATABASE_URL``) and bucket,
holding a lease of ``lease_s``: start a job, upload its artifact and stop before the
version is recorded (``job <id> <version>``, then ``at-point``), to be SIGKILLed there.

``children.py versions <data_dir> <model> <count> <go_file>``: open the registry, wait
for ``go_file`` to exist (so all children start together), then create ``count``
versions and print the numbers it got as one JSON line.

Both open the database named by ``$ENSEMBLE_TEST_CHILD_DATABASE_URL`` when it is set
(else SQLite in ``<data_dir>``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _registry_without_the_library() -> None:
    """Make ``import ensembles.registry`` load the registry's own modules only.

    ``ensembles/__init__.py`` re-exports the whole library (scikit-learn, pandas, the
    boosting libraries): 4.5 s of CPU per child, against 1.6 s for the registry alone, and
    the crash, concurrency and replica tests start ~40 children. The registry imports none
    of the package's re-exports, so the package stands here as a bare namespace over the
    same folder: the registry modules loaded are the service's own, unchanged.
    """
    spec = importlib.util.find_spec("ensembles")
    assert spec is not None and spec.submodule_search_locations is not None
    package = types.ModuleType("ensembles")
    package.__path__ = list(spec.submodule_search_locations)
    package.__file__ = spec.origin
    sys.modules["ensembles"] = package


_registry_without_the_library()

from ensembles.registry import SqlRegistry, versioning  # noqa: E402
from ensembles.registry.stores import StoreConfig, files  # noqa: E402
from ensembles.registry.stores.s3 import S3Store  # noqa: E402


def _stop_here() -> None:
    print("at-point", flush=True)
    while True:
        time.sleep(60)


def _install(point: str) -> None:
    if point.startswith("write:"):
        limit = int(point.split(":", 1)[1])
        original_write = files.HashingWriter.write
        calls = 0

        def write(self: files.HashingWriter, data: Any) -> int:
            nonlocal calls
            calls += 1
            if calls == limit:
                _stop_here()
            return original_write(self, data)

        files.HashingWriter.write = write  # type: ignore[method-assign]
    elif point == "fsync-file":
        os.fsync = _first_call_stops(os.fsync)
    elif point == "replace":
        os.replace = _first_call_stops(os.replace)
    elif point == "fsync-folder":
        files.fsync_folder = lambda folder: _stop_here()
    elif point == "commit":
        original_insert = versioning.insert_version

        def insert(*args: Any) -> None:
            original_insert(*args)
            _stop_here()

        versioning.insert_version = insert  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown point {point}")


def _first_call_stops(function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any) -> Any:
        _stop_here()
        return function(*args)

    return wrapper


def crash(data_dir: str, point: str) -> None:
    registry = SqlRegistry.open(data_dir, os.environ.get("ENSEMBLE_TEST_CHILD_DATABASE_URL"))
    print("ready", flush=True)
    sys.stdin.readline()  # the parent says when (imports overlap with the previous trial)
    job = registry.submit_job("crashy", {"point": point})
    registry.start_job(job.id)
    print(f"job {job.id} {job.version}", flush=True)
    big = [os.urandom(65536) for _ in range(200)]  # ~13 MB, hundreds of writes
    _install(point)
    registry.publish_version(job.id, big, {"task": "regression"})
    print("published", flush=True)


def _stop_after(cls: Any, name: str) -> None:
    original = getattr(cls, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        _stop_here()
        return result

    setattr(cls, name, wrapper)


def s3crash(data_dir: str, url: str, endpoint: str, point: str) -> None:
    registry = SqlRegistry.open(data_dir, None, StoreConfig(url=url, endpoint_url=endpoint))
    print("ready", flush=True)
    sys.stdin.readline()
    if point == "dataset":
        _stop_after(S3Store, "write_dataset")
        print("job - 0", flush=True)
        registry.create_dataset(name="lost", parquet=_parquet(), n_rows=3, columns=[])
        return
    job = registry.submit_job("crashy", {"point": point})
    registry.start_job(job.id)
    print(f"job {job.id} {job.version}", flush=True)
    big = [os.urandom(65536) for _ in range(600)]  # ~40 MB: a multipart upload
    if point == "part":
        client = registry.store._client  # type: ignore[attr-defined]
        client.meta.events.register("after-call.s3.UploadPart", lambda **_: _stop_here())
    elif point == "uploaded":
        _stop_after(S3Store, "write_artifact")
    else:
        _install(point)
    registry.publish_version(job.id, big, {"task": "regression"})
    print("published", flush=True)


def replica(data_dir: str, url: str, endpoint: str, lease_s: str) -> None:
    registry = SqlRegistry.open(
        data_dir,
        os.environ["ENSEMBLE_TEST_CHILD_DATABASE_URL"],
        StoreConfig(url=url, endpoint_url=endpoint),
        lease_s=float(lease_s),
    )
    job = registry.submit_job("replicated", {"lease_s": lease_s})
    registry.start_job(job.id)
    print(f"job {job.id} {job.version}", flush=True)
    _stop_after(S3Store, "write_artifact")
    registry.publish_version(job.id, {"weights": [1.0, 2.0]}, {"task": "regression"})


def _parquet() -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"x": [1, 2, 3]}), buffer)
    return buffer.getvalue()


def versions(data_dir: str, model: str, count: str, go_file: str) -> None:
    registry = SqlRegistry.open(data_dir, os.environ.get("ENSEMBLE_TEST_CHILD_DATABASE_URL"))
    print("ready", flush=True)
    while not Path(go_file).exists():
        time.sleep(0.005)
    got = []
    for i in range(int(count)):
        job = registry.submit_job(model, {"i": i, "pid": os.getpid()})
        registry.start_job(job.id)
        record = registry.publish_version(job.id, {"pid": os.getpid(), "i": i}, {"i": i})
        got.append(record.version)
    registry.close()
    print(json.dumps(got), flush=True)


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "crash":
        crash(*rest)
    elif mode == "s3crash":
        s3crash(*rest)
    elif mode == "replica":
        replica(*rest)
    else:
        versions(*rest)
