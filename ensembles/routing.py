"""Weighted aliases: which version answers a request, and what a shadow's answers add up to.

An alias may split its traffic between versions by weight (a canary rollout). The choice
for one request is a draw ``u`` in ``[0, 1)`` placed on the cumulative weights, in
ascending version order: with a routing key, ``u`` is the first 8 bytes of the key's
SHA-256 over 2**64, so one key always meets one version (and, as the draw depends on the
key alone, the same customers are the canary of every alias with the same weights);
without one, ``u`` comes from a generator seeded from ``os.urandom``.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Final

from ensembles.errors import Problem, SpecError, shown

__all__ = [
    "MAX_ROUTED_VERSIONS",
    "WEIGHT_TOLERANCE",
    "RouteError",
    "ShadowCounts",
    "check_weights",
    "choose_version",
    "key_draw",
]

MAX_ROUTED_VERSIONS: Final = 10
WEIGHT_TOLERANCE: Final = 1e-9
_RANDOM = random.Random()  # seeded from os.urandom; random() is atomic under the GIL


class RouteError(SpecError):
    """An alias's versions, weights or shadow that cannot be set."""

    title = "Invalid alias"


def check_weights(given: Mapping[str, object], max_version: int) -> dict[int, float]:
    """``{"3": 0.9, "4": 0.1}`` as ``{3: 0.9, 4: 0.1}`` in version order; RouteError
    naming every bad entry (``("versions", key)``) otherwise."""
    problems: list[Problem] = []
    weights: dict[int, float] = {}
    for key, value in given.items():
        number = int(key) if key.isascii() and key.isdigit() and len(key) <= 15 else 0
        if not 1 <= number <= max_version:
            problems.append(Problem(("versions", key), f"not a version number: {shown(key)}"))
        elif not isinstance(value, int | float) or isinstance(value, bool):
            problems.append(Problem(("versions", key), "the weight must be a number"))
        elif not math.isfinite(value) or value <= 0:
            problems.append(Problem(("versions", key), f"the weight must be > 0, not {value}"))
        elif number in weights:
            problems.append(Problem(("versions", key), f"version {number} is given twice"))
        else:
            weights[number] = float(value)
    if not given:
        problems.append(Problem(("versions",), "give at least one version"))
    if len(given) > MAX_ROUTED_VERSIONS:
        problems.append(
            Problem(("versions",), f"at most {MAX_ROUTED_VERSIONS} versions, not {len(given)}")
        )
    if not problems and abs(math.fsum(weights.values()) - 1.0) > WEIGHT_TOLERANCE:
        total = math.fsum(weights.values())
        problems.append(Problem(("versions",), f"the weights must sum to 1, not {total!r}"))
    if problems:
        raise RouteError(f"{len(problems)} problem(s) in the alias's versions", problems)
    return dict(sorted(weights.items()))


def key_draw(key: str) -> float:
    """The routing key's place in ``[0, 1)``: a pure function of the key."""
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def choose_version(weights: Sequence[tuple[int, float]], key: str | None) -> int:
    """The version answering one request: by the key's draw, or a random one."""
    draw = key_draw(key) if key is not None else _RANDOM.random()
    total = math.fsum(weight for _, weight in weights)
    reached = 0.0
    for number, weight in weights:
        reached += weight / total
        if draw < reached:
            return number
    return weights[-1][0]  # rounding left the last edge just under 1


@dataclass
class ShadowCounts:
    """What shadow predictions added since the last time they were recorded.

    ``compared`` rows were compared with the answer (``agreements`` of them with the
    same label, classification) or their ``abs_difference`` summed (regression).
    """

    requests: int = 0
    rows: int = 0
    compared: int = 0
    agreements: int = 0
    abs_difference: float = 0.0
    errors: int = 0
    dropped: int = 0

    def add(self, other: ShadowCounts) -> None:
        for field in fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def empty(self) -> bool:
        return all(not getattr(self, field.name) for field in fields(self))

    def as_dict(self) -> dict[str, int | float]:
        return {field.name: getattr(self, field.name) for field in fields(self)}
