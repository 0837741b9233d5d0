"""Explaining rows on several processes at once.

shap's C TreeSHAP holds the GIL for a whole call, so threads cannot share its work; forked
children can, and they read the fitted model in the memory they share with this process
(nothing is pickled but their answers).  Each row's contributions do not depend on the
rows explained beside it (TreeSHAP, the linear method, the permutation estimate seeded by
the row), so the parts together are the very figures of one call.  A child that fails,
or is still running at the deadline, is stopped and its part explained here instead: a
summary is never lost and never hangs on a child.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ensembles.explain.explanation import Explained

ExplainPart = Callable[[NDArray[Any]], Explained]


@dataclass(frozen=True)
class _Child:
    pid: int
    answers: int  # the read end of the pipe its pickled answer comes through


def in_parts(
    explain_part: ExplainPart, rows: NDArray[Any], processes: int, deadline: float
) -> list[Explained]:
    """``explain_part`` of ``rows`` split in up to ``processes`` parts, in row order: the
    first here, the others in forked children (``time.monotonic()`` deadline)."""
    if processes <= 1 or len(rows) < 2 or not hasattr(os, "fork"):
        return [explain_part(rows)]
    parts = np.array_split(rows, min(processes, len(rows)))
    children: list[_Child] = []
    try:
        children += [_fork(explain_part, part) for part in parts[1:]]
        own = explain_part(parts[0])
    except BaseException:
        for child in children:
            _stop(child)
        raise
    return [own] + [
        _collect(child, explain_part, part, deadline)
        for child, part in zip(children, parts[1:], strict=True)
    ]


def _fork(explain_part: ExplainPart, part: NDArray[Any]) -> _Child:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its answer down the pipe, then out without cleanup
        code = 1
        try:
            os.close(read)
            with os.fdopen(write, "wb") as out:
                out.write(pickle.dumps(explain_part(part), protocol=pickle.HIGHEST_PROTOCOL))
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    return _Child(pid, read)


def _collect(
    child: _Child, explain_part: ExplainPart, part: NDArray[Any], deadline: float
) -> Explained:
    """The child's answer, or its part explained here when it has none."""
    answer = _read(child.answers, deadline)
    if answer is None:
        _stop(child)
        return explain_part(part)
    os.close(child.answers)
    _, status = os.waitpid(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return explain_part(part)
    explained: Explained = pickle.loads(answer)  # our own child's bytes
    return explained


def _read(fd: int, deadline: float) -> bytes | None:
    """Everything written to ``fd`` until its end, or None at the deadline."""
    chunks: list[bytes] = []
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
    return None


def _stop(child: _Child) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(child.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.close(child.answers)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(child.pid, 0)
