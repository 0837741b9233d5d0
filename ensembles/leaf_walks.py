"""The members' leaves on the training rows, walked ahead on a core the job leaves idle.

After a forest's fit the job measures its figures from one pass of the members over the
200,000 training rows (:mod:`ensembles.member_pass`: each tree's ``apply``, ~26 ms of CPU
a tree, most of the pass) and explains it (:mod:`ensembles.explain.summary`: shap's
TreeSHAP, ~2 s on one core, holding the GIL).  Beside the summary only native work that
needs no GIL can run; the compiled engine's check (GTIL) took ~1.1 s of the other core
and left the rest of it idle.  A tree's ``apply`` is such work: one call, its walk
without the GIL.  So ``train()`` explains such a model first and walks the members'
leaves meanwhile (:class:`LeafWalks`), and the pass then reads each walked member's
answer from its leaves instead of walking it again.

The walker runs at the lowest CPU priority (``nice`` 19 for its thread): it takes only
what the summary and the check leave, never their core.  It walks the members from the
last one back (the pass answers them from the first), keeps each one's leaves in the
smallest unsigned integers that hold its node count, and goes on through the pass's
first steps (one core: the members' bootstrap rows, the labels' codes), skipping the
trees the pass took, until the pass ends (:meth:`LeafWalks.stop`) or ``BUDGET_BYTES`` of
leaves are held.  The pass never waits for it: a tree not walked yet when the pass needs
it is walked by the pass, as before.  A leaf is what the tree's ``apply`` gives for the
same rows, and the answer is read from it as scikit-learn's ``Tree.predict`` reads it
(``value.take(leaves, axis=0, mode="clip")``): the same numbers, bit for bit
(``tests/unit/test_leaf_walks.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.tree import BaseDecisionTree

__all__ = ["BUDGET_BYTES", "LeafWalks", "answer_from_leaves"]

log = logging.getLogger(__name__)

BUDGET_BYTES = 64 * 2**20  # leaves kept at most (200,000 rows: 160 trees of uint16 leaves)
NICE = 19  # the walker's thread: the lowest priority, idle CPU only


class LeafWalks:
    """Each tree of ``trees`` walked over ``X`` (float32, C-contiguous, as the trees read
    it) on a thread of its own, from the last one back, until :meth:`stop`, skipping the
    trees the pass took already, with at most ``budget`` bytes of leaves held at once.

    The pass never waits for the walker: :meth:`take` gives a tree's leaves when they are
    walked, else marks the tree as the pass's own (the walker skips it; a walk of it
    under way is thrown away)."""

    def __init__(
        self, trees: Sequence[BaseDecisionTree], X: NDArray[np.float32], budget: int = BUDGET_BYTES
    ) -> None:
        self.X, self.budget = X, budget
        self.given = 0  # trees whose leaves the pass took
        self._trees = list(trees)
        self._leaves: dict[int, NDArray[np.unsignedinteger[Any]]] = {}
        self._taken: set[int] = set()
        self._held = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._walk, name="leaf-walks", daemon=True)

    def start(self) -> LeafWalks:
        self._thread.start()
        return self

    def stop(self) -> None:
        """No more walks (a walk under way ends on its own, its leaves unused)."""
        self._stop.set()

    def take(self, i: int) -> NDArray[np.unsignedinteger[Any]] | None:
        """Tree ``i``'s leaves for every row of ``X``, or None: the caller walks it (it
        is then the caller's: never walked here after this)."""
        with self._lock:
            self._taken.add(i)
            leaves = self._leaves.pop(i, None)
            if leaves is not None:
                self._held -= leaves.nbytes
                self.given += 1
            return leaves

    def __len__(self) -> int:
        """Trees walked and not taken yet."""
        with self._lock:
            return len(self._leaves)

    def _walk(self) -> None:
        _lowest_priority()
        try:
            # From the last tree back: the pass takes them from the first, so the two
            # meet once and neither walks a tree the other is walking.
            for i in reversed(range(len(self._trees))):
                tree = self._trees[i]
                dtype = _leaf_dtype(tree.tree_.node_count)
                size = self.X.shape[0] * dtype.itemsize
                with self._lock:
                    if self._stop.is_set() or self._held + size > self.budget:
                        return
                    if i in self._taken:
                        continue
                leaves = tree.tree_.apply(self.X).astype(dtype)
                with self._lock:
                    if i not in self._taken and not self._stop.is_set():
                        self._leaves[i] = leaves
                        self._held += size
        except Exception:  # the pass walks what is missing itself, and raises as it would
            log.debug("leaf walks stopped", exc_info=True)


def answer_from_leaves(
    tree: BaseDecisionTree, leaves: NDArray[np.unsignedinteger[Any]], classifier: bool
) -> NDArray[np.float64]:
    """What ``tree.predict_proba(X, check_input=False)`` (``classifier``) or
    ``tree.predict(X, check_input=False)`` answers for rows whose leaves are ``leaves``:
    scikit-learn's ``Tree.predict`` (the leaves' values, reshaped), then the classes or
    the first output, as those methods take them (one output only)."""
    model = tree.tree_
    out = model.value.take(leaves, axis=0, mode="clip").reshape(len(leaves), model.max_n_classes)
    answer: NDArray[np.float64] = out[:, : tree.n_classes_] if classifier else out[:, 0]
    return answer


def walkable(trees: Sequence[Any]) -> bool:
    """Trees of one output whose answers :func:`answer_from_leaves` reads."""
    return bool(trees) and all(
        isinstance(t, BaseDecisionTree) and int(t.n_outputs_) == 1 for t in trees
    )


def _leaf_dtype(node_count: int) -> np.dtype[Any]:
    for dtype in (np.uint16, np.uint32):
        if node_count <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


def _lowest_priority() -> None:
    """This thread at ``nice`` NICE (Linux: a thread's own priority); else as it is."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
