"""Crash-safe files: write to a temporary name, fsync, rename into place, fsync the folder.

A reader therefore sees either no file or the whole file, never a prefix, even if the
process is killed or the machine loses power half-way. Temporary files carry the id of
the registry instance that wrote them (``.<owner>.<random>.tmp``), so start-up can
remove the leftovers of dead instances without touching a live one's work in progress.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from ensembles.errors import IntegrityError, StorageError

TEMP_SUFFIX: Final = ".tmp"
_TEMP_NAME = re.compile(r"^\.(?P<owner>[0-9a-f]{16})\.[0-9a-f]{16}\.tmp$")
_CHUNK = 1 << 20


def temp_path(folder: Path, owner: str) -> Path:
    """A fresh temporary file name in ``folder`` that records its ``owner``."""
    return folder / f".{owner}.{secrets.token_hex(8)}{TEMP_SUFFIX}"


def temp_owner(name: str) -> str | None:
    """The owner recorded in a temporary file name, or None for any other file."""
    match = _TEMP_NAME.fullmatch(name)
    return match.group("owner") if match else None


class HashingWriter:
    """A write-only file object that hashes and counts the bytes as they go to disk.

    Hashing while writing means the recorded sha256 describes exactly the bytes handed
    to the file, without reading a possibly large artifact back.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data).cast("B")
        self._raw.write(view)
        self._hash.update(view)
        self.size += view.nbytes
        return view.nbytes

    def tell(self) -> int:
        """The file position: joblib uses it to align numpy arrays in the file."""
        return self.size

    def flush(self) -> None:
        self._raw.flush()

    @property
    def sha256(self) -> str:
        return self._hash.hexdigest()


@dataclass(frozen=True)
class WrittenFile:
    """A file that is complete and durable under its final name."""

    path: Path
    sha256: str
    size: int


def fsync_folder(folder: Path) -> None:
    """Make a rename or creation inside ``folder`` durable (no-op where unsupported)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        fd = os.open(folder, flags)
    except PermissionError:  # pragma: no cover - e.g. Windows cannot open folders
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_folder(folder: Path) -> None:
    """Create ``folder`` (and parents) and make its creation durable."""
    if folder.is_dir():
        return
    folder.mkdir(parents=True, exist_ok=True)
    fsync_folder(folder.parent)


def write_atomically(
    destination: Path, owner: str, produce: Callable[[HashingWriter], None]
) -> WrittenFile:
    """Write ``destination`` through ``produce`` so that it appears complete or not at all.

    Raises whatever ``produce`` or the file system raised (e.g. ``OSError`` with
    ``ENOSPC``) after removing every trace of the attempt; never replaces an existing file.
    """
    folder = destination.parent
    temporary = temp_path(folder, owner)
    placed = False
    try:
        with open(temporary, "xb") as raw:
            writer = HashingWriter(raw)
            produce(writer)
            raw.flush()
            os.fsync(raw.fileno())
        if destination.exists():
            raise FileExistsError(f"{destination} already exists; refusing to replace it")
        os.replace(temporary, destination)
        placed = True
        fsync_folder(folder)
    except BaseException:
        _unlink_quietly(destination if placed else temporary)
        raise
    return WrittenFile(destination, writer.sha256, writer.size)


def write_bytes_atomically(destination: Path, owner: str, data: bytes) -> WrittenFile:
    """:func:`write_atomically` for bytes already in memory."""

    def produce(writer: HashingWriter) -> None:
        view = memoryview(data)
        for start in range(0, len(view), _CHUNK):
            writer.write(view[start : start + _CHUNK])

    return write_atomically(destination, owner, produce)


def read_verified(path: Path, sha256: str, size: int, what: str) -> bytes:
    """The bytes of ``path`` if they still match the recorded checksum and size.

    ``what`` names the object for the error ("model 'iris' version 3"). The bytes are
    returned from memory so that the caller never re-reads (and never trusts) the file
    after the check.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise IntegrityError(f"the stored file of {what} is missing") from exc
    except OSError as exc:
        raise StorageError(f"could not read the stored file of {what}: {exc.strerror}") from exc
    if len(data) != size or hashlib.sha256(data).hexdigest() != sha256:
        raise IntegrityError(
            f"the stored file of {what} is damaged: its sha256 no longer matches the one "
            "recorded when it was written; it was not loaded"
        )
    return data


def remove_quietly(path: Path) -> None:
    """Remove a file if it exists; a failure to clean up must not hide the real error."""
    _unlink_quietly(path)


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def stray_temp_files(folder: Path, is_dead: Callable[[str], bool]) -> Iterator[Path]:
    """Temporary files under ``folder`` (recursively) whose owning instance is dead."""
    if not folder.is_dir():
        return
    for path in folder.rglob(f".*{TEMP_SUFFIX}"):
        owner = temp_owner(path.name)
        if owner is not None and path.is_file() and is_dead(owner):
            yield path


def probe_folder(folder: Path, owner: str) -> None:
    """Write, fsync and delete a small file: proves the folder accepts durable writes."""
    path = temp_path(folder, owner)
    try:
        with open(path, "xb") as raw:
            raw.write(b"probe")
            raw.flush()
            os.fsync(raw.fileno())
    finally:
        _unlink_quietly(path)
