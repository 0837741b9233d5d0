"""Why the service's LightGBM fit is slower than LightGBM's own: the fit's parts, in process.

One fresh process (``OMP_WAIT_POLICY=PASSIVE``, as the service), the 500-round LightGBM on
``train_scale``'s 200,000 x 20 table, fitted in turns ``--rounds`` times each way:

* ``direct``: ``LGBMClassifier(n_estimators=500, random_state=0, n_jobs=<CPUs>,
  verbose=-1).fit(frame, y)``, as ``train_scale.direct_lightgbm``;
* ``array``: the same on the service's preprocessed matrix (``Xt``);
* ``service``: ``training._fit`` as ``train()`` calls it (the rounds' callbacks, the score
  watch and its ``answers``), with its parts timed: ``lgb_fit`` (LightGBM's ``fit`` with the
  callbacks), ``callbacks`` (the wall inside them), ``answers`` (the watch's check after it).

Prints one JSON line per fit: wall and process CPU.

    PYTHONPATH=. .venv/bin/python benchmarks/lightgbm_fit_gap.py [--rounds 3] [--rows N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lightgbm
from train_scale import table

from ensembles import training
from ensembles.data import select_training_data, table_from_frame
from ensembles.kinds import lightgbm_scores
from ensembles.parallel import MemberPool
from ensembles.specs import parse_estimator_spec
from ensembles.training_run import Run
from ensembles.validation import resolve_ensemble


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


class _Clock:
    """Wall seconds spent inside wrapped callables, by name."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}

    def wrap(self, name: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[name] = self.spent.get(name, 0.0) + time.perf_counter() - started

        return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=500)
    parser.add_argument("--ways", default="direct,array,service")
    args = parser.parse_args()
    frame = table(args.rows, 20)
    X, y = frame.drop(columns="target"), frame["target"].to_numpy()
    data = select_training_data(table_from_frame(frame), "target", task="classification")
    spec = resolve_ensemble(
        parse_estimator_spec({"kind": "lightgbm", "params": {"n_estimators": args.size}}),
        data.task,
    )
    notes: list[str] = []
    rows = training._split(data, 0.0, 0, notes)
    clock = _Clock()
    lightgbm_scores.ScoreWatch.__call__ = clock.wrap("watch", lightgbm_scores.ScoreWatch.__call__)  # type: ignore[method-assign]
    lightgbm_scores.ScoreWatch.answers = clock.wrap("answers", lightgbm_scores.ScoreWatch.answers)  # type: ignore[method-assign]
    original_fit = lightgbm.LGBMClassifier.fit
    lightgbm.LGBMClassifier.fit = clock.wrap("lgb_fit", original_fit)  # type: ignore[method-assign]
    Xt = None

    for _ in range(args.rounds):
        for way in args.ways.split(","):
            clock.spent.clear()
            cpu0, started = _cpu(), time.perf_counter()
            if way == "direct":
                lightgbm.LGBMClassifier(
                    n_estimators=args.size, random_state=0, n_jobs=os.cpu_count(), verbose=-1
                ).fit(X, y)
            elif way == "array":
                assert Xt is not None, "run service first"
                lightgbm.LGBMClassifier(
                    n_estimators=args.size, random_state=0, n_jobs=os.cpu_count(), verbose=-1
                ).fit(Xt, y)
            else:
                run = Run(None, None, MemberPool.local())
                fit = training._fit(data, spec, rows, 0, run, [], lambda _p: None)
                Xt = fit.Xt
            wall, cpu = time.perf_counter() - started, _cpu() - cpu0
            line = {"way": way, "wall": round(wall, 3), "cpu": round(cpu, 2)}
            line |= {k: round(v, 3) for k, v in clock.spent.items()}
            line["load"] = round(os.getloadavg()[0], 1)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
