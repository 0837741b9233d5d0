"""Ensemble Service: the HTTP API over the ``ensembles`` library (see app.main).

OpenMP threads that have finished a parallel region sleep instead of spinning
(``OMP_WAIT_POLICY=PASSIVE``, unless the operator set it). It is set here, before anything
loads an OpenMP runtime (scikit-learn and LightGBM each bring their own libgomp), so the
server, its training fork server and the local Dask workers all inherit it. Spinning
threads of one runtime stole the cores the other's threads needed: a 100-round LightGBM
fit of breast_cancer took 8-10 s in the service against 1.1-1.4 s with sleeping threads
(docs/performance.md, "OpenMP threads sleep when idle").
"""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
