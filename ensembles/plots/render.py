"""Figures to bytes: SVG (the default, and what report pages inline) or PNG, cached.

matplotlib is imported here and by the figure functions, when a plot is first drawn:
the version resource lists plots without it. matplotlib's settings are
process-wide, so the house style is put in place while any figure is being drawn and
taken away when the last one is done (every figure here wants the same style, so
concurrent drawings never mix styles); at most ``MAX_DRAWING`` figures are drawn at once,
so a burst of reports cannot take every core from the rest of the service.

A version's plots never change, so rendered plots are kept (:class:`PlotCache`, least
recently used dropped first, bounded in bytes) by what identifies the version's content
and by plot and format; concurrent requests for one plot draw it once.

Every text is drawn literally (no mathtext, no TeX): labels are the user's strings, and
``$x^$`` must read as written, not fail to parse. SVG text stays text
(``svg.fonttype = none``) and the output is deterministic (no date, salted ids), so the
same version always gives the same bytes.
"""

from __future__ import annotations

import io
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from html import escape
from typing import Any, Literal

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.typing import RcKeyType

from ensembles.plots import style
from ensembles.plots.catalog import PLOTS, plot_data
from ensembles.plots.data import VersionView

Format = Literal["svg", "png"]
MEDIA_TYPES: dict[Format, str] = {"svg": "image/svg+xml", "png": "image/png"}
PNG_DPI = 150  # crisp on a high-density screen or a dashboard tile
MAX_DRAWING = 2  # figures drawn at once (the machine's cores, not the requests')
CACHE_BYTES = 64 * 2**20  # rendered plots kept; a plot is tens to hundreds of kB
_PROLOG = re.compile(r"^.*?(?=<svg\b)", re.DOTALL)
_SVG_OPEN = re.compile(r"<svg\b[^>]*>")
_IDS = re.compile(r'\bid="([^"]+)"')
_DRAWING = threading.BoundedSemaphore(MAX_DRAWING)


class PlotCache:
    """Rendered plots by key, the least recently used dropped first past ``max_bytes``;
    while one thread renders a key, others asking for it wait for its bytes."""

    def __init__(self, max_bytes: int = CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.hits = 0
        self.renders = 0
        self._bytes = 0
        self._entries: OrderedDict[Hashable, bytes] = OrderedDict()
        self._lock = threading.Lock()
        self._rendering: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable, make: Callable[[], bytes]) -> bytes:
        """The bytes kept for ``key``, else ``make()``'s, kept."""
        found = self._hit(key)
        if found is not None:
            return found
        with self._lock:
            turn = self._rendering.setdefault(key, threading.Lock())
        with turn:
            found = self._hit(key)
            if found is not None:
                return found
            try:
                made = make()
                self._keep(key, made)
            finally:
                with self._lock:
                    self._rendering.pop(key, None)
        return made

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def _hit(self, key: Hashable) -> bytes | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                self.hits += 1
            return found

    def _keep(self, key: Hashable, made: bytes) -> None:
        with self._lock:
            self.renders += 1
            if len(made) > self.max_bytes:
                return
            self._entries[key] = made
            self._bytes += len(made)
            while self._bytes > self.max_bytes:
                _, dropped = self._entries.popitem(last=False)
                self._bytes -= len(dropped)


CACHE = PlotCache()


def identity(view: VersionView) -> tuple[Any, ...] | None:
    """What tells one stored version's content from any other's (a model deleted and
    trained again reuses its version numbers, not its creation time and artifact); None
    for a document that is not a stored version (never cached)."""
    artifact = view.get("artifact") or {}
    dataset = view.get("dataset") or {}
    created, sha = view.get("created_at"), artifact.get("sha256")
    if not created or not sha:
        return None
    return (view.get("model"), view.get("version"), str(created), sha, dataset.get("sha256"))


class _SharedStyle:
    """The house style in matplotlib's settings from the first drawing under way to the
    last (the settings the process had before are put back then)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved: dict[RcKeyType, Any] = {}

    @contextmanager
    def applied(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                house = style.rc()
                self._saved = {key: mpl.rcParams[key] for key in house}
                mpl.rcParams.update(house)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    mpl.rcParams.update(self._saved)


house_style = _SharedStyle().applied


def literal(fig: Figure) -> Figure:
    """Every text of the figure drawn as written: no mathtext, no TeX."""
    for text in fig.findobj(Text):
        text.set_parse_math(False)
        text.set_usetex(False)
    return fig


def figure(name: str, view: VersionView) -> Figure:
    """The figure of plot ``name`` of the version (NotFoundError when it has none)."""
    found = plot_data(name, view)
    with house_style():
        fig: Figure = PLOTS[name].draw(found)
    return literal(fig)


def render(name: str, view: VersionView, fmt: Format = "svg") -> bytes:
    """Plot ``name`` of the version as an SVG document or a PNG image (kept in ``CACHE``
    for a stored version)."""
    title = f"{PLOTS[name].title if name in PLOTS else name}: {view.get('model')} " + (
        f"version {view.get('version')}"
    )
    version = identity(view)
    if version is None:
        return draw(lambda: figure(name, view), title, fmt)
    return CACHE.get((*version, name, fmt), lambda: draw(lambda: figure(name, view), title, fmt))


def draw(make: Callable[[], Figure], title: str, fmt: Format = "svg") -> bytes:
    """The bytes of the figure ``make`` draws, made and saved in the house style, at
    most ``MAX_DRAWING`` at a time."""
    with _DRAWING, house_style():
        return save(make(), fmt, title)


def save(fig: Figure, fmt: Format, title: str) -> bytes:
    """The figure's bytes; an SVG carries ``title`` as its accessible name."""
    literal(fig)
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
