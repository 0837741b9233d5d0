"""How long a report takes to render: one version of a 500-tree forest (and a regression
ensemble), every plot drawn as SVG and the page rendered, as the service does it for
``GET /v1/models/{name}/versions/{ref}/report`` (minus the registry read). Also each plot
alone as SVG and as PNG. The plot cache is emptied before each round: each round draws
every figure again (the service draws each plot of a version once; see
``benchmarks/plot_burst.py``).

    .venv/bin/python benchmarks/report_bench.py [--trees 500] [--repeats 10]

Prints the first (cold: matplotlib imported, fonts found) and the median of the next
rounds (warm), in wall-clock seconds and in CPU seconds of this process (what a busy
machine does not inflate), per plot and for the whole page. Single process, a few
seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from app.pages.version_page import page
from ensembles import EvaluationSpec, parse_estimator_spec, resolve_ensemble, train
from ensembles.data import select_training_data, table_from_frame
from ensembles.plots import plots_of
from ensembles.plots.render import CACHE, render

VOTING = {
    "kind": "voting",
    "estimators": [
        {"name": "ridge", "kind": "ridge"},
        {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 4}},
        {"name": "knn", "kind": "knn"},
    ],
}


def _version(dataset: str, raw: dict[str, Any]) -> dict[str, Any]:
    """A version document as the API serves it, from the library's own training."""
    from sklearn import datasets

    frame = getattr(datasets, f"load_{dataset}")(as_frame=True).frame
    data = select_training_data(table_from_frame(frame), "target")
    spec = resolve_ensemble(parse_estimator_spec(raw), data.task)
    fitted = train(data, spec, EvaluationSpec(holdout_fraction=0.2, cv_folds=5), 0)
    return {
        "model": dataset, "version": 1, "aliases": ["production"],
        "created_at": "2026-11-25T00:00:00Z", "task": data.task, "kind": spec.kind,
        "spec": fitted.spec.model_dump(mode="json", exclude_none=True),
        "dataset": {"id": "ds_bench", "sha256": "0" * 64, "n_rows": len(frame)},
        "target": "target", "features": [{"name": f.name, "dtype": f.dtype}
                                         for f in fitted.signature.features],
        "classes": [str(c) for c in fitted.signature.classes or []] or None,
        "metrics": fitted.metrics.model_dump(mode="json", exclude_unset=True),
        "feature_importances": fitted.feature_importances, "training": fitted.training,
        "artifact": {"format": "joblib", "sha256": "0" * 64, "size_bytes": 1},
        "tags": {},
    }  # fmt: skip


def _timed(fn: Callable[[], object], repeats: int) -> str:
    """Wall and CPU seconds of the first call, and their medians over the next ``repeats``."""
    walls, cpus = [], []
    for _ in range(repeats + 1):
        CACHE.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    warm_wall, warm_cpu = statistics.median(walls[1:]), statistics.median(cpus[1:])
    return f"{walls[0]:8.3f} {cpus[0]:8.3f} {warm_wall:9.3f} {warm_cpu:9.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    cases = {
        f"random_forest x{args.trees} (breast_cancer)": _version(
            "breast_cancer", {"kind": "random_forest", "params": {"n_estimators": args.trees}}
        ),
        "voting (diabetes)": _version("diabetes", VOTING),
    }
    print(f"{'seconds':58} {'1st wall':>8} {'1st cpu':>8} {'med wall':>9} {'med cpu':>9}")
    for label, view in cases.items():
        for name in plots_of(view):
            for fmt in ("svg", "png"):
                times = _timed(lambda n=name, f=fmt, v=view: render(n, v, f), args.repeats)
                print(f"  {name + ' ' + fmt:56} {times}")
        times = _timed(lambda v=view: page(v), args.repeats)
        size = len(page(view).encode())
        print(f"{label + ': whole report':58} {times}  ({size:,} bytes)")


if __name__ == "__main__":
    main()
