"""Artifacts and datasets as objects in an S3-compatible bucket (AWS S3, MinIO, Ceph).

Object stores have no rename, so nothing is ever written under a name a reader could
find before it is complete: every key ends in the sha256 of its bytes, is written once
and never replaced (see :mod:`ensembles.registry.stores.objectkeys`). The registry
records that sha256 in the transaction that makes a version (or dataset) visible, and
readers build the key from the recorded sha256, so a reader only ever asks for an
object some committed row refers to. A crash between upload and commit leaves an
unreferenced object, never a row pointing at nothing; :meth:`S3Store.sweep` and the
registry's orphan removal clean up after it, but only once it is older than the grace
period, so another replica's upload in flight (its row not yet committed) is safe.

Reads check the sha256 and size of the downloaded bytes before anything is unpickled.
Big objects go up and down in parallel parts (boto3's managed transfer). Every call has
connect and read timeouts and one retry: an unreachable store is a quick StorageError
(503), never a hang. Credentials come from boto3's standard chain and are never logged.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import logging
import secrets
import tempfile
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import IO, TYPE_CHECKING, Final

import boto3
import joblib
from boto3.exceptions import Boto3Error
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from ensembles.errors import IntegrityError, StorageError
from ensembles.registry.base import StoredExport, StoredObject
from ensembles.registry.names import describe
from ensembles.registry.stores import exports
from ensembles.registry.stores.files import HashingWriter
from ensembles.registry.stores.local import ORPHAN_GRACE_S
from ensembles.registry.stores.location import S3Location, redacted
from ensembles.registry.stores.objectkeys import ObjectKeys

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import ObjectIdentifierTypeDef

    from ensembles.registry.base import ArtifactStore

log = logging.getLogger(__name__)

MIB: Final = 1024 * 1024
PART_SIZE: Final = 16 * MIB  # parts of a multipart transfer; objects above go in parts
SPOOL_IN_MEMORY: Final = 64 * MIB  # an artifact being pickled stays in memory up to this
CONNECT_TIMEOUT_S: Final = 3.0
READ_TIMEOUT_S: Final = 30.0
MAX_ATTEMPTS: Final = 2  # one retry: a store that is down answers 503 in seconds
_MISSING: Final = frozenset({"404", "NoSuchKey", "NotFound"})
_NO_BUCKET: Final = frozenset({"NoSuchBucket"})

TRANSFER: Final = TransferConfig(
    multipart_threshold=PART_SIZE, multipart_chunksize=PART_SIZE, max_concurrency=8
)


def s3_client(endpoint_url: str | None) -> S3Client:
    """A client with bounded timeouts and retries; credentials from the standard chain."""
    config = Config(
        connect_timeout=CONNECT_TIMEOUT_S,
        read_timeout=READ_TIMEOUT_S,
        retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        max_pool_connections=32,
    )
    return boto3.session.Session().client("s3", endpoint_url=endpoint_url, config=config)


def _code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def _reason(exc: BaseException, bucket: str) -> str:
    """One line saying why a call failed (botocore's messages carry no credentials)."""
    if _code(exc) in _NO_BUCKET:
        return f"there is no bucket {bucket!r}"
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code', '?')}: {error.get('Message', '')}".rstrip(": ")
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class S3Store:
    """Artifacts and datasets under ``location`` (bucket + prefix); ``owner`` tags uploads."""

    def __init__(
        self,
        location: S3Location,
        owner: str,
        endpoint_url: str | None = None,
        *,
        grace_s: float = ORPHAN_GRACE_S,
    ) -> None:
        self.bucket = location.bucket
        self.keys = ObjectKeys(location.prefix)
        self.owner = owner
        self.grace_s = grace_s
        self._url = location.url
        self._endpoint = redacted(endpoint_url) if endpoint_url else None
        self._client = s3_client(endpoint_url)

    @property
    def location(self) -> str:
        via = f" at {self._endpoint}" if self._endpoint else ""
        return f"the object store {self._url}{via}"

    # ------------------------------------------------------------------ errors

    def _failure(self, exc: BaseException, doing: str) -> StorageError:
        """StorageError (a 503) naming the store and what failed, in one line."""
        return StorageError(f"{self.location} failed {doing}: {_reason(exc, self.bucket)}")

    def check_bucket(self) -> None:
        """StorageError unless the bucket exists and answers (start-up check)."""
        try:
            self._client.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            if _code(exc) in {"404", *_NO_BUCKET}:
                missing = f"{self.location}: bucket {self.bucket!r} does not exist"
                raise StorageError(missing) from exc
            raise self._failure(exc, "checking the bucket") from exc
        except (BotoCoreError, Boto3Error) as exc:
            raise self._failure(exc, "checking the bucket") from exc

    # ------------------------------------------------------------------ objects

    def _upload(self, source: IO[bytes], key: str, sha256: str) -> None:
        extra = {"Metadata": {"owner": self.owner, "sha256": sha256}}
        try:
            self._client.upload_fileobj(source, self.bucket, key, ExtraArgs=extra, Config=TRANSFER)
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            raise self._failure(exc, f"storing {key}") from exc

    def _download(self, key: str, sha256: str, size: int, what: str) -> bytes:
        """The bytes of ``key`` if they match ``sha256`` and ``size`` (IntegrityError)."""
        try:
            if size < PART_SIZE:  # one GET, no HEAD first
                data = self._client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            else:  # ranged GETs in parallel
                buffer = io.BytesIO()
                self._client.download_fileobj(self.bucket, key, buffer, Config=TRANSFER)
                data = buffer.getvalue()
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            if _code(exc) in _MISSING:
                raise IntegrityError(f"the stored object of {what} is missing") from exc
            raise self._failure(exc, f"reading the stored object of {what}") from exc
        if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
            raise IntegrityError(
                f"the stored object of {what} is damaged: its sha256 no longer matches the "
                "one recorded when it was written; it was not loaded"
            )
        return data

    def _listing(self, prefix: str) -> Iterator[tuple[str, datetime]]:
        """(key, last modified) of every object under ``prefix``."""
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        try:
            for page in pages:
                for item in page.get("Contents", []):
                    yield item["Key"], item["LastModified"]
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            raise self._failure(exc, f"listing {prefix}") from exc

    def _delete_under(self, prefix: str) -> None:
        """Delete every object under ``prefix``; failures are logged (a sweep retries)."""
        try:
            keys = [key for key, _ in self._listing(prefix)]
            for start in range(0, len(keys), 1000):
                chunk: list[ObjectIdentifierTypeDef] = [
                    {"Key": key} for key in keys[start : start + 1000]
                ]
                self._client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk})
        except (StorageError, ClientError, BotoCoreError, Boto3Error) as exc:
            log.warning("could not delete %s in %s: %s", prefix, self.location, exc)

    # ------------------------------------------------------------------ artifacts

    def write_artifact(self, model: str, version: int, value: object) -> StoredObject:
        """Pickle ``value`` (hashing as it goes), then upload it under its content key."""
        self.keys.artifact_folder(model, version)  # bad names fail before any work
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
            writer = HashingWriter(spool)  # type: ignore[arg-type]
            joblib.dump(value, writer)
            spool.seek(0)
            key = self.keys.artifact(model, version, writer.sha256)
            self._upload(spool, key, writer.sha256)
        return StoredObject(writer.sha256, writer.size)

    def read_artifact(self, model: str, version: int, sha256: str, size: int) -> bytes:
        key = self.keys.artifact(model, version, sha256)
        return self._download(key, sha256, size, describe(model, version))

    def load_artifact(self, model: str, version: int, sha256: str, size: int) -> object:
        data = self.read_artifact(model, version, sha256, size)
        return joblib.load(io.BytesIO(data))

    def remove_artifact(self, model: str, version: int) -> None:
        self._delete_under(self.keys.artifact_folder(model, version))

    def write_export(
        self, model: str, version: int, fmt: str, data: bytes, info: Mapping[str, str]
    ) -> StoredObject:
        """The sidecar, then the bytes: whoever lists the bytes finds the sidecar."""
        sha256 = hashlib.sha256(data).hexdigest()
        key = f"{self.keys.exports_folder(model, version)}{exports.leaf(sha256, fmt)}"
        described = exports.sidecar(sha256, fmt, len(data), info)
        described_key = f"{key}{exports.SIDECAR_SUFFIX}"
        self._upload(io.BytesIO(described), described_key, hashlib.sha256(described).hexdigest())
        self._upload(io.BytesIO(data), key, sha256)
        return StoredObject(sha256, len(data))

    def read_export(self, model: str, version: int, fmt: str) -> StoredExport | None:
        folder = self.keys.exports_folder(model, version)
        leaves = {key.removeprefix(folder) for key, _ in self._listing(folder)}
        sha256 = exports.chosen(leaves, fmt)
        if sha256 is None:
            return None
        key = f"{folder}{exports.leaf(sha256, fmt)}"
        what = f"export of {describe(model, version)}"
        data, described = self._get(key, what), self._get(f"{key}{exports.SIDECAR_SUFFIX}", what)
        return exports.verified(data, described, sha256, what)

    def _get(self, key: str, what: str) -> bytes:
        """The bytes of ``key``; the caller checks them (IntegrityError if gone)."""
        try:
            buffer = io.BytesIO()
            self._client.download_fileobj(self.bucket, key, buffer, Config=TRANSFER)
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            if _code(exc) in _MISSING:
                raise IntegrityError(f"the stored {what} is missing") from exc
            raise self._failure(exc, f"reading the stored {what}") from exc
        return buffer.getvalue()

    def stored_artifacts(self) -> Iterator[tuple[str, int]]:
        seen: set[tuple[str, int]] = set()
        for key, _ in self._listing(self.keys.artifacts):
            parsed = self.keys.parse_artifact(key)
            if parsed is not None and parsed not in seen:
                seen.add(parsed)
                yield parsed

    # ------------------------------------------------------------------ datasets

    def write_dataset(self, dataset_id: str, data: bytes) -> StoredObject:
        sha256 = hashlib.sha256(data).hexdigest()
        self._upload(io.BytesIO(data), self.keys.dataset(dataset_id, sha256), sha256)
        return StoredObject(sha256, len(data))

    def read_dataset(self, dataset_id: str, sha256: str, size: int) -> bytes:
        key = self.keys.dataset(dataset_id, sha256)
        return self._download(key, sha256, size, f"dataset {dataset_id!r}")

    def remove_dataset(self, dataset_id: str) -> None:
        self._delete_under(self.keys.dataset_folder(dataset_id))

    def stored_datasets(self) -> Iterator[str]:
        cutoff = datetime.now(UTC) - timedelta(seconds=self.grace_s)
        for key, modified in self._listing(self.keys.datasets):
            dataset_id = self.keys.parse_dataset(key)
            if dataset_id is not None and modified <= cutoff:
                yield dataset_id

    # ------------------------------------------------------------------ health, clean-up

    def probe(self) -> None:
        """Write and delete a small object; OSError (naming the store) if either fails."""
        key = f"{self.keys.probes}{self.owner}-{secrets.token_hex(4)}"
        try:
            self._client.put_object(Bucket=self.bucket, Key=key, Body=b"probe")
            self._client.delete_object(Bucket=self.bucket, Key=key)
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            raise OSError(errno.EIO, _reason(exc, self.bucket)) from exc

    def sweep(self, is_dead: Callable[[str], bool]) -> None:
        """Abort multipart uploads and delete probe objects older than the grace period.

        Age decides, not ``is_dead``: the owners of uploads may be replicas on other
        machines, whose liveness this process cannot test.
        """
        cutoff = datetime.now(UTC) - timedelta(seconds=self.grace_s)
        with contextlib.suppress(StorageError):
            for key, modified in self._listing(self.keys.probes):
                if modified <= cutoff:
                    self._delete_under(key)
        try:
            paginator = self._client.get_paginator("list_multipart_uploads")
            pages = (  # only ours: the bucket may hold other applications' keys
                page
                for prefix in (self.keys.artifacts, self.keys.datasets)
                for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix)
            )
            for page in pages:
                for upload in page.get("Uploads", []):
                    key, upload_id = upload["Key"], upload["UploadId"]
                    if self._last_activity(key, upload_id, upload["Initiated"]) <= cutoff:
                        log.info("aborting the unfinished upload of %s", key)
                        self._client.abort_multipart_upload(
                            Bucket=self.bucket, Key=key, UploadId=upload_id
                        )
        except (ClientError, BotoCoreError, Boto3Error) as exc:
            log.warning("could not sweep unfinished uploads in %s: %s", self.location, exc)

    def _last_activity(self, key: str, upload_id: str, initiated: datetime) -> datetime:
        """When an unfinished upload last made progress: its start or its newest part.

        The newest part counts too, so an upload in progress for longer than the grace
        period (a very big artifact) is not aborted under its writer's feet, and so are
        stores that report no real start time (moto reports a fixed date).
        """
        parts = self._client.list_parts(Bucket=self.bucket, Key=key, UploadId=upload_id)
        return max([initiated, *(part["LastModified"] for part in parts.get("Parts", []))])


if TYPE_CHECKING:

    def _implements_the_protocol(store: S3Store) -> ArtifactStore:
        return store  # mypy proves S3Store structurally satisfies ArtifactStore
