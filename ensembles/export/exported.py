"""What an export produces: bytes, and the facts a consumer needs with them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

UNTRUSTED_TYPES: Final = "untrusted_types"
"""``info`` key: comma-separated types ``skops.io.load`` must be told to trust."""
FIDELITY: Final = "fidelity"
"""``info`` key: how closely the ONNX graph reproduces the stored model, measured."""


@dataclass(frozen=True)
class Exported:
    data: bytes
    info: dict[str, str] = field(default_factory=dict)
