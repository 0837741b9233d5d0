"""pasting_votes measured: its test error next to bagging's with the same number of
members, and its peak memory on a table 50 times the bite.

Error: on a generated large table (Breiman's *twonorm*: two 20-dimensional Gaussians,
the paper's own kind of synthetic data) and on a bundled data set (digits), Rvotes and
Ivotes grow until their out-of-bag error stops improving (``patience``); bagging
(scikit-learn's, full bootstrap samples, same trees) is then fitted with the number of
members each reached, and every model is scored on held-out rows.

Memory: each fit runs in a fresh process on a table of ``50 x bite_size`` rows; a thread
samples the process's resident set every 2 ms, and the figure is the peak during the fit
above the resident set just before it (the table itself is already in memory).  The
out-of-bag tallies pasting_votes keeps are printed beside it: they, and not the table,
are what grows with the rows.

    PYTHONPATH=. .venv/bin/python benchmarks/pasting_votes_report.py [--quick | --memory]
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import threading
import time
from typing import Any

import numpy as np
from sklearn import datasets
from sklearn.ensemble import BaggingClassifier
from sklearn.model_selection import train_test_split
from sklearn.tree import DecisionTreeClassifier

from ensembles.kinds import PastingVotesClassifier

SEED = 7
PAGE = os.sysconf("SC_PAGE_SIZE")


def twonorm(n: int, seed: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Breiman's twonorm: class 0 ~ N(+a, I), class 1 ~ N(-a, I), a = 2/sqrt(20)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    a = 2 / np.sqrt(20)
    X = rng.normal(size=(n, 20)) + np.where(y[:, None] == 0, a, -a)
    return X, y


# --- error next to bagging ---------------------------------------------------------------


def compare(
    name: str, X: Any, y: Any, bite: int, patience: int, max_estimators: int
) -> list[dict[str, Any]]:
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.25, random_state=SEED, stratify=y
    )
    rows = []
    for sampling in ("random", "importance"):
        started = time.perf_counter()
        votes = PastingVotesClassifier(
            DecisionTreeClassifier(),
            bite_size=bite,
            sampling=sampling,
            patience=patience,
            max_estimators=max_estimators,
            random_state=SEED,
        ).fit(X_train, y_train)
        seconds = time.perf_counter() - started
        members = len(votes.ensemble_.estimators_)
        stopping = votes.report_.metrics["stopping"]
        started = time.perf_counter()
        bagging = BaggingClassifier(
            DecisionTreeClassifier(), n_estimators=members, random_state=SEED
        ).fit(X_train, y_train)
        bag_seconds = time.perf_counter() - started
        rows.append(
            {
                "data": name,
                "rows": len(y_train),
                "bite_size": bite,
                "sampling": sampling,
                "members": members,
                "stop": stopping["reason"],
                "oob_error": round(stopping["oob_error"], 4),
                "test_error": round(float(np.mean(votes.predict(X_test) != y_test)), 4),
                "fit_s": round(seconds, 2),
                "bagging_test_error": round(float(np.mean(bagging.predict(X_test) != y_test)), 4),
                "bagging_fit_s": round(bag_seconds, 2),
            }
        )
        print(rows[-1], flush=True)
    return rows


# --- peak memory ----------------------------------------------------------------------


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def _peak_during(fit: Any) -> tuple[int, int]:
    """(resident bytes before, peak resident bytes above that during ``fit()``)."""
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.002)

    before = _rss()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    fit()
    done.set()
    sampler.join()
    return before, max(peak[0], _rss()) - before


def _memory_child(what: str, n: int, bite: int, members: int, queue: Any) -> None:
    X, y = twonorm(n, SEED)
    fits = {
        "pasting_votes (Ivotes)": lambda: PastingVotesClassifier(
            DecisionTreeClassifier(),
            bite_size=bite,
            patience=members,
            max_estimators=members,
            random_state=SEED,
        ).fit(X, y),
        "bagging (same members)": lambda: BaggingClassifier(
            DecisionTreeClassifier(), n_estimators=members, random_state=SEED
        ).fit(X, y),
        "one tree on the table": lambda: DecisionTreeClassifier(random_state=SEED).fit(X, y),
    }
    before, peak = _peak_during(fits[what])
    queue.put(
        {
            "fit": what,
            "rows": n,
            "table_mb": X.nbytes / 2**20,
            "before_mb": before / 2**20,
            "peak_above_mb": peak / 2**20,
        }
    )


def memory(bite: int, members: int, multiples: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    context = mp.get_context("spawn")
    for multiple in multiples:
        n = multiple * bite
        for what in ("pasting_votes (Ivotes)", "bagging (same members)", "one tree on the table"):
            queue = context.Queue()
            child = context.Process(target=_memory_child, args=(what, n, bite, members, queue))
            child.start()
            result = queue.get()
            child.join()
            result["tallies_mb"] = n * (2 * 2 + 2) / 2**20 if what.startswith("pasting") else None
            result = {k: round(v, 1) if isinstance(v, float) else v for k, v in result.items()}
            rows.append({"bite_size": bite, "multiple": multiple, **result})
            print(rows[-1], flush=True)
    return rows


def main() -> None:
    if "--memory" in sys.argv:
        print(json.dumps(memory(bite=1000, members=25, multiples=(10, 50, 100)), indent=1))
        return
    quick = "--quick" in sys.argv
    n_large = 10_000 if quick else 40_000
    X, y = twonorm(n_large, SEED)
    digits = datasets.load_digits()
    results = {
        "error": [
            *compare("twonorm (generated)", X, y, bite=500, patience=15, max_estimators=100),
            *compare(
                "digits (bundled)",
                digits.data,
                digits.target,
                bite=200,
                patience=15,
                max_estimators=100,
            ),
        ],
        "memory": memory(bite=1000, members=25, multiples=(10, 50)),
    }
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
