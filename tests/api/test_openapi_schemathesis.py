"""Property-based run over /openapi.json (in process): no 5xx, responses match the schema.

Each operation of the document gets a bounded, seeded Hypothesis run of schemathesis
cases. (schemathesis' lazy ``from_fixture`` loader does not run on pytest 9, so the
operations are parametrized here and their strategies drawn from a module fixture.)
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, seed, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi
from schemathesis.specs.openapi.checks import response_schema_conformance

from app.main import create_app
from tests.api.conftest import make_settings

SEED = 20261121
MAX_EXAMPLES = 5
CONFIG: dict[str, Any] = {"seed": SEED, "generation": {"mode": "positive", "database": "none"}}


def _operations() -> list[tuple[str, str]]:
    """(METHOD, path) of every documented operation; building the document starts nothing."""
    document = create_app(make_settings(Path(tempfile.gettempdir()) / "unused")).openapi()
    return [(m.upper(), p) for p, item in document["paths"].items() for m in item]


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    app = create_app(make_settings(tmp_path_factory.mktemp("schemathesis")))
    config = SchemathesisConfig.from_dict(CONFIG)
    yield schemathesis.openapi.from_asgi("/openapi.json", app, config=config)
    asgi.shutdown_lifespans()  # the app's shutdown: workers stopped, registry closed


@pytest.mark.parametrize(("method", "path"), _operations(), ids=str)
def test_operation_conforms_to_the_document(api_schema: Any, method: str, path: str) -> None:
    operation = api_schema[path][method]

    @seed(SEED)
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy())
    def run(case: Any) -> None:
        case.call_and_validate(checks=[not_a_server_error, response_schema_conformance])

    run()
