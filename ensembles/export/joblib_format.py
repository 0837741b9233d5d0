"""``joblib``: the artifact itself, a plain scikit-learn ``Pipeline`` pickled with joblib.

The service serves the stored artifact's bytes (written by the same ``joblib.dump`` at
training); :func:`dumps` is the same format for a model in memory.
"""

from __future__ import annotations

import io

import joblib

from ensembles.export.exported import Exported


def dumps(model: object) -> Exported:
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    return Exported(buffer.getvalue(), {})
