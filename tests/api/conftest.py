"""The app under test: create_app(test settings) served through httpx's ASGI transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from tests.api.support import Api


def make_settings(data_dir: Path, **overrides: Any) -> Settings:
    """Small, fast limits; the data folder is the test's own."""
    values: dict[str, Any] = {"data_dir": data_dir, "wait_timeout_s": 60.0, "cancel_grace_s": 1.0}
    return Settings(**{**values, **overrides})


async def started(settings: Settings) -> AsyncIterator[tuple[FastAPI, Api]]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app, Api(client)


@pytest.fixture
def settings_for(tmp_path: Path) -> Callable[..., Settings]:
    return lambda **overrides: make_settings(tmp_path / "data", **overrides)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, Api]]:
    async for pair in started(make_settings(tmp_path / "data")):
        yield pair


@pytest.fixture
def api(served: tuple[FastAPI, Api]) -> Api:
    return served[1]


@pytest.fixture
def app(served: tuple[FastAPI, Api]) -> FastAPI:
    return served[0]
