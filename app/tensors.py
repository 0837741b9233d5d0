"""Tensors of the Open Inference Protocol (KServe V2, REST): request bodies in, response
bodies out, with the binary tensor data extension.

Knows the protocol's wire format and nothing of models, so the adapter
(:mod:`app.services.oip`) can turn tensors into the rows the one inference path takes
without parsing anything itself.  A JSON body is an inference request; a body sent with an
``Inference-Header-Content-Length`` header is that many bytes of JSON followed by the raw
bytes of the inputs whose ``parameters.binary_data_size`` say how long each is (little
endian, row-major; a ``BYTES`` element is a 4-byte little-endian length and its bytes).
Every problem is a :class:`TensorError` whose message names the tensor or field; a tensor
of more rows (its first dimension) than the limit is a :class:`TooLargeError`.  A declared
shape is checked against the data actually sent, and against the row limit, before any
array is made: a shape is only a claim, and memory is spent on what was sent.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Final

import numpy as np
import orjson

from ensembles.errors import Problem, TooLargeError

__all__ = [
    "DATATYPES",
    "HEADER_LENGTH",
    "InferenceRequest",
    "OutputTensor",
    "RequestedOutput",
    "Tensor",
    "TensorError",
    "encode_response",
    "parse_request",
]

HEADER_LENGTH: Final = "Inference-Header-Content-Length"
# The protocol's datatypes and the numpy dtype of each (little endian, as on the wire).
DATATYPES: Final[Mapping[str, np.dtype[Any]]] = {
    "BOOL": np.dtype("?"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BYTES": np.dtype(object),
}
_MAX_DIMENSIONS = 8
_LENGTH = struct.Struct("<I")
# model_name and model_version are not the protocol's, but KServe's client sends them.
_REQUEST_FIELDS: Final = frozenset({"id", "parameters", "inputs", "outputs"}) | {
    "model_name",
    "model_version",
}
Parameters = dict[str, Any]


class TensorError(ValueError):
    """A request the protocol cannot read; the message names the tensor or field."""


@dataclass(frozen=True)
class Tensor:
    """One input: ``data`` holds its elements flat, in row-major order (``bytes`` objects
    for ``BYTES``), ``shape`` their arrangement."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray[Any, Any]
    parameters: Parameters = field(default_factory=dict)


@dataclass(frozen=True)
class RequestedOutput:
    name: str
    parameters: Parameters = field(default_factory=dict)


@dataclass(frozen=True)
class InferenceRequest:
    inputs: tuple[Tensor, ...]
    outputs: tuple[RequestedOutput, ...] | None  # None: the request named no outputs
    parameters: Parameters
    id: str | None = None


@dataclass(frozen=True)
class OutputTensor:
    """One output: ``data`` any array of the shape (or a flat list of its elements)."""

    name: str
    datatype: str
    shape: tuple[int, ...]
    data: np.ndarray[Any, Any]
    parameters: Parameters = field(default_factory=dict)


# --- requests ----------------------------------------------------------------------------


