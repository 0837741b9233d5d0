"""``client.models.export``: a version in a portable format, checked and described.

The bytes are checked against the sha256 the service sends (``X-Artifact-SHA256``)
before anything is returned or written; a file is written atomically (a temporary name
in the same folder, fsync, rename), so it is whole or absent, never a prefix and never
bytes that failed the check.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ensemble_client.calls import Call, Operation, segment
from ensemble_client.errors import ArtifactIntegrityError

ExportFormat = Literal["joblib", "skops", "onnx"]
FORMATS: tuple[ExportFormat, ...] = ("joblib", "skops", "onnx")


@dataclass(frozen=True)
class Fidelity:
    """How the ONNX graph answered next to the stored model (``X-Export-Fidelity``)."""

    max_abs_diff: float | None  # None: a hard-voting classifier, labels only
    label_agreement: float | None  # None: regression
    rows: int
    rows_from: str  # "holdout", or "dataset" for a version trained without one

    @classmethod
    def parse(cls, header: str) -> Fidelity:
        fields = dict(part.strip().split("=", 1) for part in header.split(";") if "=" in part)

        def number(key: str) -> float | None:
            value = fields.get(key)
            return None if value in (None, "none") else float(value)

        return cls(
            number("max_abs_diff"),
            number("label_agreement"),
            int(fields.get("rows", "0")),
            fields.get("rows_from", "holdout"),
        )


@dataclass(frozen=True)
class ExportInfo:
    """What came with an export: its format, its checked sha256, and per format
    ``untrusted_types`` (skops: pass them to ``skops.io.load(..., trusted=...)``) or
    ``fidelity`` (onnx)."""

    format: ExportFormat
    sha256: str
    untrusted_types: tuple[str, ...] | None = None
    fidelity: Fidelity | None = None


def export(
    name: str, ref: str | int, fmt: ExportFormat, to: str | os.PathLike[str] | None
) -> Operation[tuple[bytes, ExportInfo]]:
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {fmt!r}")
    path = f"/v1/models/{segment(name)}/versions/{segment(ref)}/export/{fmt}"
    response = yield Call("GET", path, idempotent=True)
    data: bytes = response.content
    announced = response.headers.get("x-artifact-sha256")
    if not announced:
        raise ArtifactIntegrityError(f"the service sent no X-Artifact-SHA256 with the {fmt} file")
    actual = hashlib.sha256(data).hexdigest()
    if actual != announced.lower():
        raise ArtifactIntegrityError(
            f"{fmt} export of {name}@{ref}: sha256 {actual} differs from the announced "
            f"{announced}; nothing was written"
        )
    untrusted = response.headers.get("x-skops-untrusted-types")
    fidelity = response.headers.get("x-export-fidelity")
    info = ExportInfo(
        fmt,
        actual,
        None if untrusted is None else tuple(t for t in untrusted.split(",") if t),
        None if fidelity is None else Fidelity.parse(fidelity),
    )
    if to is not None:
        write_atomically(Path(to), data)
    return data, info


def write_atomically(target: Path, data: bytes) -> None:
    """``target`` holds ``data`` whole, or is left as it was."""
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.partial")
    try:
        with open(temporary, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
