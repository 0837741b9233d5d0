"""The interactive docs, /docs (Swagger UI) and /redoc (ReDoc), served without internet.

FastAPI's pages load Swagger UI, ReDoc, a favicon and Google Fonts from public hosts; in
a private network those pages stay blank. Here the same pages (FastAPI's own
``get_swagger_ui_html`` and ``get_redoc_html``) point at copies served by this service,
taken from the ``fastapi-offline`` package: its wheel ships Swagger UI's bundle and
stylesheet, ReDoc's standalone bundle and the favicon, and follows their releases, so
the files arrive with ``pip install`` (and in the Docker image) and none sit in this
repository.

The pages follow the docs' guard (``ENSEMBLE_OPEN_DOCS``); the assets are always open.
They are the public files of a public package and tell nothing about this service, and
a browser sends no ``Authorization`` header for ``<script src>`` or ``<link href>``: a
guarded page whose assets needed a key would not render.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache
from importlib.metadata import version
from importlib.resources import files

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.params import Depends
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

ASSETS_URL = "/docs/assets"
_PACKAGE = "fastapi_offline"
# In each asset URL: a new package release is a new URL, so a week of caching is safe.
_RELEASE = version(_PACKAGE)
_CACHE_CONTROL = "public, max-age=604800"
# The pages may load nothing from another host, whatever the bundles ask for. The policy
# is about hosts, so what the bundles do on the page stays allowed: Swagger UI is started
# by an inline script, both inject styles, ReDoc's JSON Schema validator (Ajv) compiles
# with ``new Function`` and its search runs in a worker made from a blob.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
    "worker-src 'self' blob:"
)


# ReDoc's sidebar shows Redocly's logo from its CDN: the policy would block it, and the
# browser would log the blocked load as an error on every visit. The bundle is served
# with that address replaced by an empty image (a data URL, which the policy allows).
_REDOC = "redoc.standalone.js"
_REDOC_LOGO = b'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"'
_EMPTY_IMAGE = b"src:\"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E\""


@cache
def _redoc_bundle() -> bytes:
    """ReDoc's bundle without its one reference to another host (checked by the tests)."""
    return (files(_PACKAGE) / "static" / _REDOC).read_bytes().replace(_REDOC_LOGO, _EMPTY_IMAGE)


class DocsAssets(StaticFiles):
    """The package's static folder, with a ``Cache-Control`` on every file: the pages are
    reopened often and the two bundles weigh 2.6 MB (ETag and Last-Modified still let a
    browser revalidate cheaply after the week)."""

    def __init__(self) -> None:
        super().__init__(directory=str(files(_PACKAGE) / "static"), check_dir=True)

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = _CACHE_CONTROL
        return response


def asset_url(name: str) -> str:
    """Where the page finds the asset ``name`` (a file of the package's static folder)."""
    return f"{ASSETS_URL}/{name}?v={_RELEASE}"


def add_doc_pages(
    application: FastAPI, openapi_url: str, title: str, guard: Sequence[Depends]
) -> None:
    """/docs and /redoc behind ``guard``, and their assets, open, under ``ASSETS_URL``:
    any file of the package's static folder by its name (StaticFiles refuses other paths
    and answers conditional requests with 304)."""
    favicon = asset_url("favicon.png")

    @application.get("/docs", include_in_schema=False, dependencies=guard)
    async def swagger_ui() -> HTMLResponse:
        return _self_contained(
            get_swagger_ui_html(
                openapi_url=openapi_url,
                title=f"{title} - Swagger UI",
                swagger_js_url=asset_url("swagger-ui-bundle.js"),
                swagger_css_url=asset_url("swagger-ui.css"),
                swagger_favicon_url=favicon,
                # No badge asking validator.swagger.io about the document (BaseLayout shows
                # none today; this keeps it so if FastAPI's defaults change).
                swagger_ui_parameters={"validatorUrl": None},
            )
        )

    @application.get("/redoc", include_in_schema=False, dependencies=guard)
    async def redoc() -> HTMLResponse:
        return _self_contained(
            get_redoc_html(
                openapi_url=openapi_url,
                title=f"{title} - ReDoc",
                redoc_js_url=asset_url("redoc.standalone.js"),
                redoc_favicon_url=favicon,
                with_google_fonts=False,
            )
        )

    assets = DocsAssets()

    # A route rather than a mount: the metrics and the access log name it by its template,
    # like every other route (this FastAPI's router gives a mount no route to name).
    @application.get(f"{ASSETS_URL}/{{name}}", include_in_schema=False)
    async def docs_asset(name: str, request: Request) -> Response:
        if name == _REDOC:
            return Response(
                _redoc_bundle(),
                media_type="text/javascript",
                headers={"Cache-Control": _CACHE_CONTROL},
            )
        return await assets.get_response(name, request.scope)


def _self_contained(page: HTMLResponse) -> HTMLResponse:
    """``page`` with the policy that keeps the browser on this service."""
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return page
