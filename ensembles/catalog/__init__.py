"""The kinds: the single source of truth for what users may ask for, and how each behaves.

Every kind names its scikit-learn class per task, the parameters a user may set (bounds
as data, exported as JSON Schema for ``GET /v1/kinds``), the parameters it fixes and the
slots it takes (:mod:`~ensembles.catalog.params`), and its traits
(:mod:`~ensembles.catalog.traits`), which the library reads instead of switching on kind
names or classes.  Parameters the service owns (``SERVICE_OWNED_PARAMS``) are never listed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ensembles.catalog.base_kinds import BASE_KINDS
from ensembles.catalog.ensemble_kinds import ENSEMBLE_KINDS
from ensembles.catalog.params import MAX_N_ESTIMATORS, SERVICE_OWNED_PARAMS, Domain, Param
from ensembles.catalog.traits import (
    CurveSource,
    Growth,
    Kind,
    MemberNeed,
    MemberRows,
    MemberWalk,
    OobSource,
    Slot,
)
from ensembles.tasks import TASKS, Task

__all__ = [
    "BASE_KINDS",
    "ENSEMBLE_KINDS",
    "KINDS",
    "MAX_N_ESTIMATORS",
    "SERVICE_OWNED_PARAMS",
    "TASKS",
    "CurveSource",
    "Domain",
    "Growth",
    "Kind",
    "MemberNeed",
    "MemberRows",
    "MemberWalk",
    "OobSource",
    "Param",
    "Slot",
    "Task",
    "catalog_document",
]

KINDS: Mapping[str, Kind] = {k.name: k for k in (*ENSEMBLE_KINDS, *BASE_KINDS)}


def catalog_document() -> dict[str, Any]:
    """The document ``GET /v1/kinds`` serves."""
    return {
        "ensemble_kinds": [k.as_catalog_entry() for k in ENSEMBLE_KINDS],
        "base_kinds": [k.as_catalog_entry() for k in BASE_KINDS],
        "service_owned_params": sorted(SERVICE_OWNED_PARAMS),
    }
