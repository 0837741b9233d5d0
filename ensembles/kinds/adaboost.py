"""scikit-learn's AdaBoost: what the catalog entry needs beyond its class (the hardest rows
are replayed in :mod:`ensembles.science.hardest_rows`)."""

from __future__ import annotations

from sklearn.base import BaseEstimator, is_classifier

__all__ = ["stop_note"]


def stop_note(ensemble: BaseEstimator) -> str | None:
    """AdaBoost fits fewer members than asked when one is perfect or no better than
    chance: say so and why (None when it fitted them all)."""
    asked = int(ensemble.n_estimators)
    fitted = len(ensemble.estimators_)
    if fitted >= asked:
        return None
    head = f"AdaBoost stopped after {fitted} of {asked} members: "
    error = float(ensemble.estimator_errors_[fitted - 1])
    if error == 0:
        return head + (
            f"member {fitted} fits the training rows perfectly (weighted error 0), "
            "so there is nothing left to boost"
        )
    if error == 1:  # never recorded: the regressor keeps a first member that is too weak
        return head + (f"member {fitted} had a weighted loss >= 0.5 and is kept as the only member")
    if is_classifier(ensemble):
        k = len(ensemble.classes_)
        return head + (
            f"member {fitted + 1} did no better than chance on the reweighted rows "
            f"(weighted error >= 1 - 1/{k} = {1 - 1 / k:.2g}) and was dropped"
        )
    return head + (
        f"member {fitted + 1} had a weighted loss >= 0.5 on the reweighted rows and was dropped"
    )
