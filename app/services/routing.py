"""Which version answers a prediction, and what its shadow gets: one step for ``/v1`` and
``/v2``.

A reference that is a number or ``latest`` names its version; an alias on one version
without a shadow too. A weighted alias picks one of its versions per request
(:func:`ensembles.routing.choose_version`, by the ``X-Routing-Key`` header when given),
and an alias with a shadow hands the request's rows to the shadow queue once answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
import pyarrow as pa

from app.services.container import Services
from app.services.shadows import ShadowRequest
from ensembles.inference import PredictOptions, check_rows, check_table
from ensembles.registry import LATEST, AliasRecord, VersionRecord
from ensembles.registry.names import is_alias
from ensembles.routing import choose_version

__all__ = [
    "ROUTING_KEY_HEADER",
    "Target",
    "alias_label",
    "shadow_answer",
    "target",
    "target_inline",
]

ROUTING_KEY_HEADER: Final = "X-Routing-Key"


@dataclass(frozen=True)
class Target:
    """The version that answers, the alias it was reached through ("" for a number or
    ``latest``), and the alias's weights and shadow where it has them."""

    record: VersionRecord
    alias: str
    route: AliasRecord | None

    @property
    def shadowed(self) -> bool:
        """Does a shadow get this request's rows (:meth:`shadow_of`)?"""
        route = self.route
        return route is not None and route.shadow is not None and route.shadow_epoch is not None

    def shadow_of(
        self, rows: object, task: str, answered: Sequence[object] | np.ndarray
    ) -> ShadowRequest | None:
        """What the shadow gets for these rows and this answer (None: no shadow)."""
        route = self.route
        if route is None or route.shadow is None or route.shadow_epoch is None:
            return None
        return ShadowRequest(
            model=route.model,
            alias=route.alias,
            epoch=route.shadow_epoch,
            version=route.shadow,
            rows=rows,
            task=task,
            answered=answered,
        )


def alias_label(ref: str) -> str:
    """The alias a reference names, for the metrics ("" for a number or ``latest``)."""
    return ref if ref != LATEST and is_alias(ref) else ""


def _chosen(route: AliasRecord, key: str | None) -> int:
    if route.weights is None:
        return route.version
    return choose_version(list(route.weights.items()), key)


def target(services: Services, name: str, ref: str, key: str | None) -> Target:
    """The answering version (blocking: it may read the registry)."""
    registry = services.registry
    route = registry.resolve_alias(name, ref)
    if route is None:
        return Target(registry.resolve_version(name, ref), alias_label(ref), None)
    return Target(registry.resolve_version(name, _chosen(route, key)), ref, route)


def target_inline(services: Services, name: str, ref: str, key: str | None) -> Target | None:
    """:func:`target` from memory only, or None when the registry must be asked."""
    registry = services.registry
    known, route = registry.resolved_alias(name, ref)
    if not known:
        return None
    if route is None:
        record = registry.resolved_version(name, ref)
        return None if record is None else Target(record, alias_label(ref), None)
    record = registry.resolved_version(name, _chosen(route, key))
    return None if record is None else Target(record, ref, route)


def shadow_answer(
    services: Services, request: ShadowRequest
) -> tuple[str, Sequence[object] | np.ndarray]:
    """The shadow version's task and predictions for the request's rows (the shadow
    queue's thread calls it; whatever it raises is counted there as an error)."""
    from app.services.predictions import servable_for  # predictions imports this module

    record = services.registry.resolve_version(request.model, request.version)
    servable = servable_for(services, record)
    max_rows = services.settings.max_predict_rows
    if isinstance(request.rows, pa.Table):
        checked = check_table(servable.signature, request.rows, max_rows)
    else:
        checked = check_rows(servable.signature, request.rows, max_rows)
    prediction = servable.predict(checked.columns, PredictOptions())
    return servable.signature.task, prediction.predictions
