"""One version's report: what it is, where it came from, how well it does, and its plots.

Built from the version document the API serves (so the page shows exactly the JSON's
figures) and rendered in one pass: each plot the version has is drawn as SVG and inlined,
each it lacks is listed with the reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.pages.templating import MISSING, figure, render
from app.services.views import version_out
from ensembles.plots import PLOTS, absence
from ensembles.plots.render import inline
from ensembles.plots.render import render as render_plot
from ensembles.plots.versions import metric_names
from ensembles.registry import VersionRegistry

COLUMNS = (("train", "training rows"), ("holdout", "hold-out"), ("cv", "cross-validation"),
           ("oob", "out-of-bag"))  # fmt: skip
_COUNTS = ("n", "n_scored", "n_folds")


@dataclass(frozen=True)
class PlotBlock:
    """A plot as the page shows it: its SVG, or why the version has none."""

    name: str
    title: str
    caption: str
    svg: str | None
    absent: str | None


@dataclass(frozen=True)
class MetricRow:
    name: str
    cells: list[str]


def view_of(registry: VersionRegistry, name: str, ref: str) -> dict[str, Any]:
    """The version document the API serves, as JSON."""
    document: dict[str, Any] = version_out(registry.get_version(name, ref)).model_dump(mode="json")
    return document


def metric_rows(view: Mapping[str, Any]) -> list[MetricRow]:
    """The metric table: each metric the task has by kind of rows (cross-validation as
    mean ± std over the folds), then the row counts; metrics no column has are left out."""
    metrics = view.get("metrics") or {}
    blocks: list[Mapping[str, Any]] = [_block(metrics, key) for key, _ in COLUMNS]
    names = [*metric_names(str(view.get("task"))), "loss"]
    rows = []
    for metric in [*names, *_COUNTS]:
        cells = [
            _cell(block, metric, key == "cv")
            for block, (key, _) in zip(blocks, COLUMNS, strict=True)
        ]
        if any(c != MISSING for c in cells):
            rows.append(MetricRow(metric, cells))
    return rows


def _block(metrics: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    block = metrics.get(key)
    return block if isinstance(block, Mapping) else {}


def _cell(block: Mapping[str, Any], metric: str, cv: bool) -> str:
    value = block.get(metric)
    if not isinstance(value, int | float) or isinstance(value, bool):
        return MISSING
    text = figure(value)
    std = (block.get("std") or {}).get(metric) if cv else None
    return f"{text} ± {figure(std)}" if isinstance(std, float) else text


def plot_blocks(view: Mapping[str, Any]) -> list[PlotBlock]:
    blocks = []
    for name, kind in PLOTS.items():
        reason = absence(name, view)
        svg = None if reason else inline(render_plot(name, view), f"plot-{name}")
        blocks.append(PlotBlock(name, kind.title, kind.caption, svg, reason))
    return blocks


def page(view: Mapping[str, Any]) -> str:
    """The report's HTML."""
    spec = json.dumps(view.get("spec"), indent=2, sort_keys=False)
    return render(
        "version.html",
        v=view,
        columns=[label for _, label in COLUMNS],
        metric_rows=metric_rows(view),
        plots=plot_blocks(view),
        spec=spec,
    )


def version_report(registry: VersionRegistry, name: str, ref: str) -> str:
    """Read the version and render its report (blocking: call it in a thread)."""
    return page(view_of(registry, name, ref))
