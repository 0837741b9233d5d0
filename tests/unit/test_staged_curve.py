"""Boosting's staged score curve scored on class codes (scikit-learn's accuracy_score
sorted 200,000 string labels at each of its 50 points): the very points of
accuracy_score, for every boosting kind, string and integer labels alike."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

from ensembles import metrics
from ensembles.catalog import KINDS
from ensembles.data import select_training_data, table_from_frame
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import frame

STAGED = sorted(
    kind.name
    for kind in KINDS.values()
    if kind.curve == "stages" and "classification" in kind.tasks
)


def _accuracy_points(ensemble: Any, Xt: Any, y: Any, stages: Any) -> list[dict[str, Any]]:
    """The curve as scikit-learn's accuracy_score scores it (the code before)."""
    if stages is not None:
        marks = metrics.checkpoints(stages.count(ensemble))
        staged_at = list(zip(marks, stages.predict(ensemble, Xt, marks), strict=True))
    else:
        preds = list(ensemble.staged_predict(Xt))
        kept = set(metrics.checkpoints(len(preds)))
        staged_at = [(i, p) for i, p in enumerate(preds, start=1) if i in kept]
    return [
        {"n_estimators": i, "score": float(skm.accuracy_score(y, np.ravel(p)))}
        for i, p in staged_at
    ]


@pytest.mark.parametrize("labels", ["strings", "integers"])
@pytest.mark.parametrize("kind", STAGED)
def test_staged_points_are_accuracy_score_s(kind: str, labels: str) -> None:
    table = frame("wine")
    if labels == "strings":
        table = table.assign(target=np.array(["red", "white", "rose"])[table["target"] % 3])
    data = select_training_data(table_from_frame(table), "target")
    spec = resolve_ensemble(parse_estimator_spec({"kind": kind}), data.task)
    model = train(data, spec, EvaluationSpec(holdout_fraction=0.0, cv_folds=0), 3)
    ensemble, stages = model.pipeline[-1], KINDS[kind].stages
    Xt = np.asarray(model.pipeline[:-1].transform(model.train_rows), dtype=np.float64)
    y = np.asarray(data.y)
    points = metrics.staged_curve(ensemble, Xt, y, "classification", stages)
    assert points and points == _accuracy_points(ensemble, Xt, y, stages)
