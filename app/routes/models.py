"""Models, versions, aliases and artifacts."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.bodies import OrjsonRoute
from app.deps import ADMIN, READ, CacheDep, RegistryDep
from app.problems import InvalidRequestError
from app.routes import AliasName, ModelName, VersionNumber, VersionRef
from app.schemas.common import problem_responses
from app.schemas.models import AliasIn, AliasOut, ModelOut, VersionOut
from app.services.views import version_out
from app.threads import in_thread
from ensembles import Problem
from ensembles.registry import LATEST

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
    summary="Set an alias",
    description="Point an alias of the model at one of its versions, creating or moving it "
    "atomically. Aliases are scoped to the model; `latest` is reserved.",
    dependencies=[ADMIN],
    responses=problem_responses(404, 422),
)
async def set_alias(
    name: ModelName, alias: AliasName, body: AliasIn, registry: RegistryDep
) -> AliasOut:
    _not_latest(alias)
    await in_thread(registry.set_alias, name, alias, body.version)
    return AliasOut(model=name, alias=alias, version=body.version)


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
