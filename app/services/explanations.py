"""Explained predictions: the rows capped by ENSEMBLE_MAX_EXPLAIN_ROWS, the explanation
computed from the scikit-learn (or library) model under the ENSEMBLE_EXPLAIN_SECONDS
budget, in the worker thread the prediction already runs in.  A plain request never comes
here: its compiled path is untouched."""

from __future__ import annotations

import time
from typing import Any

from app.services.container import Services
from ensembles.errors import Problem, TooLargeError
from ensembles.explain.explanation import Explained, explain, reference_row, served_outputs
from ensembles.inference import CheckedColumns, Servable
from ensembles.registry import VersionRecord


def check_explain_rows(services: Services, n_rows: int, where: tuple[str | int, ...]) -> None:
    """A 413 before any work when an explained request has more rows than allowed."""
    limit = services.settings.max_explain_rows
    if n_rows > limit:
        msg = f"{n_rows} rows to explain; at most {limit} (ENSEMBLE_MAX_EXPLAIN_ROWS)"
        raise TooLargeError(msg, [Problem(where, msg)])


def explained(
    services: Services, record: VersionRecord, servable: Servable, checked: CheckedColumns
) -> Explained:
    """The explanation of checked rows by the version's stored model."""
    deadline = time.monotonic() + services.settings.explain_seconds
    pipeline = servable.pipeline
    signature = servable.signature
    Xt = servable.transform(checked.columns)
    # The engine's own answer (compiled where the version has it) is what was served.
    answer = servable.engine_for(len(Xt)).answer(Xt, with_proba=True)
    served = served_outputs(pipeline[-1], signature.task, answer.predictions, answer.probabilities)
    return explain(
        pipeline,
        signature.task,
        Xt,
        signature.classes,
        deadline=deadline,
        reference=reference_row(pipeline, _reference(record)),
        served=served,
    )


def _reference(record: VersionRecord) -> dict[str, Any] | None:
    """The reference row training recorded (metrics.explanations.reference), if any."""
    metrics = record.metadata.get("metrics")
    block = metrics.get("explanations") if isinstance(metrics, dict) else None
    reference = block.get("reference") if isinstance(block, dict) else None
    return reference if isinstance(reference, dict) else None
