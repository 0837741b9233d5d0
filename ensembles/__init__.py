"""Ensemble models: specs, building, training, metrics, prediction and storage.

The domain library behind the service; it knows nothing about HTTP.  Public names are
re-exported here; the modules stay the place to read how each piece works.
"""

from ensembles.builders import FeatureColumn, build_estimator, build_pipeline
from ensembles.catalog import ENSEMBLE_KINDS, KINDS, Kind, Task, catalog_document
from ensembles.data import (
    ColumnSummary,
    Table,
    TableLimits,
    TrainingData,
    read_table,
    select_training_data,
    table_from_frame,
    table_from_records,
    table_from_rows,
    table_to_parquet,
)
from ensembles.errors import (
    ConflictError,
    DataError,
    EnsembleError,
    IntegrityError,
    NotFoundError,
    PredictionInputError,
    Problem,
    SpecError,
    StorageError,
    TooLargeError,
    TrainingCancelledError,
    TrainingError,
    UnsupportedFormatError,
)
from ensembles.prediction import PredictionResult, PredictOptions, predict, rows_to_frame
from ensembles.signature import ModelSignature
from ensembles.specs import (
    EstimatorSpec,
    EvaluationSpec,
    SpecLimits,
    TrainingSpec,
    parse_estimator_spec,
    parse_training_spec,
)
from ensembles.training import CancelToken, FittedModel, ProgressCallback, train
from ensembles.validation import resolve_ensemble

__all__ = [
    "ENSEMBLE_KINDS",
    "KINDS",
    "CancelToken",
    "ColumnSummary",
    "ConflictError",
    "DataError",
    "EnsembleError",
    "EstimatorSpec",
    "EvaluationSpec",
    "FeatureColumn",
    "FittedModel",
    "IntegrityError",
    "Kind",
    "ModelSignature",
    "NotFoundError",
    "PredictOptions",
    "PredictionInputError",
    "PredictionResult",
    "Problem",
    "ProgressCallback",
    "SpecError",
    "SpecLimits",
    "StorageError",
    "Table",
    "TableLimits",
    "Task",
    "TooLargeError",
    "TrainingCancelledError",
    "TrainingData",
    "TrainingError",
    "TrainingSpec",
    "UnsupportedFormatError",
    "build_estimator",
    "build_pipeline",
    "catalog_document",
    "parse_estimator_spec",
    "parse_training_spec",
    "predict",
    "read_table",
    "resolve_ensemble",
    "rows_to_frame",
    "select_training_data",
    "table_from_frame",
    "table_from_records",
    "table_from_rows",
    "table_to_parquet",
    "train",
]
