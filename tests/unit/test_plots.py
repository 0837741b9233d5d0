"""Every plot draws exactly the version's stored numbers: the data read back from the
matplotlib artists equals the metrics JSON. Real trained versions where the service makes
the data today; documents shaped as API.md describes them (``curves``, ``diversity``,
``ambiguity``, ``selection``) where another part of training fills them in."""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from html import escape
from typing import Any, Literal
from xml.etree import ElementTree

import matplotlib
import numpy as np
import pytest
from matplotlib.collections import PathCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.text import Text

from app.pages.accept import choose
from ensembles.plots import PLOTS, absence, plot_data, plots_of
from ensembles.plots.render import CACHE, PlotCache, draw, figure, inline, render
from ensembles.plots.versions import comparison, rows
from ensembles.registry.documents import VersionMetadata
from ensembles.specs import EvaluationSpec, parse_estimator_spec
from ensembles.training import train
from ensembles.validation import resolve_ensemble
from tests.unit.datasets import training_data

EVALUATION = EvaluationSpec(holdout_fraction=0.2, cv_folds=0)


@cache
def trained(dataset: str, kind: str, **params: Any) -> dict[str, Any]:
    """A version document as the API serves it (the fields plots read)."""
    raw: dict[str, Any] = {"kind": kind, "params": params}
    if kind == "voting":
        linear = "ridge" if dataset == "diabetes" else "logistic_regression"
        raw["estimators"] = [
            {"name": "lin", "kind": linear},
            {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
        ]
    data = training_data(dataset)
    fitted = train(data, resolve_ensemble(parse_estimator_spec(raw), data.task), EVALUATION, 3)
    return {
        "model": "m",
        "version": 1,
        "task": data.task,
        "kind": kind,
        "classes": [str(c) for c in fitted.signature.classes or []] or None,
        "metrics": fitted.metrics.model_dump(mode="json", exclude_unset=True),
        "feature_importances": fitted.feature_importances,
    }


def _lines(fig: Figure) -> list[Line2D]:
    return [line for ax in fig.axes for line in ax.get_lines() if line.get_label()[0] != "_"]


def _draw(name: str, view: dict[str, Any]) -> Figure:
    fig = figure(name, view)
    fig.canvas.draw()  # the figure renders (labels laid out) without error
    return fig


def _labelled(fig: Figure) -> None:
    """Every panel says what its axes are."""
    for ax in fig.axes:
        if ax.get_label() == "<colorbar>":
            continue
        assert ax.get_xlabel() or ax.get_xticklabels(), ax
        assert ax.get_ylabel() or ax.get_yticklabels(), ax


def test_the_oob_curve_is_the_stored_curve() -> None:
    view = trained("wine", "random_forest", n_estimators=60)
    points = view["metrics"]["curve"]["points"]
    fig = _draw("oob_curve", view)
    (line,) = _lines(fig)
    assert line.get_xdata().tolist() == [p["n_estimators"] for p in points]
    assert line.get_ydata().tolist() == [p["score"] for p in points]
    assert fig.axes[0].get_ylabel() == "accuracy (out of bag)"
    assert fig.axes[0].get_xlabel() == "members"
    assert fig.axes[0].get_title() == "Accuracy (out of bag)"


def test_a_boosting_curve_is_the_staged_hold_out_curve() -> None:
    view = trained("diabetes", "gradient_boosting", n_estimators=15)
    points = view["metrics"]["curve"]["points"]
    (line,) = _lines(_draw("oob_curve", view))
    assert line.get_ydata().tolist() == [p["score"] for p in points]
    assert view["metrics"]["curve"]["basis"] == "holdout"


def test_curves_of_v1_1_are_preferred_and_split_by_name() -> None:
    view = trained("wine", "random_forest", n_estimators=20)
    curves = [
        {"name": "oob", "x_label": "members", "x": [1, 2, 3], "y_label": "oob error",
         "y": [0.3, 0.2, None]},
        {"name": "e(k)", "x_label": "members", "x": [1, 2], "y_label": "oob error",
         "y": [0.4, 0.25]},
        {"name": "selection", "x_label": "step", "x": [1, 2, 3, 4], "y_label": "oof accuracy",
         "y": [0.8, 0.85, 0.9, 0.9]},
    ]  # fmt: skip
    view = {**view, "metrics": {**view["metrics"], "curves": curves}}
    lines = _lines(_draw("oob_curve", view))
    assert [line.get_label() for line in lines] == ["oob", "e(k)"]
    for line, curve in zip(lines, curves, strict=False):
        assert line.get_xdata().tolist() == curve["x"]
        y = [np.nan if v is None else v for v in curve["y"]]
        np.testing.assert_array_equal(line.get_ydata(), y)
    assert "selection_curve" in plots_of(view)
    (selection,) = _lines(_draw("selection_curve", view))
    assert selection.get_ydata().tolist() == curves[2]["y"]
    assert selection.axes is not None and selection.axes.get_xlabel() == "step"


def test_named_members_beside_the_ensemble() -> None:
    view = trained("diabetes", "voting")
    metrics = view["metrics"]
    fig = _draw("members", view)
    member, ensemble = _lines(fig)[:2]
    expected = [e["holdout"]["r2"] for e in metrics["estimators"]]
    assert member.get_xdata().tolist() == expected
    assert ensemble.get_xdata().tolist() == [metrics["holdout"]["r2"]]
    ticks = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert ticks == ["lin", "tree", "ensemble"]
    assert fig.axes[0].get_xlabel() == "r2 on hold-out rows"
    gain = metrics["holdout"]["r2"] - max(expected)
    assert f"{gain:+.3f} over the best member" in fig.axes[0].get_title()


def test_a_forest_s_members_as_min_mean_max() -> None:
    view = trained("wine", "random_forest", n_estimators=30)
    spread = view["metrics"]["estimators"][0]["holdout"]["accuracy"]
    fig = _draw("members", view)
    (bar,) = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    data_line = bar.lines[0]
    assert data_line is not None
    assert data_line.get_xdata().tolist() == [spread["mean"]]
    gain = view["metrics"]["holdout"]["accuracy"] - spread["mean"]
    assert f"{gain:+.3f} over the mean member" in fig.axes[0].get_title()
    segments = bar.lines[2][0].get_segments()
    assert [segments[0][0][0], segments[0][1][0]] == pytest.approx([spread["min"], spread["max"]])


def test_the_confusion_matrix_is_the_hold_out_one() -> None:
    view = trained("wine", "random_forest", n_estimators=10)
    fig = _draw("confusion_matrix", view)
    (image,) = [a for a in fig.axes[0].get_children() if isinstance(a, AxesImage)]
    stored = view["metrics"]["holdout"]["confusion_matrix"]
    assert np.asarray(image.get_array()).tolist() == stored
    texts = [int(t.get_text()) for t in fig.axes[0].texts]
    assert texts == [v for row in stored for v in row]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == view["classes"]
    _labelled(fig)


def test_regression_pairs_are_stored_and_drawn() -> None:
    view = trained("diabetes", "random_forest", n_estimators=10)
    pairs = view["metrics"]["predicted_vs_actual"]
    assert pairs["evaluated_on"] == "holdout" and pairs["n"] == len(pairs["actual"]) == 89
    scatter = _draw("predicted_vs_actual", view).axes[0].collections[0]
    assert isinstance(scatter, PathCollection)
    offsets = np.asarray(scatter.get_offsets())
    assert offsets[:, 0].tolist() == pairs["actual"]
    assert offsets[:, 1].tolist() == pairs["predicted"]
    fig = _draw("residuals", view)
    offsets = np.asarray(fig.axes[0].collections[0].get_offsets())
    assert offsets[:, 0].tolist() == pairs["predicted"]
    residuals = [a - p for a, p in zip(pairs["actual"], pairs["predicted"], strict=True)]
    assert offsets[:, 1].tolist() == residuals
    heights = sum(p.get_height() for p in fig.axes[1].patches)
    assert heights == len(residuals)  # the histogram counts every pair once
    _labelled(fig)


def test_feature_importances_most_important_first() -> None:
    view = trained("breast_cancer", "random_forest", n_estimators=10)
    stored = view["feature_importances"]
    fig = _draw("feature_importances", view)
    (bars,) = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    ranked = sorted(stored.items(), key=lambda kv: -kv[1])[:25]
    assert [p.get_width() for p in bars.patches] == [v for _, v in ranked]
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [k for k, _ in ranked]
    assert "top 25 of 30" in fig.axes[0].get_title()


def test_diversity_of_a_classifier() -> None:
    view = trained("wine", "random_forest", n_estimators=10)
    matrix = [[0.0, 0.2, 0.1], [0.2, 0.0, 0.3], [0.1, 0.3, 0.0]]
    diversity = {
        "evaluated_on": "holdout",
        "pairwise": {"disagreement": 0.2, "q_statistic": 0.7, "correlation": 0.4,
                     "double_fault": 0.05, "kappa": 0.5},
        "matrices": {"disagreement": matrix, "members": ["a", "b", "c"]},
        "entropy": 0.3,
    }  # fmt: skip
    view = {**view, "metrics": {**view["metrics"], "diversity": diversity}}
    assert "diversity" in plots_of(view)
    fig = _draw("diversity", view)
    (bars,) = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert [p.get_height() for p in bars.patches] == list(diversity["pairwise"].values())
    (image,) = [a for a in fig.axes[1].get_children() if isinstance(a, AxesImage)]
    assert np.asarray(image.get_array()).tolist() == matrix
    assert [t.get_text() for t in fig.axes[1].get_yticklabels()] == ["a", "b", "c"]


def test_ambiguity_of_a_regressor() -> None:
    view = trained("diabetes", "voting")
    ambiguity = {"evaluated_on": "holdout", "ensemble_mse": 2900.0,
                 "mean_member_mse": 3100.0, "ambiguity": 200.0}  # fmt: skip
    view = {**view, "metrics": {**view["metrics"], "ambiguity": ambiguity}}
    fig = _draw("diversity", view)
    (bars,) = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert [p.get_height() for p in bars.patches] == [2900.0, 3100.0, 200.0]


def test_bagged_selection_curves_get_a_panel_per_x_axis() -> None:
    view = trained("wine", "random_forest", n_estimators=10)
    label = "out-of-fold accuracy"
    curves = [
        {"name": "selection_bag_1", "x_label": "step", "x": [0, 1, 2], "y_label": label,
         "y": [0.8, 0.9, 0.92]},
        {"name": "selection_bag_2", "x_label": "step", "x": [0, 1, 2], "y_label": label,
         "y": [0.82, 0.88, 0.9]},
        {"name": "bagged_selection", "x_label": "bags", "x": [1, 2], "y_label": label,
         "y": [0.92, 0.93]},
    ]  # fmt: skip
    selection = {"weights": {"rf": 4, "lr": 2}}
    view = {**view, "kind": "ensemble_selection",
            "metrics": {**view["metrics"], "curves": curves, "selection": selection}}  # fmt: skip
    assert plots_of(view)[-1] == "selection_curve"
    assert absence("oob_curve", view) is not None  # metrics.curves has no curve of members
    fig = _draw("selection_curve", view)
    steps, bags, weights = fig.axes
    assert [line.get_ydata().tolist() for line in steps.get_lines()] == [
        curves[0]["y"],
        curves[1]["y"],
    ]
    assert [line.get_ydata().tolist() for line in bags.get_lines()] == [curves[2]["y"]]
    assert (steps.get_xlabel(), bags.get_xlabel()) == ("step", "bags")
    assert [p.get_height() for p in weights.patches] == [4, 2]


def test_selection_weights() -> None:
    view = trained("wine", "random_forest", n_estimators=10)
    selection = {"weights": {"rf": 3, "lr": 5, "knn": 1}, "member_oof": {"rf": 0.9}}
    view = {**view, "kind": "ensemble_selection",
            "metrics": {**view["metrics"], "selection": selection}}  # fmt: skip
    fig = _draw("selection_curve", view)
    (bars,) = [c for c in fig.axes[0].containers if isinstance(c, BarContainer)]
    assert [p.get_height() for p in bars.patches] == [5, 3, 1]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["lr", "rf", "knn"]


def test_absent_plots_say_why() -> None:
    voting = trained("diabetes", "voting")
    assert absence("oob_curve", voting) == (
        "no score curve: the ensemble neither leaves rows out of bag nor boosts in stages"
    )
    assert "regression model has no confusion matrix" in str(absence("confusion_matrix", voting))
    assert "measures no feature importances" in str(absence("feature_importances", voting))
    unmeasured = {**voting, "metrics": {k: v for k, v in voting["metrics"].items()
                                        if k not in ("diversity", "ambiguity")}}  # fmt: skip
    assert "no diversity" in str(absence("diversity", unmeasured))
    assert "only ensemble_selection" in str(absence("selection_curve", voting))
    hgb = trained("wine", "hist_gradient_boosting", max_iter=5)
    assert "members are not predictors of their own" in str(absence("members", hgb))
    old = {**voting, "metrics": {k: v for k, v in voting["metrics"].items()
                                 if k != "predicted_vs_actual"}}  # fmt: skip
    assert "trained before predicted and actual values were stored" in str(
        absence("residuals", old)
    )


def test_every_plot_of_a_version_renders_as_svg_and_png() -> None:
    for view in (trained("wine", "random_forest", n_estimators=10), trained("diabetes", "voting")):
        for name in plots_of(view):
            svg = render(name, view)
            root = ElementTree.fromstring(svg)
            assert root.get("role") == "img"
            assert render(name, view, "png").startswith(b"\x89PNG")
            assert render(name, view) == svg  # deterministic: no date, salted ids


def test_an_unknown_plot_names_the_plots_the_version_has() -> None:
    view = trained("wine", "random_forest", n_estimators=10)
    with pytest.raises(Exception, match="its plots: oob_curve, members") as raised:
        plot_data("pie", view)
    assert getattr(raised.value, "code", None) == "not_found"
    assert set(PLOTS) >= set(plots_of(view))


def test_inlined_svgs_share_no_id() -> None:
    view = trained("wine", "random_forest", n_estimators=10)
    first = inline(render("oob_curve", view), "a")
    second = inline(render("oob_curve", view), "b")
    assert "<?xml" not in first and "<!DOCTYPE" not in first
    ids_a = set(re.findall(r'\bid="([^"]+)"', first))
    assert ids_a and not ids_a & set(re.findall(r'\bid="([^"]+)"', second))
    for ref in re.findall(r"url\(#([^)]+)\)", first):
        assert ref in ids_a


def test_the_versions_comparison_draws_each_version_s_scores() -> None:
    one = {**trained("wine", "random_forest", n_estimators=5), "aliases": ["production"]}
    two = {**trained("wine", "random_forest", n_estimators=40), "version": 2, "aliases": []}
    fig = comparison([two, one])
    lines = {line.get_label(): line.get_ydata().tolist() for line in _lines(fig)}
    assert lines["hold-out rows"] == [v["metrics"]["holdout"]["accuracy"] for v in (one, two)]
    assert lines["out-of-bag rows"] == [v["metrics"]["oob"]["accuracy"] for v in (one, two)]
    assert [t.get_text() for t in fig.axes[0].texts] == ["production"]
    table = {(r.basis, r.metric): r for r in rows([two, one])}
    log_loss = table[("holdout", "log_loss")]
    assert log_loss.best == {int(np.argmin(log_loss.values))}
    ties = rows([{**one, "metrics": {"train": {"accuracy": 1.0}}},
                 {**two, "metrics": {"train": {"accuracy": 1.0}}}])  # fmt: skip
    assert ties[0].best == frozenset()


def test_a_stored_version_document_round_trips_the_new_metric() -> None:
    view = trained("diabetes", "voting")
    metadata = {
        "task": "regression", "kind": "voting", "spec": {}, "target": "y", "features": [],
        "classes": None, "feature_importances": None, "training": {}, "artifact": {},
        "dataset": {"id": "ds", "sha256": "0", "n_rows": 1}, "metrics": view["metrics"],
    }  # fmt: skip
    stored = VersionMetadata.model_validate(metadata).to_json()
    assert stored["metrics"]["predicted_vs_actual"] == view["metrics"]["predicted_vs_actual"]


@pytest.mark.parametrize(
    ("header", "chosen"),
    [
        (None, "image/svg+xml"),
        ("", "image/svg+xml"),
        ("image/png", "image/png"),
        ("image/*;q=0.5, image/png", "image/png"),
        ("image/svg+xml;q=0.4, image/png;q=0.9", "image/png"),
        ("*/*;q=0.1, image/png;q=0", "image/svg+xml"),
        ("application/json", None),
        ("image/png;q=0", None),
        ("IMAGE/PNG", "image/png"),
    ],
)
def test_accept_negotiation(header: str | None, chosen: str | None) -> None:
    assert choose(header, ["image/svg+xml", "image/png"]) == chosen


def test_names_from_the_user_stay_text_in_the_svg() -> None:
    """Class labels, feature and model names are the user's strings: escaped, never markup."""
    hostile = "<script>alert(1)</script>"
    view = {
        "model": "m", "version": 1, "task": "classification", "kind": "random_forest",
        "classes": [hostile, "b&c"],
        "metrics": {"holdout": {"confusion_matrix": [[1, 0], [0, 1]]}},
        "feature_importances": {"<img src=x onerror=alert(1)>": 1.0},
    }  # fmt: skip
    for name in ("confusion_matrix", "feature_importances"):
        svg = render(name, view).decode()
        assert "<script" not in svg and "<img" not in svg
        ElementTree.fromstring(svg)  # still well-formed XML
    assert "&lt;script&gt;" in render("confusion_matrix", view).decode()


HOSTILE_TEXT = ["$x^$", "$\\frac{1}{$", "a$b", "$\\undefinedcommand$"]


def _every_plot_with(texts: list[str]) -> dict[str, Any]:
    """A classification document whose every user string (classes, columns, members,
    curve names) is one of ``texts``: each plot the catalog has draws some of them."""
    curves = [
        {"name": texts[0], "x_label": "members", "x": [1, 2], "y_label": "oob error",
         "y": [0.3, 0.2]},
        {"name": texts[1], "x_label": "members", "x": [1, 2], "y_label": "oob error",
         "y": [0.4, 0.3]},
        {"name": "selection", "x_label": "step", "x": [1, 2], "y_label": texts[3],
         "y": [0.8, 0.9]},
    ]  # fmt: skip
    pairwise = {"disagreement": 0.2, "q_statistic": 0.5}
    return {
        "model": "m", "version": 1, "task": "classification", "kind": "ensemble_selection",
        "classes": texts[:3],
        "metrics": {
            "holdout": {"accuracy": 0.9, "confusion_matrix": [[3, 1, 0], [0, 4, 0], [1, 0, 2]]},
            "curves": curves,
            "estimators": [{"name": t, "holdout": {"accuracy": 0.8}} for t in texts],
            "diversity": {"evaluated_on": "holdout", "pairwise": pairwise,
                          "matrices": {"members": texts[:2],
                                       "disagreement": [[0.0, 0.2], [0.2, 0.0]]}},
            "selection": {"weights": {t: i + 1 for i, t in enumerate(texts)}},
        },
        "feature_importances": dict.fromkeys(texts, 0.25),
    }  # fmt: skip


@pytest.mark.parametrize("fmt", ["svg", "png"])
def test_dollar_signs_in_user_text_are_drawn_as_written(fmt: Literal["svg", "png"]) -> None:
    view = _every_plot_with(HOSTILE_TEXT)
    assert plots_of(view) == [
        "oob_curve", "members", "confusion_matrix", "feature_importances", "diversity",
        "selection_curve",
    ]  # fmt: skip
    for name in plots_of(view):
        image = render(name, view, fmt)
        if fmt == "svg":
            text = image.decode()
            drawn = [t for t in HOSTILE_TEXT if escape(t, quote=False) in text]
            assert drawn, (name, "no user text drawn")
        else:
            assert image.startswith(b"\x89PNG")
    fig = figure("feature_importances", view)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == HOSTILE_TEXT
    assert not any(t.get_parse_math() for t in fig.findobj(Text))


def test_the_versions_comparison_draws_aliases_as_written() -> None:
    one = {**trained("wine", "random_forest", n_estimators=5), "aliases": ["$x^$"]}
    svg = draw(lambda: comparison([one]), "$\\frac{1}{$").decode()
    assert "$x^$" in svg


def test_a_thousand_classes_are_drawn_as_twenty() -> None:
    """19 classes with the most rows, and one summing the other 981: the work and the
    picture are bounded, and the sums are the stored ones."""
    k = 1000
    matrix = np.zeros((k, k), dtype=int)
    np.fill_diagonal(matrix, 2)
    matrix[np.arange(k), (np.arange(k) + 1) % k] = 1
    matrix[500:519, 500:519] += 3  # classes 500..518 have the most rows
    classes = [f"class {i}" for i in range(k)]
    metrics = {"train": {"confusion_matrix": matrix.tolist()}}
    view = {"model": "m", "version": 1, "task": "classification", "kind": "random_forest",
            "classes": classes, "metrics": metrics}  # fmt: skip
    fig = figure("confusion_matrix", view)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == [*classes[500:519], "981 other classes"]
    assert [t.get_text() for t in ax.get_yticklabels()] == labels
    (image,) = [a for a in ax.get_children() if isinstance(a, AxesImage)]
    drawn = np.asarray(image.get_array())
    assert drawn.shape == (20, 20) and len(ax.texts) == 400
    assert drawn.sum() == matrix.sum()
    assert drawn[:-1, :-1].tolist() == matrix[500:519, 500:519].tolist()
    assert drawn[-1, -1] == matrix.sum() - matrix[500:519].sum() - matrix[:, 500:519].sum() + (
        matrix[500:519, 500:519].sum()
    )
    assert "the 19 classes with the most rows of 1,000" in ax.get_title()
    assert "the other 981 summed" in ax.get_title()


def test_members_who_always_agree_read_as_zero_on_a_fixed_scale() -> None:
    view = trained("wine", "random_forest", n_estimators=10)
    diversity = {
        "evaluated_on": "holdout",
        "pairwise": {"disagreement": 0.0, "q_statistic": 1.0, "correlation": None,
                     "double_fault": 0.1, "kappa": 1.0},
        "matrices": {"members": ["a", "b"], "disagreement": [[0.0, 0.0], [0.0, 0.0]],
                     "kappa": [[1.0, 1.0], [1.0, 1.0]]},
    }  # fmt: skip
    view = {**view, "metrics": {**view["metrics"], "diversity": diversity}}
    bars_ax, matrix_ax = _draw("diversity", view).axes[:2]
    (image,) = [a for a in matrix_ax.get_children() if isinstance(a, AxesImage)]
    assert image.get_clim() == (0.0, 1.0)
    assert [t.get_text() for t in matrix_ax.texts] == ["0.00"] * 4
    legend = bars_ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == [
        "higher: members more diverse",
        "higher: members more alike",
    ]
    hatches = [p.get_hatch() or "" for p in bars_ax.patches]
    assert hatches == ["", "//", "//", "//", "//"]  # only disagreement grows with diversity
    kappa = {**diversity, "matrices": {k: v for k, v in diversity["matrices"].items()
                                       if k != "disagreement"}}  # fmt: skip
    view = {**view, "metrics": {**view["metrics"], "diversity": kappa}}
    matrix_ax = _draw("diversity", view).axes[1]
    (image,) = [a for a in matrix_ax.get_children() if isinstance(a, AxesImage)]
    assert image.get_clim() == (-1.0, 1.0)


def _stored(view: dict[str, Any], created_at: str) -> dict[str, Any]:
    return {**view, "created_at": created_at, "artifact": {"sha256": "a" * 64},
            "dataset": {"sha256": "d" * 64}}  # fmt: skip


def test_a_stored_version_s_plot_is_drawn_once_per_format() -> None:
    view = _stored(trained("wine", "random_forest", n_estimators=10), "2026-11-25T10:00:00Z")
    renders, hits = CACHE.renders, CACHE.hits
    first = render("members", view)
    assert render("members", view) is first
    assert (CACHE.renders, CACHE.hits) == (renders + 1, hits + 1)
    assert render("members", view, "png").startswith(b"\x89PNG")
    assert CACHE.renders == renders + 2
    again = _stored(view, "2026-11-25T10:00:01Z")  # deleted and trained again: new content
    render("members", again)
    assert CACHE.renders == renders + 3
    unstored = trained("wine", "random_forest", n_estimators=10)  # no identity: never kept
    assert render("members", unstored) is not render("members", unstored)
    assert CACHE.renders == renders + 3


def test_the_plot_cache_drops_the_least_recently_used() -> None:
    cache = PlotCache(max_bytes=10)
    made: list[str] = []

    def make(key: str) -> Callable[[], bytes]:
        return lambda: made.append(key) or key.encode() * 4

    for key in ("a", "b", "a", "c", "a", "b"):
        cache.get(key, make(key))
    assert made == ["a", "b", "c", "b"]  # "b" was dropped for "c"; "a" was used since
    assert cache.get("huge", lambda: b"x" * 11) == b"x" * 11  # too big to keep, still served
    assert cache.get("a", make("a")) == b"aaaa" and made[-1] == "b"


def test_figures_drawn_at_once_look_as_drawn_alone() -> None:
    """Drawings share matplotlib's process-wide settings: concurrent ones keep the style."""
    view = trained("wine", "random_forest", n_estimators=10)
    alone = {name: render(name, view) for name in plots_of(view)}
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda name: render(name, view), [*alone, *alone]))
    assert together == [*alone.values(), *alone.values()]
    assert matplotlib.rcParams["text.parse_math"] is True  # the process's settings are back
