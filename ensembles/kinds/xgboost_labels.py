"""XGBoost's classifier for a table's own classes: ``XGBClassifier`` fitted on their codes.

Why a subclass and not the library's class as it is: XGBoost (2.0 on) refuses any labels
but 0..k-1 in ``fit``, answers those codes from ``predict`` and makes ``classes_`` a
read-only ``arange``; no parameter changes that, and scikit-learn has no meta-estimator
that encodes a classifier's labels without becoming another kind of model.  This class
encodes the labels as scikit-learn's classifiers do (sorted, ``LabelEncoder``), fits the
library on the codes and maps its answers back: booster, margins and probabilities (in
the order of ``classes_``) are those of ``XGBClassifier`` fitted on the codes, and every
part of the service that reads an ``XGBClassifier`` (treelite, ONNX, explanations) reads
this one.  The artifact then needs this package to load (the version's lineage says so).
Imports xgboost: import it only where the library is installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.preprocessing import LabelEncoder
from xgboost import XGBClassifier

__all__ = ["LabelledXGBClassifier"]


class LabelledXGBClassifier(XGBClassifier):
    """``XGBClassifier`` that takes and answers the table's classes (see the module)."""

    def fit(self, X: Any, y: Any, **kwargs: Any) -> LabelledXGBClassifier:
        encoder = LabelEncoder().fit(np.asarray(y))
        eval_set = kwargs.get("eval_set")
        if eval_set is not None:
            kwargs["eval_set"] = [(rows, encoder.transform(np.asarray(v))) for rows, v in eval_set]
        # XGBoost checks the codes it is given against classes_: the codes, while it fits.
        self.__dict__.pop("labels_", None)
        super().fit(X, encoder.transform(np.asarray(y)), **kwargs)
        self.labels_ = encoder.classes_
        return self

    @property
    def classes_(self) -> NDArray[Any]:
        labels = self.__dict__.get("labels_")
        return labels if labels is not None else np.arange(self.n_classes_)

    def predict(
        self,
        X: Any,
        *,
        output_margin: bool = False,
        validate_features: bool = True,
        base_margin: Any = None,
        iteration_range: Any = None,
    ) -> Any:
        answer = super().predict(
            X,
            output_margin=output_margin,
            validate_features=validate_features,
            base_margin=base_margin,
            iteration_range=iteration_range,
        )
        if output_margin:
            return answer
        return self.classes_.take(np.asarray(answer, dtype=np.intp))
