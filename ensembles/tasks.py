"""The two tasks a model may have: small shared vocabulary, importable without the catalog."""

from __future__ import annotations

from typing import Literal

Task = Literal["classification", "regression"]
TASKS: tuple[Task, ...] = ("classification", "regression")
