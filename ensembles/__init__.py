"""Ensemble models: specs, building, training, metrics, prediction and storage.

The domain library behind the service; it knows nothing about HTTP.  Public names are
re-exported here; the modules stay the place to read how each piece works.
"""

from ensembles.batches import table_to_columns
from ensembles.builders import FeatureColumn, build_estimator, build_pipeline
from ensembles.catalog import ENSEMBLE_KINDS, KINDS, Kind, Task, catalog_document
from ensembles.compiled import (
    CompiledModel,
    FidelityReport,
    compile_model,
    predict_rows,
    rebuild,
)
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
from ensembles.prediction import (
    PredictionArrays,
    PredictionResult,
    PredictOptions,
    predict,
    predict_arrays,
    rows_to_columns,
    rows_to_frame,
)
from ensembles.serving import Servable, prepare
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
from ensembles.validation import check_against_rows, resolve_ensemble

__all__ = [
    "ENSEMBLE_KINDS",
    "KINDS",
    "CancelToken",
    "ColumnSummary",
    "CompiledModel",
    "ConflictError",
    "DataError",
    "EnsembleError",
    "EstimatorSpec",
    "EvaluationSpec",
    "FeatureColumn",
    "FidelityReport",
    "FittedModel",
    "IntegrityError",
    "Kind",
    "ModelSignature",
    "NotFoundError",
    "PredictOptions",
    "PredictionArrays",
    "PredictionInputError",
    "PredictionResult",
    "Problem",
    "ProgressCallback",
    "Servable",
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
    "check_against_rows",
    "compile_model",
    "parse_estimator_spec",
    "parse_training_spec",
    "predict",
    "predict_arrays",
    "predict_rows",
    "prepare",
    "read_table",
    "rebuild",
    "resolve_ensemble",
    "rows_to_columns",
    "rows_to_frame",
    "select_training_data",
    "table_from_frame",
    "table_from_records",
    "table_from_rows",
    "table_to_columns",
    "table_to_parquet",
    "train",
]
