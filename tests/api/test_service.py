"""Health, readiness, metrics, the catalog, the OpenAPI document and generic errors."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import FastAPI

from tests.api.support import Api


async def test_healthz(api: Api) -> None:
    response = await api.client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_readyz_names_every_check(api: Api) -> None:
    response = await api.client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "checks": {"database": "ok", "artifact_store": "ok", "job_runner": "ok"},
    }


async def test_readyz_503_names_the_failing_check(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = app.state.services.registry
    failing = {"database": "ok", "artifact_store": "cannot write to /x: Read-only file system"}
    monkeypatch.setattr(registry, "check", lambda: dict(failing))
    response = await api.client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    body = response.json()
    assert body["checks"]["artifact_store"].startswith("cannot write")
    assert "artifact_store" in body["detail"] and "database" not in body["detail"]


async def test_metrics_is_prometheus_text(api: Api) -> None:
    await api.client.get("/healthz")
    response = await api.client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'ensemble_http_requests_total{method="GET",route="/healthz",status="200"} 1' in text
    assert "# TYPE ensemble_http_request_duration_seconds histogram" in text
    assert 'ensemble_training_jobs{status="running"} 0' in text
    assert "ensemble_model_cache_hits_total" in text  # more in test_observability.py


async def test_kinds_lists_every_kind_with_parameter_schemas(api: Api) -> None:
    response = await api.client.get("/v1/kinds")
    assert response.status_code == 200
    body = response.json()
    ensembles = {k["kind"] for k in body["ensemble_kinds"]}
    assert ensembles == {
        "voting", "bagging", "pasting", "random_subspace", "random_patches", "adaboost",
        "gradient_boosting", "hist_gradient_boosting", "random_forest", "extra_trees",
        "stacking", "pasting_votes", "ensemble_selection", "adaboost_mh", "xgboost", "lightgbm",
        "catboost",
    }  # fmt: skip
    bases = {k["kind"] for k in body["base_kinds"]}
    assert {"decision_tree", "logistic_regression", "linear_regression", "ridge", "knn",
            "svm", "gaussian_nb", "mlp"} <= bases  # fmt: skip
    forest = next(k for k in body["ensemble_kinds"] if k["kind"] == "random_forest")
    n_estimators = forest["params"]["classification"]["properties"]["n_estimators"]
    assert n_estimators["default"] == 100
    gnb = next(k for k in body["base_kinds"] if k["kind"] == "gaussian_nb")
    assert gnb["tasks"] == ["classification"]


async def test_docs_render(api: Api) -> None:
    response = await api.client.get("/docs")
    assert response.status_code == 200
    assert "swagger-ui" in response.text


async def test_every_operation_is_documented(api: Api) -> None:
    response = await api.client.get("/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            where = f"{method.upper()} {path}"
            assert operation.get("summary"), where
            assert operation.get("description"), where
            errors = [s for s in operation["responses"] if s.startswith(("4", "5"))]
            assert "500" in errors, where
            # The Open Inference Protocol's errors are its own {"error": ...}, as JSON.
            media = "application/json" if path.startswith("/v2") else "application/problem+json"
            for status in errors:
                content = operation["responses"][status]["content"]
                assert media in content, where
            assert _has_example(document, operation), where


def _has_example(document: dict[str, Any], operation: dict[str, Any]) -> bool:
    """A request example (body or parameter) and a response example (inline or schema)."""
    schemas = document["components"]["schemas"]

    def schema_example(media: dict[str, Any]) -> bool:
        if media.get("schema", {}).get("format") == "binary":
            return True  # a downloaded file
        if "example" in media or "examples" in media:
            return True
        ref = media.get("schema", {}).get("$ref") or media.get("schema", {}).get("items", {}).get(
            "$ref"
        )
        return bool(ref) and "examples" in schemas[ref.rsplit("/", 1)[-1]]

    body = operation.get("requestBody")
    params = operation.get("parameters", [])
    request_ok = (
        body is not None and all(schema_example(m) for m in body["content"].values())
    ) or (body is None and all("examples" in p["schema"] or p["in"] == "query" for p in params))
    ok = [s for s in operation["responses"] if s.startswith("2")]
    response_ok = all(
        schema_example(m) for s in ok for m in operation["responses"][s].get("content", {}).values()
    )
    return request_ok and response_ok


async def test_problem_types_are_documented(api: Api) -> None:
    response = await api.client.get("/problems/validation")
    assert response.status_code == 200
    assert response.json()["status"] == 422
    missing = await api.client.get("/problems/no-such-type")
    assert missing.status_code == 404


async def test_unknown_route_is_a_problem(api: Api) -> None:
    response = await api.client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "not_found"


async def test_wrong_method_is_a_problem(api: Api) -> None:
    response = await api.client.patch("/v1/datasets")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


async def test_unexpected_error_is_a_500_without_trace(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom() -> None:
        raise RuntimeError("secret internals at /srv/app.py line 3")

    monkeypatch.setattr(app.state.services.registry, "list_models", boom)
    response = await api.client.get("/v1/models")
    assert response.status_code == 500
    body = response.json()
    assert body["code"] == "internal"
    assert "secret" not in response.text and "Traceback" not in response.text


async def test_storage_error_is_503(
    app: FastAPI, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ensembles import StorageError

    def down() -> None:
        raise StorageError("registry database error: disk I/O error")

    monkeypatch.setattr(app.state.services.registry, "list_datasets", down)
    response = await api.client.get("/v1/datasets")
    assert response.status_code == 503
    assert response.json()["code"] == "storage"
