"""One router per resource; handlers parse, authorize, call a service, shape the answer."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from app.schemas.models import ALIAS, MODEL_NAME, VERSION_REF
from ensembles.registry import MAX_VERSION

ModelName = Annotated[
    str,
    Path(pattern=MODEL_NAME, description="Model name.", examples=["iris-clf"]),
]
VersionRef = Annotated[
    str,
    Path(
        pattern=VERSION_REF,
        description="A version number, `latest` (the highest version) or an alias.",
        examples=["3", "latest", "production"],
    ),
]
VersionNumber = Annotated[
    int,
    Path(alias="ref", ge=1, le=MAX_VERSION, description="A version number.", examples=[3]),
]
AliasName = Annotated[
    str,
    Path(pattern=ALIAS, description="Alias name (`latest` is reserved).", examples=["production"]),
]
