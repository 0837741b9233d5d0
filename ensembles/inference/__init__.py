"""Inference: one path from a request's rows to its prediction.

Four stages, named the same here and in the service:

1. **rows**: the instances as the client sent them (JSON records or columnar, an Arrow
   table);
2. **checked columns** (:class:`CheckedColumns`): one numpy array per feature column and
   the warnings, by :func:`check_rows` (JSON) or :func:`check_table` (Arrow), every problem
   named by row and column (:mod:`ensembles.inference.rows`);
3. **an engine's answer** (:class:`Answer`): the preprocessed rows answered by the first
   engine of the :class:`Servable` that wants the request's size, a compiled one
   (:mod:`~ensembles.inference.compiled`, :mod:`~ensembles.inference.composite`) or
   scikit-learn's own (:mod:`~ensembles.inference.engines`);
4. **the prediction** (:class:`Prediction`): what was asked for, with votes, a voting
   override and spread from the members (:mod:`~ensembles.inference.votes`), which the
   service writes as the response.

Which engines a version gets is decided once, after training, by
:func:`inference_verdict` (:mod:`~ensembles.inference.compiling`, held to
:mod:`~ensembles.inference.fidelity`), and recorded in the version's metadata;
:func:`prepare` honours that record when the version is loaded.
"""

from ensembles.inference.cells import MAX_PROBLEMS, CheckedColumns, Columns, check_row_count
from ensembles.inference.compiled import CompiledModel
from ensembles.inference.compiling import compile_model, inference_verdict, rebuild
from ensembles.inference.composite import CompiledComposite
from ensembles.inference.engines import SKLEARN, Answer, Engine, SklearnEngine
from ensembles.inference.fidelity import FidelityReport
from ensembles.inference.gtil import ENGINE
from ensembles.inference.result import Prediction, PredictOptions
from ensembles.inference.rows import check_records_together, check_rows, numbers_only
from ensembles.inference.servable import Rows, Servable, prepare
from ensembles.inference.tables import check_table

__all__ = [
    "ENGINE",
    "MAX_PROBLEMS",
    "SKLEARN",
    "Answer",
    "CheckedColumns",
    "Columns",
    "CompiledComposite",
    "CompiledModel",
    "Engine",
    "FidelityReport",
    "PredictOptions",
    "Prediction",
    "Rows",
    "Servable",
    "SklearnEngine",
    "check_records_together",
    "check_row_count",
    "check_rows",
    "check_table",
    "compile_model",
    "inference_verdict",
    "numbers_only",
    "prepare",
    "rebuild",
]
