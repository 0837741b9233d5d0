"""The service's own algorithms, each ending as plain scikit-learn objects in the artifact
(but one).

* :mod:`ensembles.kinds.pasting_votes` — Breiman's pasting of small votes (Rvotes,
  Ivotes) with out-of-bag stopping;
* :mod:`ensembles.kinds.ensemble_selection` — Caruana's ensemble selection from a library,
  over :mod:`ensembles.kinds.selection` (the greedy selection on a prediction matrix);
* :mod:`ensembles.kinds.base` — what they share: the report they leave, the fitted
  ``VotingClassifier`` / ``VotingRegressor`` they become;
* :mod:`ensembles.kinds.adaboost` — what scikit-learn's AdaBoost needs beyond its class;
* :mod:`ensembles.kinds.adaboost_mh` — Schapire & Singer's AdaBoost.MH, the exception:
  no scikit-learn class computes it, so its own class stays in the artifact (any level).

Training fits one like any estimator (with a ``monitor`` for progress and cancellation),
then :func:`adopt` puts the plain scikit-learn ensemble it became in its place in the
pipeline and hands back what it measured.  These kinds stand only at the top of a spec
(the catalog's ``Kind.becomes``): nested, their own class would reach the artifact.
"""

from __future__ import annotations

from sklearn.pipeline import Pipeline

from ensembles.kinds.base import OwnEnsemble, OwnReport
from ensembles.kinds.ensemble_selection import (
    EnsembleSelectionClassifier,
    EnsembleSelectionRegressor,
)
from ensembles.kinds.pasting_votes import PastingVotesClassifier, PastingVotesRegressor

__all__ = [
    "EnsembleSelectionClassifier",
    "EnsembleSelectionRegressor",
    "OwnEnsemble",
    "OwnReport",
    "PastingVotesClassifier",
    "PastingVotesRegressor",
    "adopt",
]


def adopt(pipeline: Pipeline) -> OwnReport | None:
    """Swap a fitted own algorithm in ``pipeline`` for the scikit-learn ensemble it became,
    and return its report (None, and the pipeline untouched, for any other estimator)."""
    name, step = pipeline.steps[-1]
    if not isinstance(step, OwnEnsemble):
        return None
    pipeline.set_params(**{name: step.ensemble_})
    return step.report_
