"""Orchestration between the routes and the library: transactions, shaping, caching.

Services take their collaborators as arguments (a registry, the settings, ...) and know
nothing of FastAPI; the routes get those collaborators from :mod:`app.deps`.
"""
