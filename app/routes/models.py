"""Models, versions, aliases and artifacts."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from app.bodies import OrjsonRoute
from app.deps import ADMIN, READ, CacheDep, RegistryDep, ServicesDep
from app.problems import InvalidRequestError
from app.routes import AliasName, ModelName, VersionNumber, VersionRef
from app.schemas.common import problem_responses
from app.schemas.models import AliasIn, AliasOut, ModelOut, ShadowStatsOut, VersionOut
from app.services.views import version_out
from app.threads import in_thread
from ensembles import Problem
from ensembles.registry import LATEST, MAX_VERSION
from ensembles.routing import RouteError, check_weights

router = APIRouter(prefix="/v1/models", tags=["models"], route_class=OrjsonRoute)


@router.get(
    "",
    response_model=list[ModelOut],
    summary="List models",
    description="Every model with at least one version, by name, with its latest version "
    "and its aliases.",
    dependencies=[READ],
    responses=problem_responses(),
)
async def list_models(registry: RegistryDep) -> list[ModelOut]:
    return [ModelOut.of(m) for m in await in_thread(registry.list_models)]


@router.get(
    "/{name}",
    response_model=ModelOut,
    summary="Get a model",
    description="A model's latest version and aliases.",
    dependencies=[READ],
    responses=problem_responses(404, 422),
)
async def get_model(name: ModelName, registry: RegistryDep) -> ModelOut:
    return ModelOut.of(await in_thread(registry.get_model, name))


@router.delete(
    "/{name}",
    status_code=204,
    summary="Delete a model",
    description="Delete every version, alias and artifact of a model; its queued jobs are "
    "cancelled and running ones stopped. Version numbers are never reused: training the "
    "name again continues after the highest number it ever had.",
    dependencies=[ADMIN],
    responses=problem_responses(404, 422),
)
async def delete_model(name: ModelName, registry: RegistryDep, cache: CacheDep) -> Response:
    await in_thread(registry.delete_model, name)
    cache.invalidate_model(name)
    return Response(status_code=204)


@router.get(
    "/{name}/versions",
    response_model=list[VersionOut],
    summary="List versions",
    description="Every version of a model, newest first.",
    dependencies=[READ],
    responses=problem_responses(404, 422),
)
async def list_versions(name: ModelName, registry: RegistryDep) -> list[VersionOut]:
    return [version_out(v) for v in await in_thread(registry.list_versions, name)]


@router.get(
    "/{name}/versions/{ref}",
    response_model=VersionOut,
    summary="Get a version",
    description="A version by number, `latest` or alias: its spec with every default, the "
    "dataset (id, sha256, rows), features, classes, metrics (OOB, hold-out, CV, training, "
    "per-member scores), feature importances, training facts and artifact.",
    dependencies=[READ],
    responses=problem_responses(404, 422),
)
async def get_version(name: ModelName, ref: VersionRef, registry: RegistryDep) -> VersionOut:
    return version_out(await in_thread(registry.get_version, name, ref))


@router.delete(
    "/{name}/versions/{ref}",
    status_code=204,
    summary="Delete a version",
    description="Delete one version (by number) and its artifact. A version an alias points "
    "at cannot be deleted (409): move or delete the alias first. Its number is never reused.",
    dependencies=[ADMIN],
    responses=problem_responses(404, 409, 422),
)
async def delete_version(
    name: ModelName, version: VersionNumber, registry: RegistryDep, cache: CacheDep
) -> Response:
    await in_thread(registry.delete_version, name, version)
    cache.invalidate_model(name, version)
    return Response(status_code=204)


@router.get(
    "/{name}/versions/{ref}/artifact",
    response_class=Response,
    summary="Download a version's artifact",
    description="The joblib file of the version: a plain scikit-learn `Pipeline` that loads "
    "with joblib and scikit-learn alone. Its sha256 (hex) is in `X-Artifact-SHA256`; the "
    "bytes are verified against it before they are sent.",
    dependencies=[READ],
    responses={
        200: {
            "description": "The joblib file.",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
            "headers": {
                "X-Artifact-SHA256": {
                    "description": "sha256 (hex) of the file.",
                    "schema": {"type": "string"},
                }
            },
        },
        **problem_responses(404, 422),
    },
)
async def download_artifact(name: ModelName, ref: VersionRef, registry: RegistryDep) -> Response:
    record = await in_thread(registry.get_version, name, ref)
    data = await in_thread(registry.read_artifact, record.model, record.version)
    filename = f"{record.model}-{record.version}.joblib"
    return Response(
        data,
        media_type="application/octet-stream",
        headers={
            "X-Artifact-SHA256": record.artifact_sha256,
            "Content-Disposition": f'attachment; filename="{filename}"',
        },
    )


def _not_latest(alias: str) -> None:
    if alias == LATEST:
        raise InvalidRequestError(
            "'latest' is reserved",
            [Problem(("path", "alias"), "'latest' always means the highest version")],
        )


@router.put(
    "/{name}/aliases/{alias}",
    response_model=AliasOut,
    response_model_exclude_none=True,
    summary="Set an alias",
    description='Point an alias of the model at one of its versions (`{"version": 3}`), or '
    'split its predictions between versions by weight (`{"versions": {"3": 0.9, '
    '"4": 0.1}}`: weights > 0 summing to 1, at most 10 versions), creating or moving it '
    "atomically; a request with the header `X-Routing-Key` is always answered by the same "
    "version for the same key. `shadow` names a version that also gets every prediction's "
    "rows after the answer is sent (never answering; compare at `GET .../shadow`); a body "
    "without it removes the shadow. Aliases are scoped to the model; `latest` is reserved. "
    "An unknown weighted or shadow version is a 422 naming it; an unknown `version` a 404.",
    dependencies=[ADMIN],
    responses=problem_responses(404, 422),
)
async def set_alias(
    name: ModelName, alias: AliasName, body: AliasIn, registry: RegistryDep
) -> AliasOut:
    _not_latest(alias)
    weights = _weights(body)
    try:
        await in_thread(
            registry.set_alias, name, alias, body.version, weights=weights, shadow=body.shadow
        )
    except RouteError as exc:  # versions that do not exist
        raise _in_body(exc) from None
    return AliasOut.of(await in_thread(registry.get_alias, name, alias))


def _in_body(exc: RouteError) -> InvalidRequestError:
    """Located as the schema's own problems are: from the body's root."""
    return InvalidRequestError(exc.detail, exc.problems)


def _weights(body: AliasIn) -> dict[int, float] | None:
    """The checked weights of a weighted body (None for one version); a 422 otherwise."""
    if (body.version is None) == (body.versions is None):
        raise InvalidRequestError(
            "give either version or versions",
            [Problem(("version",), "give either version or versions, not both")],
        )
    if body.versions is None:
        return None
    try:
        return check_weights(body.versions, MAX_VERSION)
    except RouteError as exc:
        raise _in_body(exc) from None


@router.get(
    "/{name}/aliases/{alias}",
    response_model=AliasOut,
    response_model_exclude_none=True,
    summary="Get an alias",
    description="The version an alias names, and, where it has them, its weights "
    "(`versions`) and its `shadow`.",
    dependencies=[READ],
    responses=problem_responses(404, 422),
)
async def get_alias(name: ModelName, alias: AliasName, registry: RegistryDep) -> AliasOut:
    return AliasOut.of(await in_thread(registry.get_alias, name, alias))


@router.get(
    "/{name}/aliases/{alias}/shadow",
    response_model=ShadowStatsOut,
    response_model_exclude_none=True,
    summary="Compare an alias's shadow",
    description="Since the shadow was set, summed over every server process and replica: "
    "the requests and rows the shadow got, how its answers compare with the alias's "
    "(`label_agreement` for classification, `mean_abs_difference` for regression), the "
    "requests it failed (`errors`) and those dropped because its queue was full. Counts "
    "of other processes reach the database within a fraction of a second. 404 when the "
    "alias has no shadow.",
    dependencies=[READ],
    responses=problem_responses(404, 422),
)
async def shadow_stats(name: ModelName, alias: AliasName, services: ServicesDep) -> Response:
    await in_thread(services.shadows.flush)
    stats = await in_thread(services.registry.shadow_stats, name, alias)
    record = await in_thread(services.registry.get_version, name, alias)
    document = ShadowStatsOut.of(stats, str(record.metadata.get("task")))
    return Response(orjson.dumps(document), media_type="application/json")


@router.delete(
    "/{name}/aliases/{alias}",
    status_code=204,
    summary="Delete an alias",
    description="Remove an alias; the version it pointed at stays.",
    dependencies=[ADMIN],
    responses=problem_responses(404, 422),
)
async def delete_alias(name: ModelName, alias: AliasName, registry: RegistryDep) -> Response:
    _not_latest(alias)
    await in_thread(registry.delete_alias, name, alias)
    return Response(status_code=204)
