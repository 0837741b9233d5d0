"""The Open Inference Protocol (KServe V2) over the one inference path: an adapter, not a
second prediction.

A request's tensors become the Arrow table a ``/v1`` table body becomes (one column per
feature, in the feature's own type), which :func:`ensembles.inference.check_table` checks
and :func:`app.services.predictions.predict_checked` predicts, exactly as for ``/v1``; the
:class:`~ensembles.inference.Prediction` is then written back as output tensors.  So the
numbers are the ``/v1`` numbers, and every row check is the ``/v1`` check, its problems
re-worded to name the tensor and element instead of the row and column.

Inputs: one tensor per feature named as the feature (shape ``[n]`` or ``[n, 1]``), or,
for a model whose features are all numeric, one 2-D tensor ``[n, n_features]`` of any
name, its columns in training order.  ``NaN`` in a floating tensor is a missing value
(JSON has no null in a numeric tensor, and the binary extension carries only numbers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa

import app as app_package
from app.services.container import Services
from app.services.explanations import check_explain_rows, explained
from app.services.predictions import predict_checked, servable_for
from app.services.routing import Target, target
from app.services.shadows import ShadowRequest
from app.tensors import InferenceRequest, OutputTensor, Tensor, TensorError, parse_request
from app.tensors import encode_response as encode
from app.threads import in_thread
from ensembles.builders import NUMERIC_DTYPES, FeatureColumn
from ensembles.errors import PredictionInputError, Problem, TooLargeError
from ensembles.explain.explanation import Explained
from ensembles.inference import CheckedColumns, Prediction, PredictOptions, Servable, check_table
from ensembles.inference.votes import option_problems
from ensembles.registry import VersionRecord
from ensembles.signature import ModelSignature

__all__ = [
    "PLATFORM",
    "infer",
    "model_metadata",
    "model_ready",
    "server_metadata",
]

PLATFORM: Final = "scikit-learn"
EXTENSIONS: Final = ("binary_tensor_data",)
# Which option each output needs.
OUTPUT_OPTIONS: Final[Mapping[str, str | None]] = {
    "predictions": None,
    "probabilities": "return_proba",
    "votes": "return_votes",
    "weighted_votes": "return_votes",
    "agreement": "return_votes",
    "std": "return_std",
    "contributions": "explain",
    "base_values": "explain",
}
_FLAGS: Final = ("return_proba", "return_votes", "return_std", "explain")
_FEATURE_DATATYPES: Final = {"int64": "INT64", "float64": "FP64", "bool": "BOOL"}
_NUMERIC_TENSORS: Final = frozenset(
    {"FP16", "FP32", "FP64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32"}
    | {"UINT64"}
)
_SHOWN_PROBLEMS: Final = 5


def server_metadata() -> dict[str, Any]:
    return {
        "name": "ensemble-service",
        "version": app_package.__version__,
        "extensions": list(EXTENSIONS),
    }


# --- models ------------------------------------------------------------------------------


async def model_ready(services: Services, name: str, ref: str) -> dict[str, Any]:
    """The version resolved and loaded (a 404 when there is no such version)."""
    record, _ = await in_thread(_loaded, services, name, ref)
    return {"name": name, "version": str(record.version), "ready": True}


async def model_metadata(services: Services, name: str, ref: str) -> dict[str, Any]:
    return await in_thread(_metadata, services, name, ref)


def _loaded(services: Services, name: str, ref: str) -> tuple[VersionRecord, Servable]:
    record = services.registry.resolve_version(name, ref)
    return record, servable_for(services, record)


def _metadata(services: Services, name: str, ref: str) -> dict[str, Any]:
    record, servable = _loaded(services, name, ref)
    signature = servable.signature
    versions = [str(v.version) for v in services.registry.list_versions(name)]
    parameters: dict[str, Any] = {
        "version": record.version,
        "task": signature.task,
        "kind": signature.kind,
    }
    if signature.classes is not None:
        parameters["classes"] = _classes_text(signature)
    if _all_numeric(signature):
        n = len(signature.features)
        parameters["matrix_input"] = f"or one FP64 tensor of shape [-1, {n}], features in order"
    return {
        "name": name,
        "versions": versions,
        "platform": PLATFORM,
        "inputs": [_input_metadata(f) for f in signature.features],
        "outputs": _outputs_metadata(servable),
        "parameters": parameters,
    }


def _input_metadata(feature: FeatureColumn) -> dict[str, Any]:
    datatype = _FEATURE_DATATYPES.get(feature.dtype, "BYTES")
    return {"name": feature.name, "datatype": datatype, "shape": [-1]}


def _outputs_metadata(servable: Servable) -> list[dict[str, Any]]:
    """Every output this version can give (an option it cannot honour: no output)."""
    signature = servable.signature
    k = len(signature.classes or ())
    offered = {
        flag
        for flag in _FLAGS
        if not option_problems(signature, servable.pipeline, [], _only(flag), None)
    }
    n_features = len(signature.features)
    shapes = {
        "predictions": (_label_datatype(signature), [-1]),
        "probabilities": ("FP64", [-1, k]),
        "votes": ("INT64", [-1, k]),
        "weighted_votes": ("FP64", [-1, k]),
        "agreement": ("FP64", [-1]),
        "std": ("FP64", [-1]),
        "contributions": ("FP64", [-1, -1, n_features] if k else [-1, n_features]),
        "base_values": ("FP64", [-1] if k else [1]),
    }
    return [
        {"name": name, "datatype": datatype, "shape": shape}
        for name, (datatype, shape) in shapes.items()
        if OUTPUT_OPTIONS[name] is None or OUTPUT_OPTIONS[name] in offered
    ]


def _only(flag: str) -> PredictOptions:
    return PredictOptions(
        return_proba=flag == "return_proba",
        return_votes=flag == "return_votes",
        return_std=flag == "return_std",
    )


def _all_numeric(signature: ModelSignature) -> bool:
    return all(f.dtype in NUMERIC_DTYPES for f in signature.features)


def _label_datatype(signature: ModelSignature) -> str:
    """How predictions travel: labels as BYTES, BOOL or INT64 (FP64 for float labels)."""
    if signature.task == "regression" or signature.classes is None:
        return "FP64"
    kinds = {type(c) for c in signature.classes}
    if kinds == {bool}:
        return "BOOL"
    if kinds == {int}:
        return "INT64"
    return "FP64" if kinds <= {int, float} else "BYTES"


def _classes_text(signature: ModelSignature) -> str:
    """The classes as a JSON list in a string: the protocol's parameters are scalars."""
    return json.dumps(list(signature.classes or ()))


