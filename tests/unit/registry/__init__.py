"""Tests of ensembles.registry: storage, versions, jobs, crashes and concurrency."""
