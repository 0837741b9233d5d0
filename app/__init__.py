"""Ensemble Service: the HTTP API over the ``ensembles`` library (see app.main)."""

__version__ = "0.1.0"