# --- inference ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Asked:
    """What the request asks for: the options, which outputs, where each option came from."""

    options: PredictOptions
    outputs: tuple[str, ...]
    origin: Mapping[str, str]  # option -> "parameter 'x'" or "output 'y'"


async def infer(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    header_length: str | None,
    key: str | None = None,
) -> tuple[bytes, int | None, ShadowRequest | None]:
    """The response body (and the length of its JSON part when binary outputs follow),
    and what the alias's shadow gets once it is sent; ``key`` routes a weighted alias."""
    return await in_thread(_infer, services, name, ref, body, header_length, key)


def _infer(
    services: Services,
    name: str,
    ref: str,
    body: bytes,
    header_length: str | None,
    key: str | None,
) -> tuple[bytes, int | None, ShadowRequest | None]:
    max_rows = services.settings.max_predict_rows
    request = parse_request(body, header_length, max_rows)  # a 400 before a 404, as /v1's 422
    asked = _asked(request)
    chosen = target(services, name, ref, key)
    record, servable = chosen.record, servable_for(services, chosen.record)
    signature = servable.signature
    names = _input_names(request, signature)
    table = _table(request, signature)
    try:
        checked = check_table(signature, table, max_rows)
    except TooLargeError as exc:
        raise TooLargeError(f"{exc.detail}: {_listed(exc.problems, names, {})}") from None
    except PredictionInputError as exc:
        raise TensorError(f"{exc.detail}: {_listed(exc.problems, names, {})}") from None
    if "explain" in asked.origin:
        check_explain_rows(services, table.num_rows, ("inputs",))
    prediction = _predict(services, chosen, servable, checked, asked, names)
    outputs = _output_tensors(signature, prediction, asked.outputs)
    if "explain" in asked.origin:
        outputs += _explanation_tensors(explained(services, record, servable, checked))
    head: dict[str, Any] = {"model_name": record.model, "model_version": str(record.version)}
    if request.id is not None:
        head["id"] = request.id
    parameters: dict[str, Any] = {"task": signature.task}
    if checked.warnings:
        parameters["warnings"] = "; ".join(checked.warnings)
    head["parameters"] = parameters
    content, json_length = encode(head, outputs, _binary_outputs(request, asked.outputs))
    return content, json_length, chosen.shadow_of(table, signature.task, prediction.predictions)


