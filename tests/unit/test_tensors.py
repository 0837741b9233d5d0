"""The Open Inference Protocol's wire format (app.tensors): JSON and binary tensors in,
JSON and binary tensors out, every refusal naming the tensor or field."""

from __future__ import annotations

import math
import struct
import tracemalloc
from typing import Any

import numpy as np
import orjson
import pytest

from app.tensors import OutputTensor, TensorError, encode_response, parse_request
from ensembles.errors import TooLargeError


def _json(document: dict[str, Any]) -> bytes:
    return orjson.dumps(document)


def _binary(document: dict[str, Any], *chunks: bytes) -> tuple[bytes, str]:
    head = _json(document)
    return head + b"".join(chunks), str(len(head))


def test_json_tensors_flat_or_nested() -> None:
    body = _json(
        {
            "id": "r1",
            "parameters": {"return_proba": True},
            "inputs": [
                {"name": "a", "shape": [2, 2], "datatype": "FP64", "data": [[1, 2.5], [3, 4]]},
                {"name": "b", "shape": [2], "datatype": "INT32", "data": [7, -8]},
                {"name": "c", "shape": [2, 1], "datatype": "BOOL", "data": [[True], [False]]},
                {"name": "d", "shape": [2], "datatype": "BYTES", "data": ["x", "é"]},
            ],
            "outputs": [{"name": "predictions", "parameters": {"binary_data": True}}],
        }
    )
    request = parse_request(body, None)
    a, b, c, d = request.inputs
    assert request.id == "r1" and request.parameters == {"return_proba": True}
    assert a.shape == (2, 2) and a.data.dtype == np.float64
    np.testing.assert_array_equal(a.data, [1, 2.5, 3, 4])
    assert b.data.dtype == np.int32 and b.data.tolist() == [7, -8]
    assert c.data.tolist() == [True, False]
    assert d.data.tolist() == [b"x", "é".encode()]
    assert request.outputs is not None
    assert request.outputs[0].name == "predictions"
    assert request.outputs[0].parameters == {"binary_data": True}


def test_binary_tensors_after_the_json_header() -> None:
    numbers = np.array([[1.5, -2.0], [3.25, 4.0]], dtype="<f4")
    flags = np.array([1, 0], dtype=np.uint8)
    texts = b"".join(struct.pack("<I", len(t)) + t for t in (b"ab", b"", "ü".encode()))
    document = {
        "inputs": [
            {
                "name": "m",
                "shape": [2, 2],
                "datatype": "FP32",
                "parameters": {"binary_data_size": 16},
            },
            {"name": "f", "shape": [2], "datatype": "BOOL", "parameters": {"binary_data_size": 2}},
            {"name": "j", "shape": [1], "datatype": "INT64", "data": [5]},
            {
                "name": "t",
                "shape": [3],
                "datatype": "BYTES",
                "parameters": {"binary_data_size": len(texts)},
            },
        ]
    }
    body, length = _binary(document, numbers.tobytes(), flags.tobytes(), texts)
    m, f, j, t = parse_request(body, length).inputs
    np.testing.assert_array_equal(m.data.reshape(2, 2), numbers)
    assert f.data.tolist() == [True, False]
    assert j.data.tolist() == [5]
    assert t.data.tolist() == [b"ab", b"", "ü".encode()]


@pytest.mark.parametrize(
    ("document", "header", "message"),
    [
        ({"inputs": []}, None, "'inputs' must be a non-empty list"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP65", "data": [1]}]}, None,
         "input 'x': datatype must be one of"),
        ({"inputs": [{"name": "x", "shape": [2], "datatype": "FP64", "data": [1]}]}, None,
         "input 'x': shape holds 2 elements but data has 1"),
        ({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP64", "data": [1]}]}, None,
         "input 'x': shape must be a list"),
        ({"inputs": [{"name": "x", "shape": [2], "datatype": "FP64", "data": [1, "a"]}]}, None,
         "input 'x': FP64 data must be numbers, got \"a\" at element 1"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "INT64", "data": [1.5]}]}, None,
         "input 'x': INT64 data must be integers, got 1.5 at element 0"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "INT8", "data": [300]}]}, None,
         "input 'x': an integer is out of range for INT8"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "BOOL", "data": [1]}]}, None,
         "input 'x': BOOL data must be true or false"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "BYTES", "data": [1]}]}, None,
         "input 'x': BYTES data must be strings"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP64"}]}, None,
         "input 'x' has no 'data'"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "data": [1], "size": 1}]},
         None, "unknown field 'size' in input 'x'"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "data": [1]}] * 2}, None,
         "input 'x' is given twice"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "data": [1]}],
          "outputs": [{"nom": "p"}]}, None, "outputs[0] must be an object with a string 'name'"),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP64", "data": [1]}]}, "x",
         "Inference-Header-Content-Length must be a whole number"),
        ({"inputs": [{"name": "x", "shape": [2], "datatype": "FP64",
                      "parameters": {"binary_data_size": 16}}]}, "",
         "input 'x': binary_data_size is 16 but only 8 bytes of binary data are left"),
    ],
)  # fmt: skip
def test_refusals_name_the_tensor_or_field(
    document: dict[str, Any], header: str | None, message: str
) -> None:
    body = _json(document)
    if header == "":  # a binary input whose bytes are fewer than it says
        body, header = _binary(document, b"\0" * 8)
    with pytest.raises(TensorError) as caught:
        parse_request(body, header)
    assert message in str(caught.value)


