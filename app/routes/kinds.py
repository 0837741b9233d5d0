"""The catalog of kinds, and the documentation of problem types."""

from __future__ import annotations

from functools import cache
from typing import Any

from fastapi import APIRouter, Path

from app.bodies import OrjsonRoute
from app.deps import READ
from app.problems import PROBLEM_TYPES
from app.schemas.common import problem_responses
from app.schemas.service import Catalog, ProblemTypeDoc
from ensembles import NotFoundError, catalog_document

# Each route names its tag: a router tag would be added to the problem types' "service".
router = APIRouter(route_class=OrjsonRoute)


@cache
def _catalog() -> dict[str, Any]:
    return catalog_document()


@router.get(
    "/v1/kinds",
    tags=["kinds"],
    response_model=Catalog,
    summary="Ensemble and base-learner kinds",
    description="Every ensemble kind and base-learner kind a training spec may name: which "
    "tasks it does, its estimator slots, and per task a JSON Schema of its parameters with "
    "types, defaults and bounds.",
    dependencies=[READ],
    responses=problem_responses(),
)
async def list_kinds() -> dict[str, Any]:
    return _catalog()


@router.get(
    "/problems/{slug}",
    response_model=ProblemTypeDoc,
    summary="A problem type",
    description="What a problem `type` URI of this service means: its title and HTTP status.",
    tags=["service"],
    responses=problem_responses(404, 422, auth=False),
)
async def problem_type_doc(
    slug: str = Path(pattern=r"^[a-z-]{1,40}$", examples=["validation"]),
) -> dict[str, Any]:
    found = [(code, kind) for code, kind in PROBLEM_TYPES.items() if kind.slug == slug]
    if not found:
        raise NotFoundError(f"no problem type {slug!r}")
    return {
        "type": f"/problems/{slug}",
        "status": found[0][1].status,
        "codes": {code: {"title": k.title, "description": k.description} for code, k in found},
    }
