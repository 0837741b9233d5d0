"""Object-store rates for a big artifact: ``python benchmarks/object_store_bench.py``.

Starts the tests' S3 API server (moto in a subprocess on 127.0.0.1, see
``tests/s3server.py``; or ``--endpoint URL --bucket NAME`` for a real store, with the
standard AWS credentials), then writes, reads and loads one artifact of ``--mb`` MB
(default 100: a float64 array of random numbers) through the registry's stores, ``--rounds``
times, and prints the median MB/s of each step next to the local store's:

* write: pickle (joblib) + sha256 + upload in 16 MB parts (the local store: a crash-safe
  file, fsynced);
* read: download in parallel ranges + sha256 check of the bytes;
* load: read + unpickle, what a prediction's cache miss costs.

Run with ``PYTHONPATH=.`` from the repository root. moto keeps objects in its own
process's memory: its figures are a floor for the client side, not a network's.
"""

from __future__ import annotations

import argparse
import io
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ensembles.registry import ArtifactStore
from ensembles.registry.stores import StoreConfig, open_store
from tests.s3server import S3Server, use_test_credentials

OWNER = "be0c4b3e0c4b3e00"  # a registry instance id: 16 hex digits


def _rate(step: Callable[[], object], megabytes: float, rounds: int) -> tuple[float, float]:
    """Median MB/s and median seconds of ``rounds`` runs of ``step``."""
    seconds = []
    for _ in range(rounds):
        started = time.perf_counter()
        step()
        seconds.append(time.perf_counter() - started)
    median = statistics.median(seconds)
    return megabytes / median, median


def measure(store: ArtifactStore, label: str, value: np.ndarray, rounds: int) -> None:
    megabytes = value.nbytes / 1e6
    versions = iter(range(1, 10_000))
    written: list[tuple[int, str, int]] = []

    def write() -> None:
        number = next(versions)
        stored = store.write_artifact("bench", number, value)
        written.append((number, stored.sha256, stored.size))

    write_rate, write_s = _rate(write, megabytes, rounds)
    number, sha256, size = written[-1]
    read_rate, read_s = _rate(
        lambda: store.read_artifact("bench", number, sha256, size), megabytes, rounds
    )
    load_rate, load_s = _rate(
        lambda: store.load_artifact("bench", number, sha256, size), megabytes, rounds
    )
    _report(label, megabytes, ("write", write_rate, write_s), ("read", read_rate, read_s))
    print(f"{'':<28} {'':>9}   load  {load_rate:7.1f} MB/s ({load_s:5.2f} s)")
    for number, _, _ in written:
        store.remove_artifact("bench", number)


def _report(label: str, megabytes: float, *steps: tuple[str, float, float]) -> None:
    figures = "   ".join(f"{name:<5} {rate:7.1f} MB/s ({s:5.2f} s)" for name, rate, s in steps)
    print(f"{label:<28} {megabytes:6.0f} MB   {figures}")


def measure_transfer(config: StoreConfig, data: bytes, rounds: int) -> None:
    """boto3's managed transfer of the same bytes alone (no pickling, no hashing): what
    the server and the client library cost, for comparison."""
    from ensembles.registry.stores.location import parse_s3_url
    from ensembles.registry.stores.s3 import TRANSFER, s3_client

    client, location = s3_client(config.endpoint_url), parse_s3_url(str(config.url))
    key = f"{location.prefix}raw-transfer"

    def upload() -> None:
        client.upload_fileobj(io.BytesIO(data), location.bucket, key, Config=TRANSFER)

    def download() -> None:
        client.download_fileobj(location.bucket, key, io.BytesIO(), Config=TRANSFER)

    megabytes = len(data) / 1e6
    up, up_s = _rate(upload, megabytes, rounds)
    down, down_s = _rate(download, megabytes, rounds)
    _report("  boto3 transfer alone", megabytes, ("up", up, up_s), ("down", down, down_s))
    client.delete_object(Bucket=location.bucket, Key=key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0, help="artifact size in MB")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--endpoint", help="an S3-compatible endpoint instead of moto")
    parser.add_argument("--bucket", help="an existing bucket at --endpoint")
    args = parser.parse_args()
    value = np.random.default_rng(0).random(int(args.mb * 1e6 / 8))
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        measure(
            open_store(StoreConfig(), root / "local", OWNER), "local folder", value, args.rounds
        )
        if args.endpoint:
            config = StoreConfig(url=f"s3://{args.bucket}/bench", endpoint_url=args.endpoint)
            measure(open_store(config, root, OWNER), f"S3 at {args.endpoint}", value, args.rounds)
            measure_transfer(config, value.tobytes(), args.rounds)
            return
        use_test_credentials()
        with S3Server(root / "moto") as server:
            config = StoreConfig(
                url=f"s3://{server.new_bucket()}/bench", endpoint_url=server.endpoint
            )
            measure(open_store(config, root, OWNER), "S3 API (moto, loopback)", value, args.rounds)
            measure_transfer(config, value.tobytes(), args.rounds)


if __name__ == "__main__":
    main()
