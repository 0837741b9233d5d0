"""Why an ensemble works, measured: the science blocks of a version's metrics.

* :mod:`ensembles.science.diversity` — pairwise and non-pairwise diversity (Kuncheva &
  Whitaker 2003), the Condorcet check, the ambiguity decomposition (Krogh & Vedelsby 1995);
* :mod:`ensembles.science.outputs` — each member's outputs on rows it did not train on;
* :mod:`ensembles.science.oof` — out-of-fold scores of stacking and of cross-validated voting;
* :mod:`ensembles.science.hardest_rows` — AdaBoost's final row weights, replayed;
* :mod:`ensembles.science.bias_variance` — bias–variance decompositions over bootstrap refits;
* :mod:`ensembles.science.curves` — every member-count curve in one shape;
* :mod:`ensembles.science.measures` — what training calls, with the cost bounds.

Pure arithmetic over fitted scikit-learn objects: nothing here changes a model.
"""
