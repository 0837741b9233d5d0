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
from ensembles.catalog.ensemble_kinds import SKLEARN_ENSEMBLE_KINDS
from ensembles.catalog.library_kinds import LIBRARY_KINDS
from ensembles.catalog.own_kinds import OWN_KINDS
from ensembles.catalog.params import MAX_N_ESTIMATORS, SERVICE_OWNED_PARAMS, Domain, Param
from ensembles.catalog.traits import (
    Combination,
    Compiled,
    CurveSource,
    Growth,
    Kind,
    LabelRule,
    MemberNeed,
    MemberRows,
    MemberWalk,
    OobSource,
    Slot,
)
from ensembles.tasks import TASKS, Task

ENSEMBLE_KINDS: tuple[Kind, ...] = (*SKLEARN_ENSEMBLE_KINDS, *OWN_KINDS, *LIBRARY_KINDS)

__all__ = [
    "BASE_KINDS",
    "ENSEMBLE_KINDS",
    "KINDS",
    "MAX_N_ESTIMATORS",
    "SERVICE_OWNED_PARAMS",
    "TASKS",
    "Combination",
    "Compiled",
    "CurveSource",
    "Domain",
    "Growth",
    "Kind",
    "LabelRule",
    "MemberNeed",
    "MemberRows",
    "MemberWalk",
    "OobSource",
    "Param",
    "Slot",
    "Task",
    "catalog_document",
    "kind_of",
]

KINDS: Mapping[str, Kind] = {k.name: k for k in (*ENSEMBLE_KINDS, *BASE_KINDS)}


def _by_class() -> dict[type, Kind]:
    """Each class a fitted model may have, to the first kind fitted as it (kinds sharing
    a class answer every fitted question alike)."""
    found: dict[type, Kind] = {}
    for kind in (*KINDS.values(), *LIBRARY_KINDS):
        for cls in (*kind.classes.values(), *kind.becomes.values(), *kind.also_fitted_as.values()):
            found.setdefault(cls, kind)
    return found


_BY_CLASS = _by_class()


def kind_of(estimator: object) -> Kind | None:
    """The kind of a fitted (or unfitted) estimator, by its class or the nearest catalog
    class it derives from; None for a class no kind has.  The one place a class becomes a
    kind: consumers ask the kind's traits, never the class."""
    for cls in type(estimator).__mro__:
        kind = _BY_CLASS.get(cls)
        if kind is not None:
            return kind
    return None


def catalog_document() -> dict[str, Any]:
    """The document ``GET /v1/kinds`` serves."""
    return {
        "ensemble_kinds": [k.as_catalog_entry() for k in ENSEMBLE_KINDS],
        "base_kinds": [k.as_catalog_entry() for k in BASE_KINDS],
        "service_owned_params": sorted(SERVICE_OWNED_PARAMS),
    }
