"""Which media type to answer with, from a request's ``Accept`` header (RFC 9110 12.5.1)."""

from __future__ import annotations

from collections.abc import Sequence


def _ranges(header: str) -> list[tuple[str, float]]:
    out = []
    for part in header.split(","):
        fields = [f.strip() for f in part.split(";")]
        media = fields[0].lower()
        if not media:
            continue
        q = 1.0
        for param in fields[1:]:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        out.append((media, q))
    return out


def _specificity(media_range: str, offered: str) -> int | None:
    """How precisely ``media_range`` names ``offered`` (2 exactly, 1 by ``type/*``, 0 by
    ``*/*``), None when it does not."""
    if media_range == offered:
        return 2
    kind, _, sub = media_range.partition("/")
    if sub == "*" and offered.split("/")[0] == kind:
        return 1
    if media_range == "*/*":
        return 0
    return None


def choose(header: str | None, offered: Sequence[str]) -> str | None:
    """The offered type the client prefers (the first offered on a tie; the first when no
    ``Accept`` is sent), or None when it accepts none of them."""
    if header is None or not header.strip():
        return offered[0]
    ranges = _ranges(header)
    best: tuple[float, int] | None = None
    chosen = None
    for index, media in enumerate(offered):
        matches = [(spec, q) for r, q in ranges if (spec := _specificity(r, media)) is not None]
        if not matches:
            continue
        q = max(matches)[1]  # the most specific range decides the quality
        if q <= 0:
            continue
        rank = (q, -index)
        if best is None or rank > best:
            best, chosen = rank, media
    return chosen
