"""Open Inference Protocol (KServe V2) documents, as the OpenAPI document shows them.

The protocol's own shapes (``rest_predict_v2.yaml`` of KServe): the routes parse and write
them by hand (:mod:`app.tensors`), so these models only describe them.  Parameters are
scalars (string, number or boolean), as the protocol says.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Datatype = Literal[
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BYTES",
]
Parameters = dict[str, str | int | float | bool]
_TENSOR_DATA = (
    "The elements, flat in row-major order or nested as the shape; strings for BYTES. "
    "Absent when the tensor's `parameters.binary_data_size` says its bytes follow the JSON "
    "(binary tensor data extension)."
)

INFER_EXAMPLE: dict[str, Any] = {
    "inputs": [
        {"name": "sepal_length", "shape": [2], "datatype": "FP64", "data": [5.1, 6.7]},
        {"name": "sepal_width", "shape": [2], "datatype": "FP64", "data": [3.5, 3.0]},
        {"name": "petal_length", "shape": [2], "datatype": "FP64", "data": [1.4, 5.2]},
        {"name": "petal_width", "shape": [2], "datatype": "FP64", "data": [0.2, 2.3]},
    ],
    "parameters": {"return_proba": True},
}
MATRIX_EXAMPLE: dict[str, Any] = {
    "inputs": [
        {"name": "input-0", "shape": [1, 4], "datatype": "FP64", "data": [[5.1, 3.5, 1.4, 0.2]]}
    ],
    "outputs": [{"name": "predictions"}, {"name": "probabilities"}],
}


class OipError(BaseModel):
    """The protocol's error body."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"error": "input 'petal_width': shape must be [n] or [n, 1], got [2, 2]"}]
        }
    )

    error: str = Field(description="What is wrong, naming the tensor or field.")


class ServerMetadata(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "ensemble-service",
                    "version": "0.1.0",
                    "extensions": ["binary_tensor_data"],
                }
            ]
        }
    )

    name: str
    version: str
    extensions: list[str] = Field(description="`binary_tensor_data`.")


class ServerLive(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"live": True}]})

    live: bool


class ServerReady(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"ready": True}]})

    ready: bool


class MetadataTensor(BaseModel):
    name: str
    datatype: Datatype
    shape: list[int] = Field(description="-1 for the number of rows.")


class ModelMetadata(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "iris-clf",
                    "versions": ["1", "2", "3"],
                    "platform": "scikit-learn",
                    "inputs": [{"name": "sepal_length", "datatype": "FP64", "shape": [-1]}],
                    "outputs": [
                        {"name": "predictions", "datatype": "BYTES", "shape": [-1]},
                        {"name": "probabilities", "datatype": "FP64", "shape": [-1, 3]},
                    ],
                    "parameters": {
                        "version": 3,
                        "task": "classification",
                        "kind": "random_forest",
                        "classes": '["setosa", "versicolor", "virginica"]',
                    },
                }
            ]
        }
    )

    name: str
    versions: list[str] = Field(description="Every version of the model.")
    platform: str = Field(description="`scikit-learn`.")
    inputs: list[MetadataTensor] = Field(description="One tensor per feature, in order.")
    outputs: list[MetadataTensor] = Field(description="Every output this version can give.")
    parameters: Parameters = Field(
        description="`version` (the one the path named), `task`, `kind`, `classes` (a JSON "
        "list, as text), `matrix_input` (all-numeric models: one 2-D tensor also works)."
    )


class ModelReady(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"name": "iris-clf", "version": "3", "ready": True}]}
    )

    name: str
    version: str = Field(description="The version the path named, resolved.")
    ready: bool


class RequestInput(BaseModel):
    name: str = Field(description="A feature's name, or any name for one 2-D tensor.")
    shape: list[int] = Field(description="[n] or [n, 1] per feature; [n, n_features] for one.")
    datatype: Datatype
    parameters: Parameters | None = Field(default=None, description="`binary_data_size`.")
    data: list[Any] | None = Field(default=None, description=_TENSOR_DATA)


class RequestOutput(BaseModel):
    name: Literal[
        "predictions",
        "probabilities",
        "votes",
        "weighted_votes",
        "agreement",
        "std",
        "contributions",
        "base_values",
    ]
    parameters: Parameters | None = Field(
        default=None, description="`binary_data`: this output as raw bytes after the JSON."
    )


class OipInferenceRequest(BaseModel):
    """Rows as tensors, and what to return."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [INFER_EXAMPLE, MATRIX_EXAMPLE]},
    )

    id: str | None = None
    model_name: str | None = Field(default=None, description="Ignored (the path names it).")
    model_version: str | None = Field(default=None, description="Ignored (the path names it).")
    parameters: Parameters | None = Field(
        default=None,
        description="`voting` ('hard' or 'soft'), `return_proba`, `return_votes`, `return_std`, "
        "`explain` as in `/v1` predict; `binary_data_output`: every output as raw bytes.",
    )
    inputs: list[RequestInput] = Field(min_length=1)
    outputs: list[RequestOutput] | None = Field(
        default=None,
        description="The outputs to return (asking for one asks for what it needs); without "
        "it, `predictions` and what the parameters ask for.",
    )


class ResponseOutput(BaseModel):
    name: str
    shape: list[int]
    datatype: Datatype
    parameters: Parameters | None = Field(
        default=None, description="`classes` (a JSON list, as text), `binary_data_size`."
    )
    data: list[Any] | None = Field(default=None, description=_TENSOR_DATA)


class InferenceResponse(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model_name": "iris-clf",
                    "model_version": "3",
                    "parameters": {"task": "classification"},
                    "outputs": [
                        {
                            "name": "predictions",
                            "datatype": "BYTES",
                            "shape": [1],
                            "data": ["setosa"],
                        },
                        {
                            "name": "probabilities",
                            "datatype": "FP64",
                            "shape": [1, 3],
                            "data": [0.97, 0.02, 0.01],
                            "parameters": {"classes": '["setosa", "versicolor", "virginica"]'},
                        },
                    ],
                }
            ]
        }
    )

    model_name: str
    model_version: str
    id: str | None = None
    parameters: Parameters | None = Field(
        default=None, description="`task`; `warnings` (e.g. categories not seen in training)."
    )
    outputs: list[ResponseOutput]
