"""The collaborators one app shares, built together by the lifespan and closed together.

The lifespan opens them, puts one :class:`Services` on ``app.state`` and tears them
down in reverse order; :mod:`app.deps` hands each route the part it uses. Only the
prediction path takes the whole container: it needs four parts on every request, and
one dependency to resolve instead of four is measurable on a one-row prediction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.batching import Batcher
from app.jobs.runner import JobRunner
from app.metrics import Metrics
from app.services.shadows import ShadowQueue
from app.settings import Settings
from ensembles.registry import ModelCache, Registry


@dataclass(frozen=True)
class Services:
    """The app's settings, registry, model cache, job runner, metrics, shadow queue and
    prediction batcher."""

    settings: Settings
    registry: Registry
    cache: ModelCache
    runner: JobRunner
    metrics: Metrics
    shadows: ShadowQueue
    batcher: Batcher = field(init=False)  # one per app, as the settings say

    def __post_init__(self) -> None:
        settings = self.settings
        batcher = Batcher(
            settings.batch_max_rows,
            settings.batch_max_wait_ms,
            self.metrics,
            engine_thread=settings.batch_engine_thread,
        )
        object.__setattr__(self, "batcher", batcher)  # frozen: set once, here
