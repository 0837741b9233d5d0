"""skl2onnx converters for the boosting libraries' estimators, where they can be had.

skl2onnx converts scikit-learn's own classes; XGBoost and LightGBM models convert with
onnxmltools' converters, registered here with skl2onnx so that they work anywhere in a
pipeline (at the top, or as a voting/stacking/bagging member). Each registration
activates only when both the library and onnxmltools import: where they are missing, a
member of that library is reported by the export as a part without a converter.
CatBoost has no converter usable inside a skl2onnx graph (its own ``save_model(format=
"onnx")`` exports a whole model only), so CatBoost members are such parts too.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any


def _attempt(library: str, classes: tuple[str, str], converter: tuple[str, str]) -> list[str]:
    try:
        module = importlib.import_module(library)
        convert = getattr(importlib.import_module(converter[0]), converter[1])
        from skl2onnx import update_registered_converter
        from skl2onnx.common.shape_calculator import (
            calculate_linear_classifier_output_shapes,
            calculate_linear_regressor_output_shapes,
        )
    except ImportError:
        return []
    classifier: Any = getattr(module, classes[0])
    regressor: Any = getattr(module, classes[1])
    update_registered_converter(
        classifier,
        f"{library}{classes[0]}",
        calculate_linear_classifier_output_shapes,
        convert,
        options={"nocl": [True, False], "zipmap": [True, False, "columns"]},
    )
    update_registered_converter(
        regressor, f"{library}{classes[1]}", calculate_linear_regressor_output_shapes, convert
    )
    return [f"{library}.{name}" for name in classes]


@functools.cache
def register_boosting_converters() -> tuple[str, ...]:
    """Register what can be registered (once per process); the classes now convertible."""
    return (
        *_attempt(
            "xgboost",
            ("XGBClassifier", "XGBRegressor"),
            ("onnxmltools.convert.xgboost.operator_converters.XGBoost", "convert_xgboost"),
        ),
        *_attempt(
            "lightgbm",
            ("LGBMClassifier", "LGBMRegressor"),
            ("onnxmltools.convert.lightgbm.operator_converters.LightGbm", "convert_lightgbm"),
        ),
    )
