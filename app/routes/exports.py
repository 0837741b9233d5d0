"""A version in a portable format: joblib (the artifact), skops or ONNX."""

from __future__ import annotations

from typing import Annotated, Final

from fastapi import APIRouter, Path, Request, Response

from app.bodies import OrjsonRoute
from app.deps import READ, RegistryDep, services_of
from app.routes import ModelName, VersionRef
from app.schemas.common import problem_responses
from app.services.exports import Exports
from app.threads import in_thread
from ensembles.export import FIDELITY, SUFFIXES, UNTRUSTED_TYPES, ExportFormat

router = APIRouter(prefix="/v1/models", tags=["models"], route_class=OrjsonRoute)

HEADERS: Final = {UNTRUSTED_TYPES: "X-Skops-Untrusted-Types", FIDELITY: "X-Export-Fidelity"}
Format = Annotated[
    ExportFormat,
    Path(description="`joblib`, `skops` or `onnx`.", examples=["onnx"]),
]


def exports_of(request: Request) -> Exports:
    """The app's exports, made on first use (one event loop: no race)."""
    state = request.app.state
    exports: Exports | None = getattr(state, "exports", None)
    registry = services_of(request).registry
    if exports is None or exports.registry is not registry:
        exports = state.exports = Exports(registry)
    return exports


def _header(description: str) -> dict[str, object]:
    return {"description": description, "schema": {"type": "string"}}


@router.get(
    "/{name}/versions/{ref}/export/{format}",
    response_class=Response,
    summary="Export a version",
    description="The version in a portable format. `joblib`: the artifact itself. `skops`: "
    "the pipeline saved with `skops.io`; `X-Skops-Untrusted-Types` lists the types "
    "`skops.io.load` must be told to trust (comma-separated, empty where none). `onnx`: the "
    "pipeline converted with skl2onnx, one graph input per feature column; "
    "`X-Export-Fidelity` gives the largest absolute difference of probabilities (regression: "
    "predictions) between onnxruntime and the stored model on the version's hold-out rows "
    "and the share of identical labels. Computed once per version and format, then kept "
    "beside the artifact; `X-Artifact-SHA256` is the sha256 of the bytes sent. A part that "
    "cannot be converted, or a difference above 1e-4, is a 409 naming the part; a format "
    "whose optional libraries are not installed is a 501.",
    dependencies=[READ],
    responses={
        200: {
            "description": "The exported file.",
            "content": {
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
            },
            "headers": {
                "X-Artifact-SHA256": _header("sha256 (hex) of the file."),
                "X-Skops-Untrusted-Types": _header("skops: the types to trust on load."),
                "X-Export-Fidelity": _header(
                    "onnx: e.g. `max_abs_diff=3.1e-07; label_agreement=1; rows=30; "
                    "rows_from=holdout`"
                ),
            },
        },
        **problem_responses(404, 409, 422, 501),
    },
)
async def export_version(
    name: ModelName, ref: VersionRef, format: Format, request: Request, registry: RegistryDep
) -> Response:
    record = await in_thread(registry.get_version, name, ref)
    served = await exports_of(request).get(record, format)
    filename = f"{record.model}-{record.version}.{SUFFIXES[format]}"
    headers = {
        "X-Artifact-SHA256": served.sha256,
        "Content-Disposition": f'attachment; filename="{filename}"',
        **{HEADERS[key]: value for key, value in served.info.items() if key in HEADERS},
    }
    return Response(served.data, media_type="application/octet-stream", headers=headers)
