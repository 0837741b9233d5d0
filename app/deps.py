"""FastAPI's side of the collaborators on ``app.state``, and the access checks.

Handlers take ``RegistryDep``, ``SettingsDep``, ... (the part of
:class:`app.services.container.Services` they use) so they read like prose and tests can
build an app around any settings. Only routes, the app factory and
:mod:`app.fast_predict` import this module.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Final

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param

from app.jobs.runner import JobRunner
from app.metrics import Metrics
from app.problems import ForbiddenError, UnauthenticatedError
from app.services.container import Services
from app.settings import ROLES, Role, Settings
from ensembles.registry import ModelCache, Registry

# The getters are coroutines although they never wait: FastAPI runs a plain ``def``
# dependency in a worker thread, a hand-off that cost a one-row prediction ~0.1 ms.


def services_of(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_services(request: Request) -> Services:
    return services_of(request)


async def get_settings(request: Request) -> Settings:
    return settings_of(request)


async def get_registry(request: Request) -> Registry:
    return services_of(request).registry


async def get_runner(request: Request) -> JobRunner:
    return services_of(request).runner


async def get_cache(request: Request) -> ModelCache:
    return services_of(request).cache


async def get_metrics(request: Request) -> Metrics:
    return services_of(request).metrics


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
RegistryDep = Annotated[Registry, Depends(get_registry)]
RunnerDep = Annotated[JobRunner, Depends(get_runner)]
CacheDep = Annotated[ModelCache, Depends(get_cache)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]

_bearer = HTTPBearer(auto_error=False, description="An API key (ENSEMBLE_API_KEYS).")
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def role_of(keys: Mapping[str, Role], presented: str) -> Role | None:
    """The role of the presented key, or None; compared in constant time.

    Every configured key is compared (no early exit, no dict lookup), each with
    :func:`hmac.compare_digest`, so the time taken does not tell how much of a key, or
    which key, a guess got right.
    """
    found: Role | None = None
    guess = presented.encode("utf-8", "surrogateescape")
    for key, role in keys.items():
        if hmac.compare_digest(key.encode("utf-8", "surrogateescape"), guess):
            found = role
    return found


def require(role: Role) -> Callable[..., Awaitable[None]]:
    """A dependency allowing keys of ``role`` or a higher one (read < train < admin)."""
    needed = ROLES.index(role)

    async def check(request: Request, credentials: BearerDep) -> None:
        settings = settings_of(request)
        if not settings.api_keys:
            return
        if credentials is None:
            raise UnauthenticatedError("this service needs an API key: Authorization: Bearer <key>")
        granted = role_of(settings.api_keys, credentials.credentials)
        if granted is None:
            raise UnauthenticatedError("unknown API key")
        if ROLES.index(granted) < needed:
            raise ForbiddenError(f"the key's role '{granted}' may not do this; it needs '{role}'")

    return check


def read_allowed(settings: Settings, authorization: str | None) -> bool:
    """Whether ``require("read")`` lets a request with this ``Authorization`` header
    through, read as ``HTTPBearer`` reads it (for :mod:`app.fast_predict`, which then
    answers; a refusal is left to the route, which says why)."""
    keys = settings.api_keys
    if not keys:
        return True
    scheme, credentials = get_authorization_scheme_param(authorization)
    if not (authorization and scheme and credentials) or scheme.lower() != "bearer":
        return False
    return role_of(keys, credentials) is not None  # every role may read


async def may(
    request: Request, credentials: HTTPAuthorizationCredentials | None, role: Role
) -> bool:
    """Whether the request may do what ``role`` may (an open service: always); for pages
    that show more to a caller who may see more, instead of refusing."""
    keys = settings_of(request).api_keys
    if not keys:
        return True
    granted = None if credentials is None else role_of(keys, credentials.credentials)
    return granted is not None and ROLES.index(granted) >= ROLES.index(role)


def require_unless(open_setting: str) -> Callable[..., Awaitable[None]]:
    """``read`` access unless the boolean setting ``open_setting`` is true."""
    read = require("read")

    async def check(request: Request, credentials: BearerDep) -> None:
        if getattr(settings_of(request), open_setting):
            return
        await read(request, credentials)

    return check


OPEN_SETTING: Final = "x-open-setting"
"""Marks, in an operation's OpenAPI entry, the setting that opens it (see ``open_unless``)."""


def open_unless(open_setting: str) -> dict[str, Any]:
    """Route arguments for an operation open unless ``open_setting`` is false: the guard,
    and a mark from which the document declares its security only when it is guarded."""
    return {
        "dependencies": [Depends(require_unless(open_setting))],
        "openapi_extra": {OPEN_SETTING: open_setting},
    }


READ = Depends(require("read"))
TRAIN = Depends(require("train"))
ADMIN = Depends(require("admin"))
