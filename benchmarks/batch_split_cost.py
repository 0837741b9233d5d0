"""CPU of splitting one batched prediction back into one-row answers
(``ensembles.inference.batches.split_prediction``), the tree's against a copy of the
former way (``dataclasses.replace`` per part), alternating, with the same parts checked
equal.  In process, no model: a forest's kind of answer (labels, probabilities).

    PYTHONPATH=. .venv/bin/python benchmarks/batch_split_cost.py --parts 9
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from typing import Any

import numpy as np

from ensembles.inference.batches import _PER_ROW, _rows, split_prediction
from ensembles.inference.result import Prediction


def former(prediction: Prediction, sizes: list[int]) -> list[Prediction]:
    """The split as it was before ``onerow8``."""
    out = []
    start = 0
    for size in sizes:
        end = start + size
        cut = {name: _rows(getattr(prediction, name), start, end) for name in _PER_ROW}
        out.append(replace(prediction, **cut))
        start = end
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=int, default=9)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--blocks", type=int, default=10)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    n = args.parts
    labels: list[Any] = [int(x) for x in rng.integers(0, 2, n)]
    joined = Prediction(labels, probabilities=rng.random((n, 2)), engine="treelite")
    sizes = [1] * n
    for a, b in zip(split_prediction(joined, sizes), former(joined, sizes), strict=True):
        assert a.predictions == b.predictions and a.engine == b.engine
        assert a.probabilities is not None and b.probabilities is not None
        assert a.probabilities.tobytes() == b.probabilities.tobytes()
        assert a.probabilities.flags.c_contiguous and a.votes is b.votes is None
    found: dict[str, list[float]] = {"now": [], "former": []}
    for block in range(args.blocks):
        ways = [("now", split_prediction), ("former", former)]
        for name, split in ways if block % 2 == 0 else ways[::-1]:
            started = time.process_time()
            for _ in range(args.calls):
                split(joined, sizes)
            found[name].append((time.process_time() - started) / args.calls * 1e6)
    for name, values in found.items():
        print(f"{name}: median {statistics.median(values):.1f} us CPU per split of {n} parts")


if __name__ == "__main__":
    main()
