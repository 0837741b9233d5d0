"""A training job's engine verdict, worked out beside the measuring.

The verdict (:func:`ensembles.inference.inference_verdict`: compile the fitted model,
check it against scikit-learn on the training rows and probes, calibrate the crossover)
needs the fitted pipeline and its training rows only, none of the figures.  Run after
``train()`` it was ~2 s of a 500-round LightGBM job's ~15 s, on the critical path.  So
the job hands :meth:`EngineVerdict.start` to ``train()`` as its ``on_fitted``: compiling
and checking run on a thread of their own while the figures are measured (treelite's
import, GTIL, LightGBM's and scikit-learn's predictions and numpy's arithmetic release
the GIL, so the two share the cores), and ``train()`` waits for them before it gives
the estimator back its stored threads.  A LightGBM model is final when its fit returns:
the check starts then, beside the reading and checking of the answers LightGBM kept on
its rows (:mod:`ensembles.kinds.lightgbm_scores`: its leaf values, a sample of rows
asked again), which ran on one core before the check began.  The calibration times the
engines: it runs after ``train()``, with nothing beside it and the estimator as it is
served (one thread), as it always did.

One part waits for the explanation summary: for a model of scikit-learn's trees the summary
is shap's TreeSHAP, which holds the GIL on one core for seconds (a 100-tree forest on
50,000 rows: ~1.9 s, after ~1.0 s of figures on both cores).  Checked from the start, the
whole check ran beside the figures, and the explanation ran alone with the other core
idle.  So for such a model the check does its own preparation and scikit-learn's side
beside the figures, and holds GTIL's answers (a native call without the GIL, ~1.2 s of
CPU for that forest) until ``train()`` begins the summary (:meth:`EngineVerdict.explaining`,
``train()``'s ``on_explaining``): GTIL then takes the core the summary leaves.  Other models
(the boosting libraries explain with their own threaded code) check at once, as before.
A forest is explained before its figures (``train()``: its trees' leaves are walked beside
the summary, :mod:`ensembles.leaf_walks`); scikit-learn's side of its check, which needs
the GIL for every tree, then waits for the figures (:meth:`EngineVerdict.measuring`,
``train()``'s ``on_measuring``) instead of taking turns with TreeSHAP for the GIL, which
slowed the summary (~0.2 s on a quiet machine, ~0.5 s on a busy one).

A LightGBM fit keeps its answers on its training rows (read and checked while the check
imports the model): :meth:`EngineVerdict.answered` (``train()``'s ``on_answers``) hands
them to the check, whose LightGBM side then asks the library for the probe rows only
(:mod:`ensembles.inference.fitted_rows`: the same numbers on the same rows).

The verdict is the one the job made in turn (the same compiled engine, the same check on
the same rows in the same order, the same decision); only its seconds differ.  LightGBM's
predictions on one booster must not run beside each other (:func:`_with_own_lightgbm`):
a LightGBM model is checked on a copy of its own; a composite holding LightGBM members,
whose figures ask each member, is checked in the wait, after the figures, as it was
before the check ran beside them.  A failure
in it is raised where the verdict was computed before (after ``train()``'s own errors);
a cancel while waiting for it ends the job at once: the thread is left to finish on its
own (a daemon: a worker process exits without it).
"""

from __future__ import annotations

import copy
import pickle
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from sklearn.base import BaseEstimator
from sklearn.pipeline import Pipeline

from ensembles.errors import TrainingCancelledError
from ensembles.explain.summary import holds_the_gil
from ensembles.inference.compiled import CompiledModel
from ensembles.inference.compiling import Compiled, calibrated, compile_model, verdict_of
from ensembles.inference.fidelity import FidelityReport
from ensembles.inference.gtil import compiled_as
from ensembles.tasks import Task
from ensembles.training_run import CancelToken

__all__ = ["CANCEL_POLL_S", "EngineVerdict"]

CANCEL_POLL_S = 0.1  # how often a wait for the check reads the cancel token
MAX_DEPTH = 16  # object levels searched for a LightGBM member (specs nest a few deep)


