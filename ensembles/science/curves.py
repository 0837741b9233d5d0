"""``metrics.curves``: every curve of a version against its number of members, one shape.

The older ``metrics.curve`` (one OOB or staged score curve) stays as it is; each of its
points becomes a point here, and subsampled gradient boosting adds its per-stage
out-of-bag loss. Points whose score is undefined (None) are left out.
"""

from __future__ import annotations

from typing import Any

from ensembles.reports import Curve

MAX_POINTS = 50
_BASIS = {"oob": "out of bag", "holdout": "hold-out rows", "train": "training rows"}


def _sampled(values: list[float]) -> tuple[list[float], list[float]]:
    total = len(values)
    if total <= MAX_POINTS:
        marks = list(range(1, total + 1))
    else:
        marks = sorted({round(total * j / MAX_POINTS) for j in range(1, MAX_POINTS + 1)})
    return [float(m) for m in marks], [float(values[m - 1]) for m in marks]


def curves_of(curve: dict[str, Any] | None, oob: dict[str, Any] | None) -> list[Curve]:
    out: list[Curve] = []
    if curve:
        points = [p for p in curve["points"] if p.get("score") is not None]
        basis, metric = curve["basis"], curve["metric"]
        out.append(
            Curve(
                name=f"{basis}_{metric}",
                x_label="members",
                x=[float(p["n_estimators"]) for p in points],
                y_label=f"{metric} ({_BASIS.get(basis, basis)})",
                y=[float(p["score"]) for p in points],
            )
        )
    losses = (oob or {}).get("loss_curve")
    if losses:
        x, y = _sampled([float(v) for v in losses])
        out.append(Curve(name="oob_loss", x_label="members", x=x, y_label="loss (out of bag)", y=y))
    return out
