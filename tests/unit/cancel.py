"""A cancel token for training tests: it turns on after a number of progress reports."""

from __future__ import annotations

import threading


class CancelAfter:
    """Pass ``tick`` as the progress callback and the token as ``cancel``."""

    def __init__(self, reports: int) -> None:
        self.left = reports
        self.event = threading.Event()

    def tick(self, done: int, total: int, stage: str) -> None:
        self.left -= 1
        if self.left <= 0:
            self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()
