"""Which artifact store a registry uses: chosen by configuration only.

``StoreConfig.url`` is what ``ENSEMBLE_OBJECT_STORE`` says: unset (the data folder) or a
local folder gives a :class:`LocalStore`; ``s3://bucket/prefix`` gives an
:class:`~ensembles.registry.stores.s3.S3Store` on AWS S3 or, with ``endpoint_url``, on any
S3-compatible store (MinIO, Ceph). The config is a small frozen value, so it travels to
training workers (pickled) unchanged, and every process of the service opens the same
store. Credentials are never part of it: boto3 takes them from the standard AWS
environment variables or credential chain of each process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ensembles.registry.stores.local import ORPHAN_GRACE_S, LocalStore

if TYPE_CHECKING:
    from ensembles.registry.base import ArtifactStore

S3_SCHEME: Final = "s3://"

# S3's bucket naming rules (lower case, digits, dots and hyphens, 3 to 63 characters).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class S3Location:
    """A bucket and a key prefix (empty, or ending in ``/``)."""

    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}".rstrip("/")


def parse_s3_url(url: str) -> S3Location:
    """``s3://bucket`` or ``s3://bucket/some/prefix`` -> its parts; ValueError says why not."""
    if not url.startswith(S3_SCHEME):
        raise ValueError(f"an object store URL starts with {S3_SCHEME}")
    bucket, _, prefix = url.removeprefix(S3_SCHEME).partition("/")
    if _BUCKET.fullmatch(bucket) is None:
        raise ValueError(
            f"{bucket!r} is not a valid bucket name (3 to 63 lower-case letters, digits, "
            "dots or hyphens)"
        )
    parts = [part for part in prefix.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise ValueError("the key prefix may not contain '.' or '..' segments")
    return S3Location(bucket, "".join(f"{part}/" for part in parts))


def redacted(url: str) -> str:
    """``url`` without a ``user:password@`` part, fit for a log line or an error."""
    scheme, separator, rest = url.partition("://")
    if not separator:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"


def is_s3_url(url: str | None) -> bool:
    return url is not None and url.startswith(S3_SCHEME)


@dataclass(frozen=True)
class StoreConfig:
    """Where datasets and artifacts live (see the module docstring)."""

    url: str | None = None
    endpoint_url: str | None = None
    grace_s: float = ORPHAN_GRACE_S

    def __post_init__(self) -> None:
        if is_s3_url(self.url):
            parse_s3_url(str(self.url))  # fail on construction, not at the first upload
        if self.grace_s < 0:
            raise ValueError("grace_s must be >= 0")


def open_store(config: StoreConfig, data_dir: Path, owner: str) -> ArtifactStore:
    """The store ``config`` names, ready to use; ``owner`` tags this instance's work.

    An object store is checked first (its bucket exists and answers): StorageError
    otherwise, so a wrong setting fails at start-up rather than at the first upload.
    """
    if is_s3_url(config.url):
        from ensembles.registry.stores.s3 import S3Store  # boto3 only when configured

        store = S3Store(
            parse_s3_url(str(config.url)), owner, config.endpoint_url, grace_s=config.grace_s
        )
        store.check_bucket()
        return store
    root = Path(config.url) if config.url else data_dir
    return LocalStore(root, owner, grace_s=config.grace_s)
