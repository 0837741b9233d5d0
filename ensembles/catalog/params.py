"""A kind's parameters as data: value domains with bounds, defaults per task, JSON Schema."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ensembles.tasks import TASKS, Task

SERVICE_OWNED_PARAMS = frozenset({"n_jobs", "verbose", "warm_start", "random_state", "oob_score"})
MAX_N_ESTIMATORS = 5000

# --- value domains -------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """One admissible shape of a parameter value (a parameter accepts any of its domains)."""

    json_type: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple[Any, ...] = ()
    items: Literal["positive_integer", "non_negative_number"] | None = None

    def accepts(self, value: object) -> bool:
        if self.json_type == "null":
            return value is None
        if self.json_type == "boolean":
            return isinstance(value, bool)
        if self.json_type == "string":
            return isinstance(value, str) and (not self.choices or value in self.choices)
        if self.json_type == "integer":
            return isinstance(value, int) and not isinstance(value, bool) and self._in_range(value)
        if self.json_type == "number":
            ok_type = isinstance(value, int | float) and not isinstance(value, bool)
            return ok_type and math.isfinite(float(value)) and self._in_range(float(value))  # type: ignore[arg-type]
        if self.json_type == "array":
            return isinstance(value, list) and bool(value) and all(self._item_ok(v) for v in value)
        raise AssertionError(self.json_type)

    def _item_ok(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.items == "positive_integer":
            return isinstance(value, int) and value >= 1
        return math.isfinite(value) and value >= 0

    def _in_range(self, value: float) -> bool:
        lo, hi = self.minimum, self.maximum
        below = lo is not None and (value < lo or (self.exclusive_minimum and value == lo))
        above = hi is not None and (value > hi or (self.exclusive_maximum and value == hi))
        return not (below or above)

    def describe(self) -> str:
        if self.json_type in ("null", "boolean"):
            return self.json_type
        if self.json_type == "string":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.json_type == "array":
            return f"a non-empty list of {self.items}s".replace("_", " ")
        noun = "an integer" if self.json_type == "integer" else "a number"
        low = "" if self.minimum is None else ("> " if self.exclusive_minimum else ">= ")
        high = "" if self.maximum is None else ("< " if self.exclusive_maximum else "<= ")
        parts = [
            p
            for p in (low and f"{low}{_fmt(self.minimum)}", high and f"{high}{_fmt(self.maximum)}")
            if p
        ]
        return noun + (" " + " and ".join(parts) if parts else "")

    def json_schema(self) -> dict[str, Any]:
        if self.json_type == "string" and self.choices:
            return {"type": "string", "enum": list(self.choices)}
        if self.json_type == "array":
            item = (
                {"type": "integer", "minimum": 1}
                if self.items == "positive_integer"
                else {"type": "number", "minimum": 0}
            )
            return {"type": "array", "minItems": 1, "items": item}
        schema: dict[str, Any] = {"type": self.json_type}
        if self.minimum is not None:
            schema["exclusiveMinimum" if self.exclusive_minimum else "minimum"] = self.minimum
        if self.maximum is not None:
            schema["exclusiveMaximum" if self.exclusive_maximum else "maximum"] = self.maximum
        return schema


def _fmt(x: float | None) -> str:
    return "" if x is None else (str(int(x)) if float(x).is_integer() else repr(x))


def Int(lo: float | None = None, hi: float | None = None) -> Domain:  # noqa: N802
    return Domain("integer", lo, hi)


def Num(  # noqa: N802
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
) -> Domain:
    return Domain("number", lo, hi, lo_open, hi_open)


def Choice(*values: str) -> Domain:  # noqa: N802
    return Domain("string", choices=values)


BOOL = Domain("boolean")
NULL = Domain("null")
INT_LIST = Domain("array", items="positive_integer")
WEIGHTS = Domain("array", items="non_negative_number")


@dataclass(frozen=True)
class Param:
    """A user-settable parameter: its domains, default (per task when they differ), and help."""

    name: str
    domains: tuple[Domain, ...]
    default: Any
    description: str
    tasks: tuple[Task, ...] = TASKS
    default_by_task: Mapping[Task, Any] = field(default_factory=dict)
    domains_by_task: Mapping[Task, tuple[Domain, ...]] = field(default_factory=dict)

    def default_for(self, task: Task) -> Any:
        return self.default_by_task.get(task, self.default)

    def domains_for(self, task: Task) -> tuple[Domain, ...]:
        return self.domains_by_task.get(task, self.domains)

    def accepts(self, value: object, task: Task) -> bool:
        return any(d.accepts(value) for d in self.domains_for(task))

    def describe(self, task: Task) -> str:
        return " or ".join(d.describe() for d in self.domains_for(task))

    def json_schema(self, task: Task) -> dict[str, Any]:
        domains = self.domains_for(task)
        body: dict[str, Any] = (
            domains[0].json_schema()
            if len(domains) == 1
            else {"anyOf": [d.json_schema() for d in domains]}
        )
        return {**body, "default": self.default_for(task), "description": self.description}


def P(  # noqa: N802
    name: str, domains: Domain | tuple[Domain, ...], default: Any, description: str, **kw: Any
) -> Param:
    return Param(
        name, domains if isinstance(domains, tuple) else (domains,), default, description, **kw
    )
