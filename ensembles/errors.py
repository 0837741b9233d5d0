"""One exception root for the domain library.

Each subclass carries a stable, transport-free ``code``; the HTTP layer maps codes to
status codes in a single table, so nothing here knows about HTTP.  Errors that concern
several places of an input carry ``problems``: each one a location path (field names and
indices, e.g. ``("ensemble", "estimators", 1, "params", "n_estimators")`` or
``("rows", 3, "columns", "age")``) and a message a user can act on.
"""

from __future__ import annotations

import reprlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

Location = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input, and where it is."""

    loc: Location
    msg: str

    def as_dict(self) -> dict[str, object]:
        return {"loc": list(self.loc), "msg": self.msg}


_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 3, 5, 5
_SHOWN.maxstring, _SHOWN.maxother = 40, 40


def shown(value: object) -> str:
    """``value`` as a message quotes it: short, and bounded in depth, where ``repr`` of a
    list nested a thousand levels deep (valid JSON) raises RecursionError."""
    return _SHOWN.repr(value)


class EnsembleError(Exception):
    """Root of every error the library raises on purpose."""

    code: ClassVar[str] = "error"
    title: ClassVar[str] = "Ensemble service error"

    def __init__(self, detail: str, problems: Sequence[Problem] = ()) -> None:
        super().__init__(detail)
        self.detail = detail
        self.problems: tuple[Problem, ...] = tuple(problems)


class SpecError(EnsembleError):
    """A training request that cannot be trained: every problem found, with its path."""

    code = "invalid_spec"
    title = "Invalid training request"


class DataError(EnsembleError):
    """A table that cannot be read, or target/feature columns unfit for the request."""

    code = "invalid_data"
    title = "Invalid table"


class UnsupportedFormatError(EnsembleError):
    """A table in a format the service does not read."""

    code = "unsupported_format"
    title = "Unsupported table format"


class TooLargeError(EnsembleError):
    """An input over one of the configured limits."""

    code = "too_large"
    title = "Input too large"


class PredictionInputError(EnsembleError):
    """Rows or options of a prediction request that the model cannot take."""

    code = "invalid_input"
    title = "Invalid prediction request"


class NotFoundError(EnsembleError):
    """A dataset, model, version, alias or job that does not exist."""

    code = "not_found"
    title = "Not found"


class ConflictError(EnsembleError):
    """A request that contradicts the current state (e.g. deleting an aliased version)."""

    code = "conflict"
    title = "Conflict"


class QueueFullError(EnsembleError):
    """No room for another training job: as many as allowed are queued or running."""

    code = "queue_full"
    title = "Too many training jobs"


class IntegrityError(EnsembleError):
    """A stored artifact whose bytes no longer match the recorded checksum."""

    code = "integrity"
    title = "Stored artifact is damaged"


class TrainingError(EnsembleError):
    """Fitting failed for a reason in the user's data or parameters."""

    code = "training_failed"
    title = "Training failed"


class TrainingCancelledError(EnsembleError):
    """Training stopped because its cancel token was set."""

    code = "cancelled"
    title = "Training cancelled"


class StorageError(EnsembleError):
    """The registry database or artifact store could not complete a write or read."""

    code = "storage"
    title = "Storage unavailable"
