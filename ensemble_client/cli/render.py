"""What the CLI prints: rich tables for people, JSON for scripts, sparklines for curves."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from ensemble_client.models import Curve, Dataset, Job, Metrics, Model, Version

BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60
WIDE = 160  # the width of tables written to a pipe or a file (no terminal to fit)


def console(stderr: bool = False) -> Console:
    """A console on the current stdout (or stderr): the terminal's width in a terminal,
    a wide fixed one in a pipe, so tables are not folded for a file."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else WIDE
    return Console(file=stream, width=width, soft_wrap=False, highlight=False)


def plain(value: Any) -> Any:
    """A model or a list of models as JSON-ready data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=False)
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def echo_json(value: Any) -> None:
    sys.stdout.write(json.dumps(plain(value), indent=2, default=str) + "\n")


def when(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def number(value: Any) -> str:
    """A figure for a table: 4 significant decimals, ints as they are."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, dict) and {"min", "mean", "max"} <= set(value):
        return f"{number(value['mean'])} ({number(value['min'])}..{number(value['max'])})"
    return json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> Table:
    out = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for name in columns:
        out.add_column(name, overflow="fold")
    for row in rows:
        out.add_row(*(v if isinstance(v, str) else number(v) for v in row))
    return out


def datasets_table(datasets: list[Dataset]) -> Table:
    rows = [(d.id, d.name or "", d.n_rows, d.n_columns, when(d.created_at)) for d in datasets]
    return table(None, ["id", "name", "rows", "columns", "created"], rows)


def dataset_tables(dataset: Dataset) -> list[Table]:
    head = table(
        f"dataset {dataset.id}",
        ["name", "rows", "columns", "sha256", "created"],
        [(dataset.name or "", dataset.n_rows, dataset.n_columns, dataset.sha256[:16],
          when(dataset.created_at))],
    )  # fmt: skip
    columns = table(
        None,
        ["column", "dtype", "missing", "unique"],
        [(c.name, c.dtype, c.n_missing, c.n_unique) for c in dataset.columns],
    )
    return [head, columns]


def progress_text(job: Job) -> str:
    p = job.progress
    return f"{p.stage} {p.done}/{p.total}" if p.total else p.stage


def jobs_table(jobs: list[Job]) -> Table:
    rows = [
        (j.id, j.status, j.model, str(j.version), j.kind or "", progress_text(j),
         when(j.created_at), (j.error.detail or "") if j.error else "")
        for j in jobs
    ]  # fmt: skip
    return table(None, ["id", "status", "model", "version", "kind", "progress", "created",
                        "error"], rows)  # fmt: skip


def models_table(models: list[Model]) -> Table:
    rows = [
        (m.name, "" if m.latest_version is None else str(m.latest_version),
         ", ".join(f"{a}→{v}" for a, v in sorted(m.aliases.items())), when(m.created_at))
        for m in models
    ]  # fmt: skip
    return table(None, ["model", "latest", "aliases", "created"], rows)


def headline(version: Version) -> str:
    """The figure people look at first: hold-out (else OOB, CV) primary metric."""
    metric = "accuracy" if version.task == "classification" else "r2"
    m = version.metrics
    for basis, block in (("holdout", m.holdout), ("oob", m.oob), ("cv", m.cv)):
        if block and isinstance(block.get(metric), int | float):
            return f"{basis} {metric} {number(block[metric])}"
    return ""


def versions_table(versions: list[Version]) -> Table:
    rows = [
        (str(v.version), ", ".join(v.aliases), v.kind, v.task, headline(v),
         when(v.created_at), v.description or "")
        for v in versions
    ]  # fmt: skip
    return table(None, ["version", "aliases", "kind", "task", "score", "created",
                        "description"], rows)  # fmt: skip


def version_title(version: Version) -> str:
    aliases = f" ({', '.join(version.aliases)})" if version.aliases else ""
    return (
        f"{version.model} v{version.version}{aliases}: {version.kind}, {version.task}, "
        f"target {version.target!r}, dataset {version.dataset.id} ({version.dataset.n_rows} "
        f"rows), trained {when(version.created_at)}"
    )


BLOCK_NAMES = ("oob", "holdout", "cv", "oof", "train")


def scores_table(metrics: Metrics) -> Table | None:
    """Metric names down, OOB / hold-out / CV / out-of-fold / train across."""
    blocks: dict[str, dict[str, Any]] = {}
    for name in BLOCK_NAMES:
        block = getattr(metrics, name)
        if isinstance(block, dict):
            if name == "oof":
                block = block.get("ensemble") or {}
            blocks[name] = {k: v for k, v in block.items() if k != "confusion_matrix"}
    if not blocks:
        return None
    names: list[str] = []
    for block in blocks.values():
        names += [k for k in block if k not in names]
    rows = [[metric, *(number(blocks[b].get(metric)) for b in blocks)] for metric in names]
    return table("scores", ["metric", *blocks], rows)


def members_table(metrics: Metrics) -> Table | None:
    """Each member's own score next to the ensemble's (min/mean/max for many members)."""
    if not metrics.estimators:
        return None
    bases: list[str] = []
    rows = []
    for member in metrics.estimators:
        figures = {
            basis: {k: v for k, v in scores.items() if k != "confusion_matrix"}
            for basis, scores in member.items()
            if isinstance(scores, dict)
        }
        for basis, scores in figures.items():
            for metric in scores:
                if f"{basis} {metric}" not in bases:
                    bases.append(f"{basis} {metric}")
        name = str(member.get("name", ""))
        if "n_members" in member:
            name = f"{name} ({member['n_members']})"
        rows.append((name, figures))
    cells = [
        [name, *(number(figures.get(b.split(" ")[0], {}).get(b.split(" ")[1])) for b in bases)]
        for name, figures in rows
    ]
    return table("members", ["member", *bases], cells)


def sparkline(values: Sequence[float | None], width: int = SPARK_WIDTH) -> str:
    """Values as block characters, lowest ▁ to highest █, resampled to ``width``."""
    if len(values) > width:
        values = [values[round(i * (len(values) - 1) / (width - 1))] for i in range(width)]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    low, high = min(finite), max(finite)
    span = high - low
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(" ")
        elif span == 0:
            out.append(BLOCKS[len(BLOCKS) // 2])
        else:
            out.append(BLOCKS[round((v - low) / span * (len(BLOCKS) - 1))])
    return "".join(out)


def curve_line(curve: Curve) -> str:
    """``oob_curve  oob accuracy 0.89 ▁▃▅▆▇██ 0.95 (min 0.89, max 0.95; members 1..200)``."""
    ys = [v for v in curve.y if v is not None and math.isfinite(v)]
    if not ys:
        return f"{curve.name}: no points"
    span = f"{curve.x_label} {number(curve.x[0])}..{number(curve.x[-1])}" if curve.x else ""
    return (
        f"{curve.name}  {curve.y_label} {number(ys[0])} {sparkline(curve.y)} {number(ys[-1])}"
        f"  (min {number(min(ys))}, max {number(max(ys))}; {span})"
    )
