"""Which registry instances are alive, so start-up only cleans up after dead ones.

Every open registry holds an exclusive ``flock`` on ``locks/<instance>.lock`` for its
whole life. The kernel drops the lock when the process exits in any way, SIGKILL
included, so "can I take this lock?" is an exact liveness test for every process that
shares the data folder: several workers, a separate training process, or the same
service restarted in a new container (where pids and host names are reused or change).
Jobs and temporary files record their owner's instance id.

Processes that share the database but not the folder cannot see these files: they judge
each other by leases in the database (:mod:`liveness`), and :func:`folder_id` tells
which instances share a folder (so the exact test keeps deciding between those).
"""

from __future__ import annotations

import os
import secrets
import sys
import time
import weakref
from pathlib import Path
from typing import Final

LOCK_SUFFIX: Final = ".lock"

_LIVE: weakref.WeakSet[InstanceLock] = weakref.WeakSet()


class InstanceLock:
    """Proof of life of one registry instance: an flock held on a file named by its id."""

    def __init__(self, folder: Path) -> None:
        self.id = secrets.token_hex(8)
        self.folder = folder
        self.path = folder / f"{self.id}{LOCK_SUFFIX}"
        # Lock under a private name, then rename: a prober must never find the final name
        # unlocked while we are still starting, or it would declare us dead.
        staging = folder / f".{self.id}.lock-staging"
        fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _lock(fd)
            os.replace(staging, self.path)
        except BaseException:
            os.close(fd)
            staging.unlink(missing_ok=True)
            raise
        self._fd: int | None = fd
        _LIVE.add(self)

    def is_alive(self, owner: str | None) -> bool:
        """Whether the instance ``owner`` still holds its lock (None: unknown, so dead)."""
        if owner is None:
            return False
        if owner == self.id and self._fd is not None:
            return True
        # Also for our own id in a forked child (which closed its copy): ask the lock.
        return _probe(self.folder / f"{owner}{LOCK_SUFFIX}")

    def has_file(self, owner: str) -> bool:
        """Whether ``owner`` is us or has a lock file here (so :meth:`is_alive` is exact)."""
        if owner == self.id and self._fd is not None:
            return True
        return (self.folder / f"{owner}{LOCK_SUFFIX}").exists()

    def release(self) -> None:
        """Give up the lock (idempotent); other instances will then treat us as dead."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            os.close(fd)

    def _forget_in_child(self) -> None:
        # A forked child shares the parent's open file description; closing the child's
        # copy does not release the parent's lock, but keeps the child from outliving it
        # as a false proof of life.
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


STAGING_GRACE_S: Final = 60.0
FOLDER_ID: Final = "folder.id"


def folder_id(folder: Path) -> str:
    """The random id of the lock folder ``folder``, created by the first to ask.

    Two processes see the same id exactly when they share the folder (however it is
    mounted or named: a path or host name would not tell).
    """
    path = folder / FOLDER_ID
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    staging = folder / f".{secrets.token_hex(8)}.folder-staging"
    staging.write_text(secrets.token_hex(16), encoding="ascii")
    try:
        os.link(staging, path)  # atomic, and never replaces an id another process wrote
    except FileExistsError:
        pass
    finally:
        staging.unlink(missing_ok=True)
    return path.read_text(encoding="ascii").strip()


def sweep_dead_locks(folder: Path) -> None:
    """Remove the lock files (and half-made ones) left behind by dead instances.

    A staging file is locked a moment after it is created; probing a fresh one could
    steal it from an instance that is still starting, so only old ones are swept.
    """
    for path in folder.glob(f"*{LOCK_SUFFIX}"):
        _probe(path)
    cutoff = time.time() - STAGING_GRACE_S
    for path in folder.glob(".*.lock-staging"):
        try:
            old = path.stat().st_mtime < cutoff
        except FileNotFoundError:
            continue
        if old:
            _probe(path)


def _probe(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        if not _try_lock(fd):
            return True
        # We hold the lock of a dead instance: its file is garbage now.
        path.unlink(missing_ok=True)
        return False
    finally:
        os.close(fd)


if sys.platform != "win32":
    import fcntl

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _after_fork_in_child() -> None:
        for lock in list(_LIVE):
            lock._forget_in_child()

    os.register_at_fork(after_in_child=_after_fork_in_child)

else:  # pragma: no cover - no flock: every other instance is presumed dead

    def _lock(fd: int) -> None:
        return None

    def _try_lock(fd: int) -> bool:
        return True
