"""Scheduling training jobs: the runner (:mod:`app.jobs.runner`), where jobs run
(:mod:`app.jobs.executors`: local processes, or a Dask cluster with
:mod:`app.jobs.cluster`) and the worker process shim (:mod:`app.jobs.worker`).

The job itself, from its document to a published version, is the library's
(:mod:`ensembles.jobs`). Nothing is imported here, so the worker processes and the Dask
workers that import :mod:`app.jobs.worker` or :mod:`app.jobs.cluster` load only those.
"""