def _predict(
    services: Services,
    chosen: Target,
    servable: Servable,
    checked: CheckedColumns,
    asked: _Asked,
    names: Mapping[str, str],
) -> Prediction:
    try:
        return predict_checked(
            services, chosen.record, servable, checked, asked.options, chosen.alias
        )
    except PredictionInputError as exc:
        raise TensorError(f"{exc.detail}: {_listed(exc.problems, names, asked.origin)}") from None


def _asked(request: InferenceRequest) -> _Asked:
    """The options of the request's parameters and outputs list; a 400 for a parameter of
    the wrong type or an output no model gives."""
    parameters = request.parameters
    origin: dict[str, str] = {}
    voting = parameters.get("voting")
    if voting is not None and voting not in ("hard", "soft"):
        raise TensorError(f"parameter 'voting' must be 'hard' or 'soft', got {voting!r}")
    if voting is not None:
        origin["voting"] = "parameter 'voting'"
    flags: dict[str, bool] = {}
    for flag in _FLAGS:
        value = parameters.get(flag, False)
        if not isinstance(value, bool):
            raise TensorError(f"parameter {flag!r} must be true or false, got {value!r}")
        flags[flag] = value
        if value:
            origin[flag] = f"parameter {flag!r}"
    if request.outputs is None:
        # weighted_votes only when named in the outputs list
        outputs = [
            name
            for name, option in OUTPUT_OPTIONS.items()
            if name != "weighted_votes" and (option is None or flags[option])
        ]
    else:
        outputs = []
        for requested in request.outputs:
            option = OUTPUT_OPTIONS.get(requested.name, "unknown")
            if option == "unknown":
                known = ", ".join(OUTPUT_OPTIONS)
                raise TensorError(f"unknown output {requested.name!r}; outputs are: {known}")
            if option is not None and not flags[option]:
                flags[option] = True
                origin[option] = f"output {requested.name!r}"
            if requested.name not in outputs:
                outputs.append(requested.name)
    options = PredictOptions(
        voting=voting,
        return_proba=flags["return_proba"],
        return_votes=flags["return_votes"],
        return_std=flags["return_std"],
    )
    return _Asked(options, tuple(outputs), origin)


def _binary_outputs(request: InferenceRequest, outputs: tuple[str, ...]) -> set[str]:
    """The outputs to send as raw bytes: ``binary_data_output`` of the request, overridden
    by each requested output's ``binary_data``."""
    default = request.parameters.get("binary_data_output", False)
    if not isinstance(default, bool):
        raise TensorError("parameter 'binary_data_output' must be true or false")
    own = {o.name: o.parameters.get("binary_data") for o in request.outputs or ()}
    binary: set[str] = set()
    for name in outputs:
        chosen = own.get(name)
        if chosen is not None and not isinstance(chosen, bool):
            raise TensorError(f"output {name!r}: parameter 'binary_data' must be true or false")
        if (default if chosen is None else chosen) is True:
            binary.add(name)
    return binary


# --- tensors -> the table of the inference path ------------------------------------------


def _matrix(request: InferenceRequest, signature: ModelSignature) -> Tensor | None:
    """The one 2-D tensor holding every feature, if that is what the request sent."""
    if len(request.inputs) != 1:
        return None
    tensor = request.inputs[0]
    features = signature.features
    if len(tensor.shape) != 2 or (tensor.name in {f.name for f in features} and len(features) > 1):
        return None
    return tensor


def _input_names(request: InferenceRequest, signature: ModelSignature) -> dict[str, str]:
    """How problems name each feature: the tensor and element it came from."""
    matrix = _matrix(request, signature)
    if matrix is None:
        return {f.name: f"input {f.name!r}" for f in signature.features}
    return {
        f.name: f"input {matrix.name!r} column {j} (feature {f.name!r})"
        for j, f in enumerate(signature.features)
    }


