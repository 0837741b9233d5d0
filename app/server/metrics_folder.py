"""The folder where the server processes of one service write their metrics.

With several server processes, prometheus-client's multiprocess mode keeps each
process's values in memory-mapped files of a folder named by ``PROMETHEUS_MULTIPROC_DIR``
(``counter_<pid>.db``, ``gauge_livesum_<pid>.db``, ...): the launcher (:mod:`app.server.launcher`)
makes a fresh private one before the processes start and removes it when they have
stopped. A process that stops cleanly forgets its live gauges itself; one that died
(killed, crashed: uvicorn starts a new one) is forgotten by the next scrape. Its
counters stay: what it served was served. Should the launcher itself die (SIGKILL), it
cannot remove the folder: the server processes, which then shut down, each remove their
own files and the last one the folder.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Final

from prometheus_client.multiprocess import mark_process_dead

ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
_HAS_PROC: Final = Path("/proc/self/stat").exists()
_LIVE_FILE = re.compile(r"^gauge_live[a-z]+_(?P<pid>\d+)\.db$")


def shared_metrics_folder() -> Path | None:
    """The folder this process shares with its sibling server processes, if any."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


class MetricsFolder:
    """The server processes that write to ``path`` and which of them still live."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _pids(self) -> set[int]:
        try:
            names = os.listdir(self.path)
        except OSError:
            return set()
        return {int(m["pid"]) for name in names if (m := _LIVE_FILE.match(name))}

    def live_pids(self) -> list[int]:
        """Server processes that have live gauges here and still run (this one included)."""
        own = os.getpid()
        return sorted(pid for pid in self._pids() | {own} if pid == own or is_sibling(pid))

    def forget_dead(self) -> None:
        """Drop the live gauges of processes that are gone (their requests in progress,
        their cache): their counters stay."""
        own = os.getpid()
        for pid in self._pids():
            if pid != own and not is_sibling(pid):
                mark_process_dead(pid, str(self.path))  # type: ignore[no-untyped-call]

    def forget_self(self) -> None:
        mark_process_dead(os.getpid(), str(self.path))  # type: ignore[no-untyped-call]

    def remove_own_files(self) -> None:
        """The service is over and nobody else will clean up: remove this process's
        files, and the folder once it is empty (the last process to go removes it)."""
        for path in self.path.glob(f"*_{os.getpid()}.db"):
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty yet (or gone): a sibling removes it
            self.path.rmdir()


def is_sibling(pid: int) -> bool:
    """Whether ``pid`` runs and has this process's parent (the launcher), so that a pid
    reused by another process does not count. Without /proc: whether ``pid`` exists."""
    if not _HAS_PROC:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] != "Z" and int(fields[1]) == os.getppid()
