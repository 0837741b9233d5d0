"""The one hand-off from the event loop to the worker thread pool.

Everything the registry or the library does may block (disk, database, CPU), so async
code reaches it only through :func:`in_thread`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio.to_thread

P = ParamSpec("P")
T = TypeVar("T")


async def in_thread(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run a blocking call in the worker thread pool, keeping the event loop free."""
    return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))
