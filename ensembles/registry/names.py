"""Model names and aliases: the only strings from users that end up in file paths.

Both are validated where a request is parsed *and* again by the registry before a path
is built from them, so a caller that forgets the first check still cannot make the
registry touch a file outside its folders.
"""

from __future__ import annotations

import re
from typing import Final

from ensembles.errors import Problem, SpecError

MODEL_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
ALIAS_PATTERN: Final = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
LATEST: Final = "latest"
"""The reserved reference to a model's highest visible version; never an alias name."""
MAX_VERSION: Final = 10**15 - 1
"""The highest version number: 15 digits, what a version reference's pattern can say
exactly, within the signed 64 bits of SQLite's INTEGER and PostgreSQL's BIGINT and exact as
a double (a JSON Schema validator that reads ``maximum`` as a float agrees with the server).
A larger number names no version (the request models say 422, the registry 404) instead of
overflowing the database driver."""

_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)
_ALIAS = re.compile(ALIAS_PATTERN)
_VERSION = re.compile(r"^[0-9]{1,15}$")


def is_model_name(name: object) -> bool:
    """True when ``name`` may be used as a model name (and so as a folder name)."""
    # fullmatch, not match: ``$`` would also accept a trailing newline.
    return isinstance(name, str) and _MODEL_NAME.fullmatch(name) is not None


def validate_model_name(name: object) -> str:
    """Return ``name`` unchanged, or raise :class:`SpecError` located at ``("model",)``."""
    if not is_model_name(name):
        raise SpecError(
            f"invalid model name {name!r}",
            [Problem(("model",), f"must match {MODEL_NAME_PATTERN}")],
        )
    assert isinstance(name, str)
    return name


def is_alias(alias: object) -> bool:
    """True when ``alias`` is a well-formed alias name other than the reserved ``latest``."""
    return isinstance(alias, str) and alias != LATEST and _ALIAS.fullmatch(alias) is not None


def validate_alias(alias: object) -> str:
    """Return ``alias`` unchanged, or raise :class:`SpecError` located at ``("alias",)``.

    ``latest`` is refused here (a 422, not a 409): it is not a state of the registry that
    conflicts, it is a name no alias can ever have, because it always means the highest
    visible version.
    """
    if alias == LATEST:
        raise SpecError(
            "'latest' is reserved",
            [Problem(("alias",), "'latest' always means the highest version; choose another")],
        )
    if not is_alias(alias):
        raise SpecError(
            f"invalid alias {alias!r}", [Problem(("alias",), f"must match {ALIAS_PATTERN}")]
        )
    assert isinstance(alias, str)
    return alias


def is_version_number(number: int) -> bool:
    """True when ``number`` can be a stored version (1 to :data:`MAX_VERSION`)."""
    return 1 <= number <= MAX_VERSION


def parse_version_number(ref: str) -> int | None:
    """The version number a reference names, or None when it is not a plain number."""
    if _VERSION.fullmatch(ref) is None:
        return None
    return int(ref)


def describe(model: str, version: int) -> str:
    """How errors name a version: ``model 'iris' version 3``."""
    return f"model {model!r} version {version}"
