"""Big request buffers stay in the server process's heap instead of going back to the kernel.

A 10,000-row JSON prediction allocates some 17 MB in buffers of a few megabytes each (the
body, its joined copy, simdjson's tape, the float64 matrix, the response). glibc's malloc
maps each buffer above its mmap threshold on its own and unmaps it when freed, and gives
the free top of a heap back above its trim threshold; both thresholds start low (128 KiB,
256 KiB) and adapt only partly. So every big request touched fresh pages: 4,400 page faults
for one 10,000-row body, half the wall time of its parse (issue 24; figures in
docs/performance.md, "Big bodies served"). With buffers up to 32 MiB kept in the heap (glibc's
largest mmap threshold), up to 128 MiB of free heap kept mapped and heaps grown 16 MiB
at a time, the same request faults about 150 times. The price is memory the process keeps
after a burst of big requests: at most the trim threshold per malloc arena.

Set once per server process (:func:`app.server.process.configure_process`), never in a
test's or a training worker's. An operator's own ``MALLOC_*`` variables or glibc malloc
tunables win; on a C library without ``mallopt`` (musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import os
from typing import Final

M_TRIM_THRESHOLD: Final = -1  # glibc's malloc.h
M_TOP_PAD: Final = -2
M_MMAP_THRESHOLD: Final = -3
MMAP_THRESHOLD: Final = 32 * 1024 * 1024  # glibc refuses more (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD: Final = 128 * 1024 * 1024
TOP_PAD: Final = 16 * 1024 * 1024  # a heap grows by this much more at a time
OPERATOR_VARIABLES: Final = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_")


def keep_big_buffers_mapped() -> bool:
    """Raise glibc's mmap and trim thresholds (see the module); whether they were set."""
    if _operator_chose():
        return False
    mallopt = _mallopt()
    if mallopt is None:
        return False
    chosen = (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (M_TOP_PAD, TOP_PAD),
    )
    accepted = [mallopt(option, value) for option, value in chosen]  # each one, always
    return all(accepted)


def _operator_chose() -> bool:
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return any(os.environ.get(name) for name in OPERATOR_VARIABLES) or "malloc." in tunables


def _mallopt() -> ctypes._NamedFuncPointer | None:
    """The C library's ``int mallopt(int, int)`` (musl's does nothing), or None."""
    try:
        function = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int)
    function.restype = ctypes.c_int
    return function
