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

from ensembles.catalog.library_kinds import LIBRARY_KINDS
from ensembles.tasks import Task


def _attempt(library: str, converter: tuple[str, str]) -> tuple[str, ...]:
    try:
        importlib.import_module(library)
        convert = getattr(importlib.import_module(converter[0]), converter[1])
        from skl2onnx import update_registered_converter
        from skl2onnx.common.shape_calculator import (
            calculate_linear_classifier_output_shapes,
            calculate_linear_regressor_output_shapes,
        )
    except ImportError:
        return ()
    registered = []
    for task, cls in _library_classes(library):
        classifier = task == "classification"
        update_registered_converter(
            cls,
            f"{library}{cls.__name__}",
            calculate_linear_classifier_output_shapes
            if classifier
            else calculate_linear_regressor_output_shapes,
            convert,
            options={"nocl": [True, False], "zipmap": [True, False, "columns"]}
            if classifier
            else None,
        )
        registered.append(f"{cls.__module__}.{cls.__name__}")
    return tuple(registered)


def _library_classes(library: str) -> list[tuple[Task, Any]]:
    """The classes of the kinds of ``library``, per task: those the kind builds and those
    older versions hold (skl2onnx finds a converter by the exact class; XGBoost's kind
    builds a subclass of its classifier, whose classes_ onnxmltools reads as any)."""
    found: dict[type, Task] = {}
    for kind in LIBRARY_KINDS:
        if kind.library is not None and kind.library.module == library:
            for classes in (kind.classes, kind.also_fitted_as):
                found.update({cls: task for task, cls in classes.items()})
    return [(task, cls) for cls, task in found.items()]


@functools.cache
def register_boosting_converters() -> tuple[str, ...]:
    """Register what can be registered (once per process); the classes now convertible."""
    return (
        *_attempt(
            "xgboost",
            ("onnxmltools.convert.xgboost.operator_converters.XGBoost", "convert_xgboost"),
        ),
        *_attempt(
            "lightgbm",
            ("onnxmltools.convert.lightgbm.operator_converters.LightGbm", "convert_lightgbm"),
        ),
    )
