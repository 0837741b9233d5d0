"""The collaborators one app shares, built together by the lifespan and closed together.

The lifespan opens them, puts one :class:`Services` on ``app.state`` and tears them
down in reverse order; :mod:`app.deps` hands each route the part it uses. Only the
prediction path takes the whole container: it needs four parts on every request, and
one dependency to resolve instead of four is measurable on a one-row prediction.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.jobs.runner import JobRunner
from app.metrics import Metrics
from app.services.shadows import ShadowQueue
from app.settings import Settings
from ensembles.registry import ModelCache, Registry


@dataclass(frozen=True)
class Services:
    """The app's settings, registry, model cache, job runner, metrics and shadow queue."""

    settings: Settings
    registry: Registry
    cache: ModelCache
    runner: JobRunner
    metrics: Metrics
    shadows: ShadowQueue
