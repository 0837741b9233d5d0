"""CPU time of one part of a big gradient boosting request walked outside the GIL
(``ensembles.inference.boosted_sum.boosted_raw``) against the library's own walk
(``decision_function``), on the bench's model (100 trees, breast_cancer, 30 float
columns) and 5,000 rows (a 10,000-row request's part on two threads).  ``--against``
another tree's ``boosted_sum.py``: its ``boosted_raw`` timed too, the calls of the three
interleaved (on a shared host, CPU time moves by 20-30% from run to run; calls that
alternate in one process see the same host).  Medians of ``--repeats`` calls each, in CPU
seconds of the process; every answer is checked to be the library's bits.

    PYTHONPATH=. .venv/bin/python benchmarks/boosted_parts.py [--rows 5000] [--repeats 100]
        [--against /work/main/ensembles/inference/boosted_sum.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn import datasets
from sklearn.ensemble import GradientBoostingClassifier

from ensembles.inference.boosted_sum import boosted_raw


def other_boosted_raw(path: str) -> Callable[..., Any]:
    """``boosted_raw`` of the module at ``path`` (another tree's), loaded beside ours."""
    spec = importlib.util.spec_from_file_location("other_boosted_sum", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.boosted_raw  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--against", help="another tree's boosted_sum.py")
    args = parser.parse_args()
    X, y = datasets.load_breast_cancer(return_X_y=True)
    model = GradientBoostingClassifier(n_estimators=100, random_state=42).fit(X, y)
    rows = X[np.random.default_rng(42).integers(0, len(X), args.rows)]
    expected = model.decision_function(rows)
    calls: dict[str, Callable[[], Any]] = {
        "boosted_raw": lambda: boosted_raw(model, rows),
        "library": lambda: model.decision_function(rows),
    }
    if args.against:
        other = other_boosted_raw(args.against)
        calls["against"] = lambda: other(model, rows)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for name, call in calls.items():
        answer = np.asarray(call())
        assert np.array_equal(answer.ravel(), expected), name
    for _ in range(args.repeats):
        for name, call in calls.items():
            start = time.process_time()
            call()
            times[name].append(time.process_time() - start)
    medians = {name: float(np.median(spent) * 1e3) for name, spent in times.items()}
    print("  ".join(f"{name} {ms:.2f} ms" for name, ms in medians.items()), end="")
    if args.against:
        print(f"  boosted_raw / against {medians['boosted_raw'] / medians['against']:.3f}", end="")
    print(f"  boosted_raw / library {medians['boosted_raw'] / medians['library']:.3f}")


if __name__ == "__main__":
    main()