def test_binary_sizes_must_account_for_every_byte() -> None:
    document = {
        "inputs": [
            {"name": "x", "shape": [1], "datatype": "FP64", "parameters": {"binary_data_size": 8}}
        ]
    }
    body, length = _binary(document, b"\0" * 12)
    with pytest.raises(TensorError, match="4 bytes of binary data that no input"):
        parse_request(body, length)
    body, length = _binary(
        {"inputs": [{**document["inputs"][0], "parameters": {"binary_data_size": 4}}]}, b"\0" * 4
    )
    with pytest.raises(
        TensorError, match=r"input 'x': shape \[1\] holds 1 FP64 elements, which take 8"
    ):
        parse_request(body, length)


ONE_BYTES_ELEMENT = struct.pack("<I", 1) + b"a"


@pytest.mark.parametrize(
    ("datatype", "shape", "data"),
    [
        ("BYTES", [10**8, 1], ONE_BYTES_ELEMENT),  # was 760 MB allocated, then a 400
        ("BYTES", [10**10, 1], ONE_BYTES_ELEMENT),  # was a 500 (a 74.5 GiB allocation)
        ("BYTES", [2**62, 2**62], ONE_BYTES_ELEMENT),  # was a 500 (numpy's dimension limit)
        ("BYTES", [2, 1], ONE_BYTES_ELEMENT),
        ("FP64", [10**8, 1], b"\0" * 8),
        ("INT32", [2**62, 2**62], b"\0" * 8),
    ],
    ids=str,
)
def test_a_declared_shape_beyond_the_bytes_sent_is_refused_before_decoding(
    datatype: str, shape: list[int], data: bytes
) -> None:
    """A shape is a claim: the bytes sent bound what is decoded (and allocated)."""
    tensor = {"name": "x", "shape": shape, "datatype": datatype}
    document = {"inputs": [{**tensor, "parameters": {"binary_data_size": len(data)}}]}
    body, length = _binary(document, data)
    tracemalloc.start()
    try:
        with pytest.raises(TensorError) as caught:
            parse_request(body, length)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # bytes: nothing the size of the declared shape
    message = str(caught.value)
    assert message.startswith(f"input 'x': shape {shape} holds {math.prod(shape)} {datatype}")
    assert message.endswith(f"but binary_data_size is {len(data)}")


def test_more_rows_than_the_limit_are_refused_before_decoding() -> None:
    """JSON or binary, a tensor's first dimension counts its rows."""
    document = {"inputs": [{"name": "x", "shape": [3, 1], "datatype": "FP64", "data": [1, 2, 3]}]}
    assert parse_request(_json(document), None, max_rows=3).inputs[0].shape == (3, 1)
    with pytest.raises(TooLargeError, match=r"input 'x': shape \[3, 1\] holds 3 rows; at most 2"):
        parse_request(_json(document), None, max_rows=2)
    elements = ONE_BYTES_ELEMENT * 3
    tensor = {"name": "s", "shape": [3], "datatype": "BYTES"}
    body, length = _binary(
        {"inputs": [{**tensor, "parameters": {"binary_data_size": len(elements)}}]}, elements
    )
    with pytest.raises(TooLargeError, match=r"input 's': shape \[3\] holds 3 rows") as caught:
        parse_request(body, length, max_rows=2)
    assert [p.loc for p in caught.value.problems] == [("inputs", 0, "shape")]


@pytest.mark.parametrize("shape", [[-1, 1], [1.0], [True], ["2"], [None], 2, []], ids=str)
def test_negative_or_non_integer_shape_entries_are_refused(shape: object) -> None:
    for binary in (False, True):
        tensor: dict[str, Any] = {"name": "x", "shape": shape, "datatype": "BYTES"}
        if binary:
            tensor["parameters"] = {"binary_data_size": 5}
            body, length = _binary({"inputs": [tensor]}, ONE_BYTES_ELEMENT)
        else:
            body, length = _json({"inputs": [{**tensor, "data": ["a"]}]}), None
        with pytest.raises(TensorError, match="input 'x': shape must be a list of 1 to 8 non-neg"):
            parse_request(body, length)


def test_not_json_is_named() -> None:
    with pytest.raises(TensorError, match="not valid JSON"):
        parse_request(b"{", None)
    with pytest.raises(TensorError, match="JSON object"):
        parse_request(b"[1]", None)


def test_responses_json_and_binary() -> None:
    proba = np.array([[0.25, 0.75], [1.0, 0.0]])
    outputs = [
        OutputTensor("predictions", "BYTES", (2,), np.array(["a", "b"], dtype=object)),
        OutputTensor("probabilities", "FP64", (2, 2), proba, {"classes": '["a", "b"]'}),
        OutputTensor("votes", "INT64", (2, 2), np.array([[1.0, 3.0], [4.0, 0.0]])),
    ]
    head = {"model_name": "m", "model_version": "1"}
    body, length = encode_response(head, outputs, set())
    assert length is None
    document = orjson.loads(body)
    assert document["outputs"][0]["data"] == ["a", "b"]
    assert document["outputs"][1] == {
        "name": "probabilities",
        "datatype": "FP64",
        "shape": [2, 2],
        "data": [0.25, 0.75, 1.0, 0.0],
        "parameters": {"classes": '["a", "b"]'},
    }
    assert document["outputs"][2]["data"] == [1, 3, 4, 0]

    body, length = encode_response(head, outputs, {"predictions", "probabilities"})
    assert length is not None
    document = orjson.loads(body[:length])
    rest = body[length:]
    first, second = document["outputs"][0], document["outputs"][1]
    assert "data" not in first and first["parameters"]["binary_data_size"] == 10
    assert rest[:10] == struct.pack("<I", 1) + b"a" + struct.pack("<I", 1) + b"b"
    assert second["parameters"] == {"classes": '["a", "b"]', "binary_data_size": 32}
    np.testing.assert_array_equal(np.frombuffer(rest[10:], dtype="<f8").reshape(2, 2), proba)
    assert document["outputs"][2]["data"] == [1, 3, 4, 0]