def _table(request: InferenceRequest, signature: ModelSignature) -> pa.Table:
    matrix = _matrix(request, signature)
    if matrix is not None:
        return _matrix_table(matrix, signature)
    wanted = {f.name: f for f in signature.features}
    given = {t.name: t for t in request.inputs}
    unknown = [t.name for t in request.inputs if t.name not in wanted]
    if unknown:
        raise TensorError(f"unknown input {unknown[0]!r}; {_expected(signature)}")
    missing = [f.name for f in signature.features if f.name not in given]
    if missing:
        raise TensorError(f"missing input {missing[0]!r}; {_expected(signature)}")
    rows = {t.name: _rows(t) for t in request.inputs}
    first = request.inputs[0]
    for tensor in request.inputs[1:]:
        if rows[tensor.name] != rows[first.name]:
            raise TensorError(
                f"input {tensor.name!r} has {rows[tensor.name]} rows but input "
                f"{first.name!r} has {rows[first.name]}: every input holds one element per row"
            )
    columns = [_column(given[f.name], f) for f in signature.features]
    return pa.table(columns, names=[f.name for f in signature.features])


def _expected(signature: ModelSignature) -> str:
    names = ", ".join(repr(f.name) for f in signature.features)
    text = f"the model's inputs are {names}, one tensor each"
    if _all_numeric(signature):
        text += f", or one 2-D tensor of shape [n, {len(signature.features)}]"
    return text


def _rows(tensor: Tensor) -> int:
    """A feature tensor's number of rows: shape [n] or [n, 1]."""
    if len(tensor.shape) == 1 or (len(tensor.shape) == 2 and tensor.shape[1] == 1):
        return tensor.shape[0]
    raise TensorError(
        f"input {tensor.name!r}: shape must be [n] or [n, 1] (one element per row), "
        f"got {list(tensor.shape)}"
    )


def _column(tensor: Tensor, feature: FeatureColumn) -> pa.Array:
    """The tensor as the Arrow column a ``/v1`` table body would carry for the feature."""
    label = f"input {tensor.name!r}"
    if feature.dtype in NUMERIC_DTYPES:
        if tensor.datatype not in _NUMERIC_TENSORS:
            raise TensorError(
                f"{label}: datatype {tensor.datatype}, but feature {feature.name!r} is numeric: "
                "send FP64, FP32, INT64 or INT32"
            )
        return _numbers(tensor.data)
    if feature.dtype == "bool":
        if tensor.datatype != "BOOL":
            raise TensorError(
                f"{label}: datatype {tensor.datatype}, but feature {feature.name!r} is "
                "boolean: send BOOL"
            )
        return pa.array(tensor.data, type=pa.bool_())
    if tensor.datatype != "BYTES":
        raise TensorError(
            f"{label}: datatype {tensor.datatype}, but feature {feature.name!r} holds strings: "
            "send BYTES"
        )
    return pa.array(_texts(tensor, label), type=pa.string())


def _numbers(data: np.ndarray[Any, Any]) -> pa.Array:
    """Integers as int64 (or uint64), floats widened to float64 with NaN as null."""
    if data.dtype.kind == "f":
        return pa.array(data.astype(np.float64), from_pandas=True)
    if data.dtype == np.uint64:
        return pa.array(data)
    return pa.array(data.astype(np.int64))


def _texts(tensor: Tensor, label: str) -> list[str]:
    out: list[str] = []
    for i, value in enumerate(tensor.data.tolist()):
        try:
            out.append(value.decode("utf-8"))
        except UnicodeDecodeError:
            raise TensorError(f"{label}: element {i} is not UTF-8 text") from None
    return out


