"""The base-learner kinds, as data."""

from __future__ import annotations

from sklearn import linear_model, naive_bayes, neighbors, neural_network, svm, tree

from ensembles.catalog.groups import (
    CLASS_WEIGHT,
    MAX_FEATURES_TREE,
    NON_NEG,
    POSITIVE,
    TREE_PARAMS,
)
from ensembles.catalog.params import (
    BOOL,
    INT_LIST,
    Choice,
    Int,
    Num,
    P,
)
from ensembles.catalog.traits import Kind

BASE_KINDS: tuple[Kind, ...] = (
    Kind(
        "decision_tree",
        "base",
        "A CART decision tree.",
        {"classification": tree.DecisionTreeClassifier, "regression": tree.DecisionTreeRegressor},
        params=(
            *TREE_PARAMS,
            P("splitter", Choice("best", "random"), "best", "Split strategy."),
            P("max_features", MAX_FEATURES_TREE, None, "Features per split (null: all)."),
            CLASS_WEIGHT,
        ),
        compiled="tree",
        importances="estimator",
        explain="tree_shap",
    ),
    Kind(
        "logistic_regression",
        "base",
        "Logistic regression.",
        {"classification": linear_model.LogisticRegression},
        params=(
            P("C", POSITIVE, 1.0, "Inverse regularisation strength."),
            P("l1_ratio", Num(0, 1), 0.0, "Elastic-net mixing (0: L2, 1: L1; needs solver saga)."),
            P(
                "solver",
                Choice("lbfgs", "liblinear", "newton-cg", "newton-cholesky", "sag", "saga"),
                "lbfgs",
                "Optimiser.",
            ),
            P("max_iter", Int(1, 100_000), 100, "Iterations."),
            P("tol", POSITIVE, 1e-4, "Tolerance."),
            P("fit_intercept", BOOL, True, "Fit an intercept."),
            CLASS_WEIGHT,
        ),
        compiled="logistic",
        explain="linear",
    ),
    Kind(
        "linear_regression",
        "base",
        "Ordinary least squares.",
        {"regression": linear_model.LinearRegression},
        params=(
            P("fit_intercept", BOOL, True, "Fit an intercept."),
            P("positive", BOOL, False, "Force non-negative coefficients."),
        ),
        compiled="linear",
        explain="linear",
    ),
    Kind(
        "ridge",
        "base",
        "Ridge regression (RidgeClassifier for classification: no probabilities).",
        {"classification": linear_model.RidgeClassifier, "regression": linear_model.Ridge},
        params=(
            P("alpha", NON_NEG, 1.0, "Regularisation strength."),
            P("fit_intercept", BOOL, True, "Fit an intercept."),
            P(
                "solver",
                Choice("auto", "svd", "cholesky", "lsqr", "sparse_cg", "sag", "saga", "lbfgs"),
                "auto",
                "Solver.",
            ),
            P("tol", POSITIVE, 1e-4, "Tolerance."),
            CLASS_WEIGHT,
        ),
        compiled_by_task={"regression": "linear"},  # RidgeClassifier answers in scikit-learn
        explain="linear",
    ),
    Kind(
        "knn",
        "base",
        "k nearest neighbours.",
        {
            "classification": neighbors.KNeighborsClassifier,
            "regression": neighbors.KNeighborsRegressor,
        },
        params=(
            P("n_neighbors", Int(1, 10_000), 5, "Neighbours consulted."),
            P("weights", Choice("uniform", "distance"), "uniform", "Neighbour weighting."),
            P(
                "algorithm",
                Choice("auto", "ball_tree", "kd_tree", "brute"),
                "auto",
                "Search structure.",
            ),
            P("leaf_size", Int(1, 10_000), 30, "Leaf size of the search tree."),
            P("p", Num(0, lo_open=True), 2, "Minkowski power."),
            P(
                "metric",
                Choice("minkowski", "euclidean", "manhattan", "chebyshev", "cosine"),
                "minkowski",
                "Distance.",
            ),
        ),
        rows_param="n_neighbors",
    ),
    Kind(
        "svm",
        "base",
        "Support vector machine (SVC / SVR); probability=true calibrates it (Platt, 5 folds).",
        {"classification": svm.SVC, "regression": svm.SVR},
        params=(
            P("C", POSITIVE, 1.0, "Regularisation (inverse)."),
            P("kernel", Choice("linear", "poly", "rbf", "sigmoid"), "rbf", "Kernel."),
            P("degree", Int(0, 20), 3, "Degree of the poly kernel."),
            P("gamma", (Choice("scale", "auto"), NON_NEG), "scale", "Kernel coefficient."),
            P("coef0", Num(), 0.0, "Independent term of poly/sigmoid kernels."),
            P("tol", POSITIVE, 1e-3, "Tolerance."),
            P("shrinking", BOOL, True, "Shrinking heuristic."),
            P("max_iter", Int(-1), -1, "Iteration cap (-1: none)."),
            P("epsilon", NON_NEG, 0.1, "Epsilon tube.", tasks=("regression",)),
            P("probability", BOOL, False, "Calibrated probabilities.", tasks=("classification",)),
            CLASS_WEIGHT,
        ),
        calibrate_param="probability",
        continuous=True,
    ),
    Kind(
        "gaussian_nb",
        "base",
        "Gaussian naive Bayes.",
        {"classification": naive_bayes.GaussianNB},
        params=(P("var_smoothing", NON_NEG, 1e-9, "Variance added for stability."),),
        compiled="naive_bayes",
    ),
    Kind(
        "mlp",
        "base",
        "Multi-layer perceptron.",
        {
            "classification": neural_network.MLPClassifier,
            "regression": neural_network.MLPRegressor,
        },
        params=(
            P("hidden_layer_sizes", INT_LIST, [100], "Units per hidden layer."),
            P("activation", Choice("identity", "logistic", "tanh", "relu"), "relu", "Activation."),
            P("solver", Choice("lbfgs", "sgd", "adam"), "adam", "Optimiser."),
            P("alpha", NON_NEG, 1e-4, "L2 penalty."),
            P("batch_size", (Choice("auto"), Int(1)), "auto", "Minibatch size."),
            P(
                "learning_rate",
                Choice("constant", "invscaling", "adaptive"),
                "constant",
                "Schedule.",
            ),
            P("learning_rate_init", POSITIVE, 1e-3, "Initial learning rate."),
            P("max_iter", Int(1, 100_000), 200, "Epochs."),
            P("tol", POSITIVE, 1e-4, "Tolerance."),
            P("early_stopping", BOOL, False, "Stop on a validation split."),
            P(
                "validation_fraction",
                Num(0, 1, lo_open=True, hi_open=True),
                0.1,
                "Validation share.",
            ),
            P("n_iter_no_change", Int(1), 10, "Patience."),
            P("momentum", Num(0, 1), 0.9, "SGD momentum."),
            P("shuffle", BOOL, True, "Shuffle each epoch."),
        ),
        tuple_params=frozenset({"hidden_layer_sizes"}),
        continuous=True,
    ),
)
