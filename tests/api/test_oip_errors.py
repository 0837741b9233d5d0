"""/v2 errors: a declared tensor shape is checked before anything is allocated for it, and
every error of a /v2 route, an unexpected one (a 500) included, is the protocol's
``{"error": ...}``.

A binary ``BYTES`` tensor declared ``[1e8, 1]`` in a 118-byte request made the server
allocate ~760 MB before its 400; ``[1e10, 1]`` and ``[2^62, 2^62]`` were 500s.  The
measured figures, before and after: ``benchmarks/tensor_shape_bench.py``.
"""

from __future__ import annotations

import json
import struct
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from fastapi import APIRouter, HTTPException

from app.main import create_app
from app.routes.oip import OipRoute
from tests.api.conftest import make_settings
from tests.api.support import Api

pytestmark = pytest.mark.asyncio(loop_scope="module")

HEADER = "Inference-Header-Content-Length"
MAX_ROWS = 1_000
ONE_ELEMENT = struct.pack("<I", 1) + b"a"


class UnforeseenError(Exception):
    """An error no handler of the service anticipates."""


def _failing_routes() -> APIRouter:
    """Routes of the /v2 router's class that fail the way a bug would."""
    router = APIRouter(route_class=OipRoute)

    @router.get("/v2/test/unforeseen")
    async def unforeseen() -> None:
        raise UnforeseenError("secret internals")

    @router.get("/v2/test/http-error")
    async def http_error() -> None:
        raise HTTPException(409, "taken", headers={"X-Why": "test"})

    return router


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    settings = make_settings(tmp_path_factory.mktemp("oip-errors"), max_predict_rows=MAX_ROWS)
    app = create_app(settings)
    app.include_router(_failing_routes())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield Api(client)


def binary_body(datatype: str, shape: list[int], data: bytes) -> tuple[bytes, dict[str, str]]:
    tensor = {"name": "colour", "datatype": datatype, "shape": shape}
    tensor["parameters"] = {"binary_data_size": len(data)}
    head = json.dumps({"inputs": [tensor]}).encode()
    return head + data, {HEADER: str(len(head))}


async def traced_post(api: Api, content: bytes, headers: dict[str, str]) -> tuple[Any, int]:
    """The response to an inference request, and the peak memory traced while it ran
    (numpy reports its arrays to tracemalloc; the request runs in this process)."""
    await api.client.get("/v2/health/live")  # the first request's imports are not counted
    tracemalloc.start()
    try:
        response = await api.client.post("/v2/models/m/infer", content=content, headers=headers)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return response, peak


def error_of(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    assert set(document) == {"error"}, document
    message: str = document["error"]
    return message


@pytest.mark.parametrize(
    ("datatype", "shape", "data"),
    [
        ("BYTES", [10**8, 1], ONE_ELEMENT),
        ("BYTES", [10**10, 1], ONE_ELEMENT),
        ("BYTES", [2**62, 2**62], ONE_ELEMENT),
        ("FP64", [10**8, 1], b"\0" * 8),
        ("UINT8", [2**62, 2**62], b"\0"),
    ],
    ids=str,
)
async def test_a_huge_declared_shape_is_a_quick_400_without_a_big_allocation(
    api: Api, datatype: str, shape: list[int], data: bytes
) -> None:
    """A memory bound, not a time bound: the answer is decided before anything the size
    of the declared shape exists (was: 763 MB traced for [1e8, 1], and 500s)."""
    response, peak = await traced_post(api, *binary_body(datatype, shape, data))
    message = error_of(response, 400)
    assert message.startswith(f"input 'colour': shape {shape} holds")
    assert message.endswith(f"but binary_data_size is {len(data)}")
    assert peak < 10 * 2**20, f"{peak / 2**20:.1f} MB traced for a {len(data)}-byte tensor"


async def test_json_tensor_data_shorter_than_its_shape_is_a_400(api: Api) -> None:
    body = {"inputs": [{"name": "colour", "datatype": "FP64", "shape": [10**8, 1], "data": [1]}]}
    response, peak = await traced_post(api, json.dumps(body).encode(), {})
    assert (
        error_of(response, 400) == "input 'colour': shape holds 100000000 elements but data has 1"
    )
    assert peak < 10 * 2**20


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
async def test_more_rows_than_the_limit_is_a_413_before_decoding(api: Api, binary: bool) -> None:
    """The model need not exist: the limit is checked before it is looked up."""
    n = MAX_ROWS + 1
    if binary:
        content, headers = binary_body("BYTES", [n, 1], ONE_ELEMENT * n)
    else:
        tensor = {"name": "colour", "datatype": "BYTES", "shape": [n, 1], "data": ["a"] * n}
        content, headers = json.dumps({"inputs": [tensor]}).encode(), {}
    response = await api.client.post("/v2/models/m/infer", content=content, headers=headers)
    message = error_of(response, 413)
    assert (
        message
        == f"input 'colour': shape [{n}, 1] holds {n} rows; at most {MAX_ROWS} rows per request"
    )


@pytest.mark.parametrize("shape", [[-1, 1], [2.0], [True], ["3"]], ids=str)
async def test_negative_or_non_integer_shape_entries_are_a_400(api: Api, shape: list[Any]) -> None:
    content, headers = binary_body("BYTES", shape, ONE_ELEMENT)
    response = await api.client.post("/v2/models/m/infer", content=content, headers=headers)
    assert error_of(response, 400).startswith("input 'colour': shape must be a list of 1 to 8")


async def test_an_unforeseen_error_on_a_v2_route_is_a_500_error_document(api: Api) -> None:
    """Was the service's RFC 9457 problem document, which the protocol's clients cannot
    read; the details stay in the log, the request id in the X-Request-ID header."""
    response = await api.client.get("/v2/test/unforeseen")
    assert error_of(response, 500) == "an unexpected error occurred; it has been logged"
    assert "secret" not in response.text and response.headers["x-request-id"]
    response = await api.client.get("/v2/test/http-error")
    assert error_of(response, 409) == "taken" and response.headers["x-why"] == "test"


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v2/no/such/route", 404),
        ("POST", "/v2/models/m/ready", 405),
        ("DELETE", "/v2/health/live", 405),
        ("GET", "/v2/models/m%2Fx/ready", 404),
    ],
)
async def test_errors_before_any_v2_route_runs_are_error_documents_too(
    api: Api, method: str, path: str, status: int
) -> None:
    """An unknown path, a method the path does not take and an encoded separator are refused
    before a route runs; under /v2 they too are ``{"error": ...}``, never a problem."""
    response = await api.client.request(method, path)
    assert path.split("%")[0].rstrip("/") in error_of(response, status) or status == 405


async def test_a_body_over_the_upload_limit_on_v2_is_an_error_document(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    settings = make_settings(tmp_path_factory.mktemp("oip-limit"), max_upload_bytes=1_000)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            body = b"{" + b" " * (1_000 + 1024 * 1024) + b"}"  # beyond the multipart slack
            response = await client.post("/v2/models/m/infer", content=body)
            assert "limit is" in error_of(response, 413)
            on_v1 = await client.post("/v1/models/m/versions/1/predict", content=body)
            assert on_v1.status_code == 413
            assert on_v1.headers["content-type"].startswith("application/problem+json")