def _matrix_table(tensor: Tensor, signature: ModelSignature) -> pa.Table:
    features = signature.features
    label = f"input {tensor.name!r}"
    if not _all_numeric(signature):
        raise TensorError(
            f"{label}: a 2-D tensor is only for models whose features are all numeric; "
            f"{_expected(signature)}"
        )
    if tensor.datatype not in _NUMERIC_TENSORS:
        raise TensorError(f"{label}: datatype {tensor.datatype}; send FP64, FP32, INT64 or INT32")
    n_rows, n_columns = tensor.shape
    if n_columns != len(features):
        raise TensorError(
            f"{label}: shape {list(tensor.shape)} has {n_columns} columns but the model has "
            f"{len(features)} features; {_expected(signature)}"
        )
    grid = tensor.data.reshape(n_rows, n_columns)
    columns = [_numbers(np.ascontiguousarray(grid[:, j])) for j in range(n_columns)]
    return pa.table(columns, names=[f.name for f in features])


def _listed(
    problems: tuple[Problem, ...], names: Mapping[str, str], origin: Mapping[str, str]
) -> str:
    """The path's problems, worded for tensors: ``input 'x' element 3: ...``."""
    texts = [_worded(p, names, origin) for p in problems[:_SHOWN_PROBLEMS]]
    more = len(problems) - _SHOWN_PROBLEMS
    return "; ".join(texts) + (f"; and {more} more" if more > 0 else "")


def _worded(problem: Problem, names: Mapping[str, str], origin: Mapping[str, str]) -> str:
    loc = problem.loc
    if loc[:1] == ("options",) and len(loc) > 1:
        option = str(loc[1])
        return f"{origin.get(option, f'parameter {option!r}')}: {problem.msg}"
    if len(loc) == 3 and isinstance(loc[1], int):
        where = names.get(str(loc[2]), f"input {loc[2]!r}")
        return f"{where} element {loc[1]}: {problem.msg}"
    return f"inputs: {problem.msg}"


# --- the prediction -> output tensors ----------------------------------------------------


def _output_tensors(
    signature: ModelSignature, prediction: Prediction, names: tuple[str, ...]
) -> list[OutputTensor]:
    n = len(prediction.predictions)
    classes = list(signature.classes or ())
    with_classes = {"classes": _classes_text(signature)} if classes else {}
    out: list[OutputTensor] = []
    for name in names:
        if name == "predictions":
            datatype = _label_datatype(signature)
            data = np.asarray(prediction.predictions, dtype=object if datatype == "BYTES" else None)
            out.append(OutputTensor(name, datatype, (n,), data))
        elif name == "probabilities" and prediction.probabilities is not None:
            proba = prediction.probabilities
            out.append(OutputTensor(name, "FP64", proba.shape, proba, with_classes))
        elif name in ("votes", "weighted_votes") and prediction.votes is not None:
            tallies = prediction.votes if name == "votes" else prediction.weighted_votes
            table = _tally_table(tallies or prediction.votes, classes)
            datatype = "INT64" if name == "votes" else "FP64"
            out.append(OutputTensor(name, datatype, table.shape, table, with_classes))
        elif name == "agreement" and prediction.agreement is not None:
            out.append(OutputTensor(name, "FP64", (n,), prediction.agreement))
        elif name == "std" and prediction.std is not None:
            out.append(OutputTensor(name, "FP64", (n,), prediction.std))
    return out


def _explanation_tensors(explanation: Explained) -> list[OutputTensor]:
    """``contributions`` [n, k, features] ([n, features] for regression) and
    ``base_values`` [k] ([1]), named in JSON-string parameters as /v1 names them."""
    contributions = explanation.contributions
    parameters: dict[str, Any] = {
        "features": json.dumps(list(explanation.features)),
        "space": explanation.space,
        "method": explanation.method,
        "exact": explanation.exact,
    }
    named = explanation.outputs_named
    if named is None:
        contributions = contributions[:, 0, :]
    else:
        parameters["classes"] = json.dumps(list(named))
    base = explanation.base
    return [
        OutputTensor("contributions", "FP64", contributions.shape, contributions, parameters),
        OutputTensor("base_values", "FP64", base.shape, base, dict(parameters)),
    ]


def _tally_table(rows: list[dict[str, Any]], classes: list[Any]) -> np.ndarray[Any, Any]:
    """Per-row ``{label: tally}`` (only classes with votes) as an [n, n_classes] matrix."""
    keys = [str(c) for c in classes]
    return np.array([[row.get(key, 0) for key in keys] for row in rows], dtype=np.float64)
