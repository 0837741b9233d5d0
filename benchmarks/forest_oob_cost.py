"""What the forest's fit no longer does: scikit-learn's OOB pass, against what replaces it.

``RandomForestClassifier(oob_score=True).fit`` ends with ``_set_oob_score_and_attributes``:
every tree on its out-of-bag rows, one tree after the other on one thread.  The service
fits without it and gives the forest the same attributes from the member pass's tallies
(:mod:`ensembles.forest_oob`).  On a fit saved by ``benchmarks/forest_after_fit.py
--save PATH``, this prints one JSON line per round: the CPU and wall of scikit-learn's
pass, and of :func:`ensembles.forest_oob.settle` on the tallies, whether the two give the
same bits, and the 1-minute load average:

    PYTHONPATH=. .venv/bin/python benchmarks/forest_oob_cost.py /tmp/forest.joblib [ROUNDS]
"""

from __future__ import annotations

import copy
import json
import os
import resource
import sys
import time
from typing import Any

import joblib
import numpy as np

from ensembles import forest_oob, metrics
from ensembles.members import members_of


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def _library_pass(forest: Any, X: np.ndarray, y: np.ndarray) -> Any:
    """scikit-learn's own OOB pass, as its fit runs it (classes still per output)."""
    forest.n_classes_ = np.array([forest.n_classes_])
    forest.classes_ = np.array([forest.classes_])
    try:
        forest._set_oob_score_and_attributes(X, y.reshape(-1, 1).astype(np.float64))
    finally:
        forest.n_classes_ = int(forest.n_classes_[0])
        forest.classes_ = forest.classes_[0]
    return forest


def main() -> None:
    saved = joblib.load(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    fit, rows = saved["fit"], saved["rows"]
    X = np.asarray(fit.Xt, dtype=np.float32)
    codes = metrics.class_codes(rows.y_train, fit.classes)
    members = [m for m in members_of(fit.ensemble) if m.samples is not None]
    tallied = metrics._oob_tallies(members, fit.Xt, rows.y_train, fit.task, fit.classes)
    for _ in range(rounds):
        library = copy.copy(fit.ensemble)
        cpu, wall = _cpu(), time.perf_counter()
        _library_pass(library, X, codes)
        line: dict[str, Any] = {
            "library_pass_cpu": round(_cpu() - cpu, 2),
            "library_pass_wall": round(time.perf_counter() - wall, 2),
        }
        settled = copy.copy(fit.ensemble)
        forest_oob.fit_without_oob(settled, True)
        cpu, wall = _cpu(), time.perf_counter()
        forest_oob.settle(settled, tallied[0], tallied[1], rows.y_train, codes)
        line |= {
            "settle_cpu": round(_cpu() - cpu, 3),
            "settle_wall": round(time.perf_counter() - wall, 3),
            "same_bits": bool(
                np.array_equal(settled.oob_decision_function_, library.oob_decision_function_)
                and settled.oob_score_ == library.oob_score_
            ),
            "load": round(os.getloadavg()[0], 1),
        }
        print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
