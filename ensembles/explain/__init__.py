"""Explanations: per-row contributions of each input column to a fitted model's output,
exact where mathematics allows (docs/explanations.md).

:mod:`~ensembles.explain.attribution` is the additive result every method returns;
:mod:`~ensembles.explain.methods` walks a fitted model by its kind's ``explain`` trait
(:mod:`~ensembles.explain.trees`, :mod:`~ensembles.explain.combined`,
:mod:`~ensembles.explain.linear`, :mod:`~ensembles.explain.permutation`,
:mod:`~ensembles.explain.native` for the boosting libraries);
:mod:`~ensembles.explain.explanation` turns a pipeline and checked rows into the API's
document, and :mod:`~ensembles.explain.summary` the training block.

Nothing is imported here, so a kind's module can import a method from this package
without importing the catalog back.
"""
