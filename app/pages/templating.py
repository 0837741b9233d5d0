"""The Jinja environment of the pages: templates from this package, HTML escaped, and
the filters that format figures the same way on every page."""

from __future__ import annotations

import math
from datetime import datetime
from functools import cache
from typing import Any

from jinja2 import ChainableUndefined, Environment, PackageLoader, select_autoescape

import app as app_package

# What the pages may load: nothing from anywhere (styles and plots are inline, the icon
# is a data URL); links still navigate. A browser enforces it, so a page that slipped an
# external reference would show the breakage in the browser tests.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'self'"
)


MISSING = "\u2013"  # an en dash: no figure


def figure(value: Any, digits: int = 4) -> str:
    """A score for a table: ``0.9533``, ``12,345.6`` for large values, ``-`` for none."""
    if value is None or isinstance(value, bool):
        return MISSING
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return MISSING
        if abs(value) >= 1000:
            return f"{value:,.1f}"
        return f"{value:.{digits}f}"
    return str(value)


def when(value: Any) -> str:
    """A time as ``2026-11-21 12:00 UTC``."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return str(value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return str(value)


def size(value: Any) -> str:
    """Bytes as ``183.2 kB``."""
    if not isinstance(value, int | float):
        return MISSING
    amount = float(value)
    for unit in ("B", "kB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    return f"{amount:.1f} GB"


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("app.pages", "templates"),
        autoescape=select_autoescape(["html"]),
        undefined=ChainableUndefined,  # an older version lacking a field renders blank
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(figure=figure, when=when, size=size)
    env.globals.update(service_version=app_package.__version__)
    return env


def render(template: str, **context: Any) -> str:
    html: str = environment().get_template(template).render(**context)
    return html