class EngineVerdict:
    """One job's verdict: :meth:`start` (``train()``'s ``on_fitted``) checks on a thread,
    :meth:`explaining` (``train()``'s ``on_explaining``) lets a check that waits for the
    explanation summary go on, :meth:`measuring` (``train()``'s ``on_measuring``) lets
    its scikit-learn side go on, :meth:`answered` (``train()``'s ``on_answers``) gives it
    the fit's own answers on the training rows, :meth:`result` calibrates and gives the
    version's ``inference`` metadata.

    ``on_checked`` (tests): called on the check's thread once it is done."""

    def __init__(
        self,
        task: Task,
        random_state: int,
        threads: int,
        cancel: CancelToken | None = None,
        on_checked: Callable[[], None] | None = None,
    ) -> None:
        self.task, self.random_state, self.threads = task, random_state, threads
        self.cancel, self.on_checked = cancel, on_checked
        self._done = threading.Event()
        self._explaining = threading.Event()
        self._measuring = threading.Event()
        self._thread: threading.Thread | None = None
        self._X_train: pd.DataFrame | None = None
        self._checked: tuple[Compiled | None, FidelityReport] | None = None
        self._error: BaseException | None = None
        self._answers: NDArray[np.float64] | None = None

    def start(self, pipeline: Pipeline, X_train: pd.DataFrame) -> Callable[[], None]:
        """Compile and check ``pipeline`` on a thread; answers the wait for it (a
        composite with LightGBM members: the thread starts in the wait, see the module)."""
        self._X_train = X_train
        self._thread = threading.Thread(
            target=self._check, args=(pipeline, X_train), name="engine-verdict", daemon=True
        )
        if not _lightgbm_within(pipeline[-1]) or _is_lightgbm(pipeline[-1]):
            self._thread.start()
        return self.wait

    def _check(self, pipeline: Pipeline, X_train: pd.DataFrame) -> None:
        gil = holds_the_gil(pipeline)
        try:
            checked = _with_own_lightgbm(pipeline)
            compiled, report = compile_model(
                checked,
                self.task,
                X_train,
                self.random_state,
                calibrate=False,
                threads=self.threads,
                before_compiled=self._until_explaining if gil else None,
                known=self._known,
                before_own=self._until_measuring if gil else None,
            )
            if isinstance(compiled, CompiledModel) and checked is not pipeline:
                compiled = replace(compiled, pipeline=pipeline)  # calibrated as served
            self._checked = compiled, report
        except BaseException as exc:  # raised by result(), in the job's thread
            self._error = exc
        finally:
            self._done.set()
            if self.on_checked is not None:
                self.on_checked()

    def answered(self, train: NDArray[np.float64] | None) -> None:
        """The fit's own answers on its training rows (``FitAnswers.train``), or None."""
        self._answers = train

    def _known(self) -> NDArray[np.float64] | None:
        """The fit's answers if they were handed over by now (the check never waits)."""
        return self._answers

    def explaining(self) -> None:
        """The explanation summary begins (or will not run): GTIL may answer the check."""
        self._explaining.set()

    def measuring(self) -> None:
        """The figures are measured from now (a forest explained first: the summary is
        over): scikit-learn's side of the check may answer."""
        self._measuring.set()

    def _until_explaining(self) -> None:
        """Hold the check's GTIL answers until :meth:`explaining`, reading the cancel
        token every CANCEL_POLL_S: TrainingCancelledError when it is set."""
        self._until(self._explaining)

    def _until_measuring(self) -> None:
        """Hold scikit-learn's side of the check until :meth:`measuring` (or the wait
        for the check), reading the cancel token as :meth:`_until_explaining`."""
        self._until(self._measuring)

    def _until(self, event: threading.Event) -> None:
        while not event.wait(CANCEL_POLL_S):
            if self.cancel is not None and self.cancel.is_set():
                raise TrainingCancelledError("training was cancelled")

    def wait(self) -> None:
        """Return once the check is done (it no longer reads the pipeline), reading the
        cancel token every CANCEL_POLL_S: TrainingCancelledError when it is set.  A check
        held for the summary goes on: nothing runs beside it any more."""
        if self._thread is None:
            raise RuntimeError("the verdict was never started")
        if self._thread.ident is None:  # held until the figures are measured (start)
            self._thread.start()
        self.explaining()
        self.measuring()
        while not self._done.wait(CANCEL_POLL_S):
            if self.cancel is not None and self.cancel.is_set():
                raise TrainingCancelledError("training was cancelled")

    def result(self) -> dict[str, Any]:
        """The version's ``inference`` metadata, calibrated now (call it once ``train()``
        has returned: the estimator is then as it is served); what the check raised, if
        it did."""
        self.wait()
        if self._error is not None:
            raise self._error
        assert self._checked is not None and self._X_train is not None
        compiled, report = self._checked
        return verdict_of(calibrated(compiled, report, self._X_train)[1])


def _is_lightgbm(estimator: Any) -> bool:
    return isinstance(estimator, BaseEstimator) and compiled_as(estimator) == "lightgbm"


def _lightgbm_within(estimator: Any, depth: int = 0) -> bool:
    """Is ``estimator`` a LightGBM model or does one of its members (fitted or not, to
    any depth a spec nests) hold one?"""
    if _is_lightgbm(estimator):
        return True
    if depth > MAX_DEPTH or not isinstance(estimator, BaseEstimator):
        return False
    for value in vars(estimator).values():
        items = value.values() if isinstance(value, dict) else value
        for item in items if isinstance(items, list | tuple) else (items,):
            member = item[-1] if isinstance(item, tuple) and item else item
            if isinstance(member, BaseEstimator) and _lightgbm_within(member, depth + 1):
                return True
    return False


def _with_own_lightgbm(pipeline: Pipeline) -> Pipeline:
    """``pipeline`` with a LightGBM ensemble step of its own, for the check.

    LightGBM's predictions on one booster are not safe beside each other: each sets the
    booster's iteration range (``InitPredict``) under a shared lock, so the check's
    predictions beside the figures' staged ones (``start_iteration``/``num_iteration``
    of the curve) read a range another thread changed, and a worker died of the heap it
    corrupted (``free(): invalid pointer``, SIGABRT: ``test_library_kinds``' early-stopped
    LightGBM under load, on 710178f as well).  The check's copy is the pickle round
    trip the artifact makes (LightGBM's model text, its best iteration kept), so what
    it checks is the model as it is served."""
    if not _is_lightgbm(pipeline[-1]):
        return pipeline
    name, estimator = pipeline.steps[-1]
    own = copy.copy(pipeline)
    own.steps = [*pipeline.steps[:-1], (name, pickle.loads(pickle.dumps(estimator, protocol=5)))]
    return own
