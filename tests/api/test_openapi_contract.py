"""The OpenAPI document agrees with the server: what schemathesis' checks found apart.

``Allow`` named only the first route of a path; security was declared on every operation
of a service without keys; ``instances`` had no ``maxItems`` although more rows are a 413.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import Api

# HEAD goes with GET (app.edge answers it as GET without the body).
PATHS = {
    "/v1/models/iris": "GET, HEAD, DELETE, OPTIONS",
    "/v1/models/iris/versions/3": "GET, HEAD, DELETE, OPTIONS",
    "/v1/models/iris/aliases/production": "GET, HEAD, PUT, DELETE, OPTIONS",
    "/v1/models/iris/versions": "GET, HEAD, POST, OPTIONS",
    "/v1/datasets": "GET, HEAD, POST, OPTIONS",
    "/healthz": "GET, HEAD, OPTIONS",
}


@pytest.mark.parametrize(("path", "allow"), PATHS.items(), ids=list(PATHS))
async def test_options_and_405_list_every_method_of_the_path(
    api: Api, path: str, allow: str
) -> None:
    options = await api.client.options(path)
    assert options.status_code == 204, options.text
    assert options.headers["allow"] == allow
    assert options.content == b""
    refused = await api.client.request("PATCH", path)
    assert refused.status_code == 405
    assert refused.headers["allow"] == allow
    assert refused.json()["code"] == "method_not_allowed"
    assert f"the path takes {allow}" in refused.json()["detail"]


async def test_options_of_an_unknown_path_is_a_404(api: Api) -> None:
    assert (await api.client.options("/v1/nothing")).status_code == 404


def _secured(document: dict[str, Any]) -> set[str]:
    return {
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if "security" in operation
    }


async def _document(settings: Settings) -> dict[str, Any]:
    async for _, api in started(settings):
        response = await api.client.get("/openapi.json", headers={"Authorization": "Bearer k"})
        assert response.status_code == 200
        document: dict[str, Any] = response.json()
        return document
    raise AssertionError("the app did not start")


async def test_an_open_service_declares_no_security(
    settings_for: Callable[..., Settings],
) -> None:
    document = await _document(settings_for())
    assert _secured(document) == set()
    assert "securitySchemes" not in document.get("components", {})
    responses = document["paths"]["/v1/models"]["get"]["responses"]
    assert "401" not in responses and "403" not in responses


async def test_with_keys_every_guarded_operation_declares_bearer_security(
    settings_for: Callable[..., Settings],
) -> None:
    document = await _document(settings_for(api_keys="k:admin"))
    secured = _secured(document)
    assert {"GET /v1/models", "POST /v1/datasets", "POST /v1/models/{name}/versions"} <= secured
    # Open by their settings or by design: no security, no 401 in their responses.
    assert not {"GET /metrics", "GET /healthz", "GET /readyz"} & secured
    assert "401" not in document["paths"]["/metrics"]["get"]["responses"]
    assert "401" in document["paths"]["/v1/models"]["get"]["responses"]
    schemes = document["components"]["securitySchemes"]
    assert [s["scheme"] for s in schemes.values()] == ["bearer"]
    closed = await _document(settings_for(api_keys="k:admin", open_metrics=False))
    assert "GET /metrics" in _secured(closed)
    assert all(
        "x-open-setting" not in op for item in closed["paths"].values() for op in item.values()
    )


async def test_instances_declare_the_row_limit_of_the_setting(
    settings_for: Callable[..., Settings],
) -> None:
    document = await _document(settings_for(max_predict_rows=7))
    instances = document["components"]["schemas"]["PredictRequest"]["properties"]["instances"]
    records, columnar = instances["anyOf"]
    assert records["maxItems"] == 7
    assert columnar["properties"]["data"]["maxItems"] == 7


async def test_every_operation_has_one_tag(api: Api) -> None:
    """Swagger UI lists an operation once per tag: the problem types were listed twice."""
    document = (await api.client.get("/openapi.json")).json()
    tags = {
        f"{method.upper()} {path}": operation["tags"]
        for path, item in document["paths"].items()
        for method, operation in item.items()
    }
    assert {op: t for op, t in tags.items() if len(t) != 1} == {}
    assert tags["GET /problems/{slug}"] == ["service"]
    assert tags["GET /v1/kinds"] == ["kinds"]
