"""Pages for people and plots for dashboards: ``/``, a model's and a version's report,
and each plot of a version as SVG or PNG.

Pages are rendered on the server (:mod:`app.pages`) in a worker thread: drawing the plots,
and reading a version of many classes, is CPU work. At most ``MAX_PAGES`` report pages
and ``MAX_PLOTS`` plots are worked on at once, each kind waiting for its own turn, so a
burst of reports of a large model leaves the cores to the rest of the service and never
queues a small plot behind them. Reports and plots need the ``read`` role; the landing
page follows the docs' setting and lists models only to a caller who may read them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, Response

from app.bodies import OrjsonRoute
from app.deps import READ, BearerDep, RegistryDep, may, open_unless
from app.pages import landing, model_page, version_page
from app.pages.accept import choose
from app.pages.templating import CONTENT_SECURITY_POLICY
from app.problems import NotAcceptableError
from app.routes import ModelName, VersionRef
from app.schemas.common import problem_responses
from app.threads import in_thread
from ensembles.plots import PLOTS
from ensembles.plots.render import MEDIA_TYPES, Format, render
from ensembles.registry import Registry

router = APIRouter(tags=["reports"], route_class=OrjsonRoute)
P = ParamSpec("P")
T = TypeVar("T")
MAX_PAGES = 2  # report pages built at once (the machine's cores, not the requests')
MAX_PLOTS = 4  # plot requests worked on at once (most are answered from the plot cache)
_PAGES = threading.BoundedSemaphore(MAX_PAGES)
_PLOTS = threading.BoundedSemaphore(MAX_PLOTS)


def _in_turn(turns: threading.BoundedSemaphore, work: Callable[P, T]) -> Callable[P, T]:
    """``work`` run once one of ``turns`` is free (called in a worker thread)."""

    def bounded(*args: P.args, **kwargs: P.kwargs) -> T:
        with turns:
            return work(*args, **kwargs)

    return bounded


PlotName = Annotated[
    str,
    Path(
        max_length=64,
        description="A plot name: " + ", ".join(f"`{name}`" for name in PLOTS) + ". The "
        "version resource lists the plots the version has in `plots`.",
        examples=["oob_curve"],
    ),
]
_FORMATS: dict[str, Format] = {media: fmt for fmt, media in MEDIA_TYPES.items()}
FormatParam = Annotated[
    Literal["svg", "png"] | None,
    Query(
        alias="format",
        description="`svg` or `png`: the format whatever `Accept` says (for an `<img>` or a "
        "link, which cannot set `Accept`). Without it, `Accept` chooses.",
        examples=["png"],
    ),
]
_HTML_EXAMPLE = "<!doctype html><html lang=en>…</html>"
_SVG_EXAMPLE = '<svg xmlns="http://www.w3.org/2000/svg" role="img"><title>…</title>…</svg>'


def _html(content: str) -> HTMLResponse:
    """A page with the policy that keeps the browser from loading anything."""
    return HTMLResponse(
        content,
        headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY, "Cache-Control": "no-cache"},
    )


def _html_response(description: str) -> dict[int | str, dict[str, Any]]:
    return {
        200: {
            "description": description,
            "content": {"text/html": {"schema": {"type": "string"}, "example": _HTML_EXAMPLE}},
        }
    }


@router.get(
    "/",
    response_class=HTMLResponse,
    summary="Landing page",
    description="An HTML page linking the interactive docs, the OpenAPI document and every "
    "model with its reports. Open unless `ENSEMBLE_OPEN_DOCS=false`; models are listed to a "
    "caller with the `read` role (anyone on an open service).",
    responses={**_html_response("The landing page."), **problem_responses()},
    **open_unless("open_docs"),
)
async def landing_page(
    request: Request, registry: RegistryDep, credentials: BearerDep
) -> HTMLResponse:
    may_read = await may(request, credentials, "read")
    return _html(await in_thread(landing.landing, registry, request.app.title, may_read))


@router.get(
    "/v1/models/{name}/report",
    response_class=HTMLResponse,
    summary="Compare a model's versions",
    description="An HTML page with the model's versions side by side: each metric per "
    "version (train, hold-out, cross-validation, out-of-bag; the best marked), where each "
    "alias points, and the primary metric by version as a plot. Self-contained: no "
    "request to any host.",
    dependencies=[READ],
    responses={**_html_response("The comparison page."), **problem_responses(404, 422)},
)
async def model_report(name: ModelName, registry: RegistryDep) -> HTMLResponse:
    return _html(await in_thread(_in_turn(_PAGES, model_page.model_report), registry, name))


@router.get(
    "/v1/models/{name}/versions/{ref}/report",
    response_class=HTMLResponse,
    summary="Report of a version",
    description="An HTML page: the version's spec and lineage (dataset, job, aliases), its "
    "metric table (train, hold-out, cross-validation, out-of-bag) and its plots as inline "
    "SVG; a plot the version lacks is named with the reason. Self-contained (no script, "
    "font or style from anywhere): it reads the same saved to disk, and prints.",
    dependencies=[READ],
    responses={**_html_response("The report."), **problem_responses(404, 422)},
)
async def version_report(name: ModelName, ref: VersionRef, registry: RegistryDep) -> HTMLResponse:
    report = _in_turn(_PAGES, version_page.version_report)
    return _html(await in_thread(report, registry, name, ref))


@router.get(
    "/v1/models/{name}/versions/{ref}/plots/{plot}",
    response_class=Response,
    summary="One plot of a version",
    description="The plot as `image/svg+xml` (the default) or `image/png` (with "
    "`?format=png` or `Accept: image/png`); without `format`, any other `Accept` is a 406, "
    "and any other `format` is a 422. Drawn from the version's stored metrics only, once: "
    "a version's plots never change, so they are kept. An unknown plot, or one the "
    "version does not have, is a 404 listing the plots it has (also in the version's "
    "`plots`).",
    dependencies=[READ],
    responses={
        200: {
            "description": "The plot.",
            "content": {
                "image/svg+xml": {"schema": {"type": "string"}, "example": _SVG_EXAMPLE},
                "image/png": {"schema": {"type": "string", "format": "binary"}},
            },
        },
        **problem_responses(404, 406, 422),
    },
)
async def plot(
    name: ModelName,
    ref: VersionRef,
    plot: PlotName,
    request: Request,
    registry: RegistryDep,
    asked: FormatParam = None,
) -> Response:
    accept = request.headers.get("accept")
    chosen = MEDIA_TYPES[asked] if asked else choose(accept, list(_FORMATS))
    if chosen is None:
        raise NotAcceptableError(
            f"this plot is served as {' or '.join(_FORMATS)}; Accept asked for {accept!r}"
        )
    image = await in_thread(_in_turn(_PLOTS, _plot), registry, name, ref, plot, _FORMATS[chosen])
    return Response(
        image, media_type=chosen, headers={"Vary": "Accept", "Cache-Control": "no-cache"}
    )


def _plot(registry: Registry, name: str, ref: str, plot: str, fmt: Format) -> bytes:
    return render(plot, version_page.view_of(registry, name, ref), fmt)
