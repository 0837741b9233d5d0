"""Figures to bytes: SVG (the default, and what report pages inline) or PNG.

matplotlib is imported here and only here, when a plot is first drawn: the service
starts, and the version resource lists plots, without it. Figures are made and saved
under one lock with the house style as a temporary ``rc_context`` (matplotlib's settings
are process-wide), so concurrent requests never mix styles; rendering a whole report
takes a fraction of a second (``benchmarks/report_bench.py``).

SVG text stays text (``svg.fonttype = none``) and the output is deterministic (no date,
salted ids), so the same version always gives the same bytes.
"""

from __future__ import annotations

import io
import re
import threading
from collections.abc import Callable
from html import escape
from typing import Literal

from matplotlib import rc_context
from matplotlib.figure import Figure

from ensembles.plots import figures, style
from ensembles.plots.catalog import PLOTS, plot_data
from ensembles.plots.data import VersionView

Format = Literal["svg", "png"]
MEDIA_TYPES: dict[Format, str] = {"svg": "image/svg+xml", "png": "image/png"}
PNG_DPI = 150  # crisp on a high-density screen or a dashboard tile
_LOCK = threading.Lock()
_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_SVG_OPEN = re.compile(r"<svg\b[^>]*>")
_IDS = re.compile(r'\bid="([^"]+)"')


def figure(name: str, view: VersionView) -> Figure:
    """The figure of plot ``name`` of the version (NotFoundError when it has none)."""
    found = plot_data(name, view)
    draw = getattr(figures, name)
    with rc_context(style.rc()):
        fig: Figure = draw(found)
    return fig


def render(name: str, view: VersionView, fmt: Format = "svg") -> bytes:
    """Plot ``name`` of the version as an SVG document or a PNG image."""
    title = f"{PLOTS[name].title if name in PLOTS else name}: {view.get('model')} " + (
        f"version {view.get('version')}"
    )
    return draw(lambda: figure(name, view), title, fmt)


def draw(make: Callable[[], Figure], title: str, fmt: Format = "svg") -> bytes:
    """The bytes of the figure ``make`` draws, made and saved under the lock and the style."""
    with _LOCK, rc_context(style.rc()):
        return save(make(), fmt, title)


def save(fig: Figure, fmt: Format, title: str) -> bytes:
    """The figure's bytes; an SVG carries ``title`` as its accessible name."""
    buffer = io.BytesIO()
    if fmt == "png":
        fig.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Title": title})
        return buffer.getvalue()
    fig.savefig(buffer, format="svg", metadata={"Date": None, "Title": title})
    return _with_title(buffer.getvalue().decode("utf-8"), title).encode("utf-8")


def _with_title(svg: str, title: str) -> str:
    """A ``<title>`` first in the ``<svg>`` (screen readers announce it) and ``role=img``."""
    opening = _SVG_OPEN.search(svg)
    if opening is None:
        return svg
    tag = opening.group(0)
    tagged = tag[:-1] + ' role="img">' if "role=" not in tag else tag
    return (
        svg[: opening.start()] + tagged + f"<title>{escape(title)}</title>" + svg[opening.end() :]
    )


def inline(svg: bytes, prefix: str) -> str:
    """An SVG document as an element to put inside an HTML page: without its XML prolog
    and doctype, every id (and every reference to one) prefixed, so several plots on one
    page never share an id."""
    text = _PROLOG.sub("", svg.decode("utf-8"), count=1)
    ids = set(_IDS.findall(text))
    if not ids:
        return text

    def rename(match: re.Match[str]) -> str:
        return f'id="{prefix}-{match.group(1)}"'

    text = _IDS.sub(rename, text)
    for old in sorted(ids, key=len, reverse=True):
        text = text.replace(f"url(#{old})", f"url(#{prefix}-{old})")
        text = text.replace(f'href="#{old}"', f'href="#{prefix}-{old}"')
    return text
