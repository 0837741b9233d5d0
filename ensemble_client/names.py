"""Model names as the service accepts them (``/work/shared/API.md``: "Names and
references"), so the CLI refuses a name before sending anything.

A copy of ``ensembles.registry.names.MODEL_NAME_PATTERN``: the client installs and imports
without the service's packages; ``tests/client/test_parts.py`` checks the two agree.
"""

from __future__ import annotations

import re
from typing import Final

MODEL_NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
MODEL_NAME_RULE: Final = (
    "1 to 128 letters, digits, '_', '.' or '-', starting with a letter or digit"
)

_MODEL_NAME = re.compile(MODEL_NAME_PATTERN)


def is_model_name(name: str) -> bool:
    """Whether the service accepts ``name`` as a model name (``fullmatch``: ``$`` alone
    would let a trailing newline through)."""
    return _MODEL_NAME.fullmatch(name) is not None
