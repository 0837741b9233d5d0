"""The app under test: create_app(test settings) served through httpx's ASGI transport."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from tests.api.support import Api

T = TypeVar("T")


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


def train_once(folder: Path, build: Callable[[Api], Awaitable[T]]) -> T:
    """``build``'s result, run against an app on ``folder`` in an event loop of its own,
    the app stopped after: a data folder trained once for a module (in a module-scoped
    fixture), that each of its tests serves a copy of (:func:`serve_copy`)."""

    async def run() -> list[T]:
        built = []
        async for _, api in started(make_settings(folder)):  # one app, stopped after
            built.append(await build(api))
        return built

    (result,) = asyncio.run(run())
    return result


async def serve_copy(trained: Path, tmp_path: Path) -> AsyncIterator[tuple[FastAPI, Api]]:
    """An app on a copy of the data folder ``trained``: what a test would have if it had
    trained the same itself (the versions, their ids and artifacts), its aliases, counts
    and metrics its own. Training jobs (worker processes) were most of such a test's cost."""
    data = tmp_path / "data"
    shutil.copytree(trained, data)
    async for pair in started(make_settings(data)):
        yield pair


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
