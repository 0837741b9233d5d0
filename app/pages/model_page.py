"""A model's versions side by side: each metric per version, the best marked, where each
alias points (with its weights and shadow), and the primary metric by version as a plot.

So a user sees whether version 7 beats the one ``production`` points at before moving
the alias. At most ``MAX_VERSIONS`` columns: the newest versions and every aliased one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.pages.templating import render
from app.services.views import version_out
from ensembles.plots import plots_of
from ensembles.plots.render import draw, inline
from ensembles.plots.versions import comparison, other_tables, rows
from ensembles.registry import AliasRecord, Registry

MAX_VERSIONS = 12


def shown_versions(views: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The newest versions and the aliased ones, newest first, at most MAX_VERSIONS (all
    aliased versions are kept even past it)."""
    aliased = [v for v in views if v.get("aliases")]
    newest = [v for v in views if not v.get("aliases")]
    room = max(MAX_VERSIONS - len(aliased), 0)
    kept = {int(v["version"]) for v in [*aliased, *newest[:room]]}
    return [v for v in views if int(v["version"]) in kept]


def routing_text(record: AliasRecord) -> str:
    """Where an alias sends predictions, for people: ``v3 90% · v4 10% · shadow v5``."""
    if record.weights is None:
        parts = [f"v{record.version}"]
    else:
        parts = [f"v{number} {weight:.4g}" for number, weight in record.weights.items()]
    if record.shadow is not None:
        parts.append(f"shadow v{record.shadow}")
    return " · ".join(parts)


def page(
    name: str,
    aliases: Mapping[str, int],
    views: Sequence[Mapping[str, Any]],
    routes: Mapping[str, str] | None = None,
) -> str:
    """``routes``: each alias's weights and shadow as text, where they are more than the
    one version of ``aliases``."""
    shown = shown_versions(views)
    figure = None
    if shown:
        svg = draw(lambda: comparison(shown), f"{name}: score by version")
        figure = inline(svg, "plot-versions")
    reference = next((v for v in shown if v.get("aliases")), shown[0] if shown else None)
    return render(
        "model.html",
        name=name,
        aliases=[
            (alias, (routes or {}).get(alias, f"v{v}")) for alias, v in sorted(aliases.items())
        ],
        versions=shown,
        total=len(views),
        rows=rows(shown),
        figure=figure,
        other_tables=other_tables(shown, reference) if reference else [],
        reference=reference,
        plots={int(v["version"]): plots_of(v) for v in shown},
    )


def model_report(registry: Registry, name: str) -> str:
    """Read the model's versions and render the comparison (blocking: call in a thread)."""
    model = registry.get_model(name)
    views = [version_out(r).model_dump(mode="json") for r in registry.list_versions(name)]
    routes = {record.alias: routing_text(record) for record in registry.list_aliases(name)}
    return page(name, dict(model.aliases), views, routes)
