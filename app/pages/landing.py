"""The landing page at ``/``: what the service is, its docs, and its models with links to
their reports (listed only to a caller who may read them)."""

from __future__ import annotations

from app.pages.templating import render
from ensembles.registry import ModelRecord, VersionRegistry


def page(title: str, models: list[ModelRecord] | None) -> str:
    """``models`` None: the caller may not list them (the page says how to)."""
    return render("landing.html", title=title, models=models)


def landing(registry: VersionRegistry, title: str, may_read: bool) -> str:
    """Blocking (reads the registry): call it in a thread."""
    return page(title, registry.list_models() if may_read else None)
