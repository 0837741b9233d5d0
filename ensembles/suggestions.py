"""Did you mean …? for a name the service does not know (a column, a kind, a parameter).

A message that only says what is wrong leaves the user to look up what is right; these
helpers put the likely name, and the names there are, into the message itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_LISTED = 20


def closest(name: str, known: Iterable[str]) -> list[str]:
    """The names ``name`` was likely meant to be: the same name in another case first (a
    difflib ratio ranks ``Species`` far from nothing), else difflib's closest match (one:
    three near names read as a guess, not a suggestion)."""
    names = list(dict.fromkeys(known))
    same = [n for n in names if n.casefold() == name.casefold() and n != name]
    if same:
        return same
    return difflib.get_close_matches(name, names, n=1, cutoff=0.6)


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'species'?"`` (to append to a message), or "" when nothing is close."""
    matches = closest(name, known)
    if not matches:
        return ""
    return f"; did you mean {' or '.join(repr(m) for m in matches)}?"


def listing(what: str, known: Iterable[str]) -> str:
    """``"the columns are 'a', 'b'"`` with at most MAX_LISTED names (and how many more)."""
    names = list(known)
    shown = ", ".join(repr(n) for n in names[:MAX_LISTED])
    more = f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else ""
    return f"the {what} are {shown}{more}" if names else f"there are no {what}"


def hint(what: str, name: str, known: Iterable[str]) -> str:
    """The tail of ``"no column 'Species' in the table; did you mean 'species'? (the
    columns are …)"``: the suggestion, then the names to choose from."""
    names = list(known)
    return f"{did_you_mean(name, names)} ({listing(what, names)})"