def parse_request(
    body: bytes, header_length: str | None, max_rows: int | None = None
) -> InferenceRequest:
    """The inference request of ``body``; ``header_length`` is the value of the
    ``Inference-Header-Content-Length`` header (None without it: the body is all JSON);
    a tensor of more than ``max_rows`` rows is refused before it is decoded."""
    json_part, binary = _split(body, header_length)
    try:
        document = orjson.loads(json_part)
    except orjson.JSONDecodeError as exc:
        raise TensorError(f"the request is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise TensorError("the request must be a JSON object with 'inputs'")
    unknown = sorted(set(document) - _REQUEST_FIELDS)
    if unknown:
        raise TensorError(f"unknown field {unknown[0]!r} in the request")
    request_id = document.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise TensorError("field 'id' must be a string")
    parameters = _parameters(document.get("parameters"), "the request's parameters")
    raw_inputs = document.get("inputs")
    if not isinstance(raw_inputs, list) or not raw_inputs:
        raise TensorError("field 'inputs' must be a non-empty list of tensors")
    offset = 0
    inputs: list[Tensor] = []
    for position, raw in enumerate(raw_inputs):
        tensor, offset = _input(raw, position, binary, offset, max_rows)
        if any(t.name == tensor.name for t in inputs):
            raise TensorError(f"input {tensor.name!r} is given twice")
        inputs.append(tensor)
    if offset != len(binary):
        raise TensorError(
            f"the body has {len(binary) - offset} bytes of binary data that no input's "
            "binary_data_size accounts for"
        )
    return InferenceRequest(
        tuple(inputs), _outputs(document.get("outputs")), parameters, request_id
    )


def _split(body: bytes, header_length: str | None) -> tuple[bytes, bytes]:
    """The JSON header and the binary data after it."""
    if header_length is None:
        return body, b""
    try:
        length = int(header_length.strip())
    except ValueError:
        length = -1
    if not 0 <= length <= len(body):
        raise TensorError(
            f"header {HEADER_LENGTH} must be a whole number of bytes between 0 and the "
            f"body's length ({len(body)}), got {header_length!r}"
        )
    return body[:length], body[length:]


def _parameters(raw: object, where: str) -> Parameters:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise TensorError(f"{where} must be a JSON object")
    return raw


def _outputs(raw: object) -> tuple[RequestedOutput, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise TensorError("field 'outputs' must be a list of {'name': ...} objects")
    outputs: list[RequestedOutput] = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str):
            raise TensorError(f"outputs[{i}] must be an object with a string 'name'")
        extra = sorted(set(item) - {"name", "parameters"})
        if extra:
            raise TensorError(f"unknown field {extra[0]!r} in output {name!r}")
        parameters = _parameters(item.get("parameters"), f"the parameters of output {name!r}")
        outputs.append(RequestedOutput(name, parameters))
    return tuple(outputs)


def _input(
    raw: object, position: int, binary: bytes, offset: int, max_rows: int | None
) -> tuple[Tensor, int]:
    """One input tensor and the offset of the next input's binary data."""
    if not isinstance(raw, dict):
        raise TensorError(f"inputs[{position}] must be an object")
    name = raw.get("name")
    if not isinstance(name, str):
        raise TensorError(f"inputs[{position}] needs a string 'name'")
    label = f"input {name!r}"
    extra = sorted(set(raw) - {"name", "shape", "datatype", "parameters", "data"})
    if extra:
        raise TensorError(f"unknown field {extra[0]!r} in {label}")
    datatype = raw.get("datatype")
    if datatype not in DATATYPES:
        known = ", ".join(DATATYPES)
        raise TensorError(f"{label}: datatype must be one of {known}, got {datatype!r}")
    assert isinstance(datatype, str)
    shape = _shape(raw.get("shape"), label)
    parameters = _parameters(raw.get("parameters"), f"the parameters of {label}")
    count = math.prod(shape)
    size = parameters.get("binary_data_size")
    if size is not None:
        if "data" in raw:
            raise TensorError(f"{label} has both 'data' and binary_data_size")
        if type(size) is not int or size < 0:
            raise TensorError(f"{label}: binary_data_size must be a whole number of bytes")
        if offset + size > len(binary):
            raise TensorError(
                f"{label}: binary_data_size is {size} but only {len(binary) - offset} bytes "
                "of binary data are left in the body"
            )
        _check_binary_size(datatype, shape, size, label)
        _check_row_limit(shape, position, label, max_rows)
        chunk = binary[offset : offset + size]
        data = _from_bytes(chunk, datatype, count, label)
        return Tensor(name, datatype, shape, data, parameters), offset + size
    if "data" not in raw:
        raise TensorError(f"{label} has no 'data' (nor a binary_data_size parameter)")
    flat = _flat(raw["data"], label)
    if len(flat) != count:
        raise TensorError(f"{label}: shape holds {count} elements but data has {len(flat)}")
    _check_row_limit(shape, position, label, max_rows)
    data = _from_json(flat, datatype, count, label)
    return Tensor(name, datatype, shape, data, parameters), offset


def _check_binary_size(datatype: str, shape: tuple[int, ...], size: int, label: str) -> None:
    """The elements the shape declares must fit the bytes sent: a fixed size each, or at
    least a 4-byte length each for ``BYTES`` (checked before anything is allocated for
    them, so a short body cannot declare a huge tensor)."""
    count = math.prod(shape)
    if datatype == "BYTES":
        if 4 * count > size:
            raise TensorError(
                f"{label}: shape {list(shape)} holds {count} BYTES elements, which take at "
                f"least {4 * count} bytes (a 4-byte length each), but binary_data_size is {size}"
            )
        return
    itemsize = DATATYPES[datatype].itemsize
    if count * itemsize != size:
        raise TensorError(
            f"{label}: shape {list(shape)} holds {count} {datatype} elements, which take "
            f"{count * itemsize} bytes, but binary_data_size is {size}"
        )


def _check_row_limit(
    shape: tuple[int, ...], position: int, label: str, max_rows: int | None
) -> None:
    """A tensor's rows are its first dimension (``[n]``, ``[n, 1]`` or ``[n, n_features]``)."""
    if max_rows is not None and shape[0] > max_rows:
        rows = f"shape {list(shape)} holds {shape[0]} rows"
        msg = f"{label}: {rows}; at most {max_rows} rows per request"
        raise TooLargeError(msg, [Problem(("inputs", position, "shape"), msg)])


def _shape(raw: object, label: str) -> tuple[int, ...]:
    if (
        not isinstance(raw, list)
        or not 1 <= len(raw) <= _MAX_DIMENSIONS
        or any(type(d) is not int or d < 0 for d in raw)
    ):
        raise TensorError(
            f"{label}: shape must be a list of 1 to {_MAX_DIMENSIONS} non-negative integers, "
            f"got {_short(raw)}"
        )
    return tuple(raw)


def _short(value: object) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= 60 else text[:57] + "..."


def _flat(data: object, label: str) -> list[Any]:
    """The elements of JSON tensor data, flat (nested lists are row-major)."""
    if not isinstance(data, list):
        raise TensorError(f"{label}: data must be a list, got {_short(data)}")
    flat: list[Any] = data
    while any(type(v) is list for v in flat):
        if not all(type(v) is list for v in flat):
            raise TensorError(f"{label}: data mixes lists and values")
        flat = list(chain.from_iterable(flat))
    return flat


def _from_json(flat: list[Any], datatype: str, count: int, label: str) -> np.ndarray[Any, Any]:
    """Elements already counted against the shape, checked against the datatype."""
    types = set(map(type, flat))
    if datatype == "BYTES":
        if not types <= {str}:
            raise TensorError(f"{label}: BYTES data must be strings, got {_odd(flat, {str})}")
        out = np.empty(count, dtype=object)
        out[:] = [s.encode() for s in flat]
        return out
    if datatype == "BOOL":
        if not types <= {bool}:
            raise TensorError(f"{label}: BOOL data must be true or false, got {_odd(flat, {bool})}")
        return np.array(flat, dtype=np.bool_).reshape(count)
    floating = datatype.startswith("FP")
    allowed: set[type] = {int, float} if floating else {int}
    if not types <= allowed:
        want = "numbers" if floating else "integers"
        raise TensorError(f"{label}: {datatype} data must be {want}, got {_odd(flat, allowed)}")
    try:
        array = np.array(flat, dtype=np.float64 if floating else np.int64).reshape(count)
    except OverflowError:
        raise TensorError(f"{label}: an integer is out of range for {datatype}") from None
    target = DATATYPES[datatype]
    if not floating and not np.array_equal(array.astype(target).astype(np.int64), array):
        raise TensorError(f"{label}: an integer is out of range for {datatype}")
    with np.errstate(over="ignore"):  # overflowing is what is looked for
        narrowed = array.astype(target)
    if floating and np.isinf(narrowed).any() and np.isfinite(array).all():
        raise TensorError(f"{label}: a number is out of range for {datatype}")
    return narrowed


def _odd(flat: Sequence[Any], allowed: set[type]) -> str:
    """The first element of a type not ``allowed``, for a message."""
    for i, value in enumerate(flat):
        if type(value) not in allowed:
            return f"{_short(value)} at element {i}"
    return "a value of another type"


def _from_bytes(chunk: bytes, datatype: str, count: int, label: str) -> np.ndarray[Any, Any]:
    if datatype == "BYTES":
        return _bytes_elements(chunk, count, label)
    dtype = DATATYPES[datatype]  # its size checked by _check_binary_size
    array = np.frombuffer(chunk, dtype=np.uint8 if datatype == "BOOL" else dtype)
    if datatype == "BOOL":
        if (array > 1).any():
            raise TensorError(f"{label}: BOOL bytes must be 0 or 1")
        return array.astype(np.bool_)
    return array


def _bytes_elements(chunk: bytes, count: int, label: str) -> np.ndarray[Any, Any]:
    """``count`` elements, each a 4-byte little-endian length and that many bytes."""
    out = np.empty(count, dtype=object)
    position = 0
    for i in range(count):
        if position + 4 > len(chunk):
            raise TensorError(f"{label}: binary BYTES data ends before element {i}")
        (length,) = _LENGTH.unpack_from(chunk, position)
        position += 4
        if position + length > len(chunk):
            raise TensorError(f"{label}: binary BYTES element {i} runs past its data")
        out[i] = chunk[position : position + length]
        position += length
    if position != len(chunk):
        raise TensorError(f"{label}: {len(chunk) - position} bytes after its {count} elements")
    return out


# --- responses ---------------------------------------------------------------------------


def encode_response(
    head: Mapping[str, Any], outputs: Sequence[OutputTensor], binary: set[str]
) -> tuple[bytes, int | None]:
    """The response body: ``head`` (model_name, model_version, id, parameters) with the
    outputs, those named in ``binary`` as raw bytes after the JSON; and the JSON's length
    for ``Inference-Header-Content-Length`` (None when nothing is binary)."""
    documents: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for output in outputs:
        document: dict[str, Any] = {
            "name": output.name,
            "datatype": output.datatype,
            "shape": list(output.shape),
        }
        parameters = dict(output.parameters)
        if output.name in binary:
            raw = _to_bytes(output)
            parameters["binary_data_size"] = len(raw)
            chunks.append(raw)
        else:
            document["data"] = _json_data(output)
        if parameters:
            document["parameters"] = parameters
        documents.append(document)
    header = orjson.dumps({**head, "outputs": documents}, option=orjson.OPT_SERIALIZE_NUMPY)
    if not chunks:
        return header, None
    return header + b"".join(chunks), len(header)


def _json_data(output: OutputTensor) -> Any:
    array = np.asarray(output.data)
    if output.datatype == "BYTES":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in array.ravel().tolist()]
    return np.ascontiguousarray(array.ravel().astype(DATATYPES[output.datatype]))


def _to_bytes(output: OutputTensor) -> bytes:
    array = np.asarray(output.data).ravel()
    if output.datatype == "BYTES":
        parts: list[bytes] = []
        for value in array.tolist():
            raw = value if isinstance(value, bytes) else str(value).encode()
            parts += [_LENGTH.pack(len(raw)), raw]
        return b"".join(parts)
    return np.ascontiguousarray(array.astype(DATATYPES[output.datatype])).tobytes()
