"""Report pages and plots over HTTP: the pages render what the version resource says,
plots negotiate SVG/PNG, unknown plots are 404s listing the version's plots, and every
page is self-contained (nothing to fetch from any host, not even this one)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from html.parser import HTMLParser
from typing import Any
from xml.etree import ElementTree

import pytest

from app.settings import Settings
from ensembles.plots.render import CACHE
from tests.api.conftest import started
from tests.api.support import Api, diabetes_frame, forest, iris_frame, locs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


async def _regression(api: Api) -> dict[str, Any]:
    dataset = await api.upload_frame(diabetes_frame(), "diabetes")
    body = {
        "dataset_id": dataset,
        "target": "progression",
        "ensemble": {
            "kind": "voting",
            "estimators": [
                {"name": "ridge", "kind": "ridge"},
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            ],
        },
        "random_state": 0,
    }
    return await api.train("diab", body)


class _Loads(HTMLParser):
    """What a browser would fetch for a page: src, href of <link>, srcset, url(...) in style."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "audio", "video", "embed"):
            self.fetched += [v for k, v in attrs if k in ("src", "srcset") and v]
        if tag == "link" and values.get("href"):
            self.fetched.append(str(values["href"]))
        if tag == "a" and values.get("href"):
            self.links.append(str(values["href"]))


def _self_contained(html: str) -> _Loads:
    """No script at all, nothing fetched but data: URLs, no url() in styles."""
    parser = _Loads()
    parser.feed(html)
    assert "<script" not in html.lower()
    assert all(url.startswith("data:") for url in parser.fetched), parser.fetched
    assert not re.search(r"url\((?!#)", html), "a style loads something"
    assert "@import" not in html
    return parser


@pytest.fixture
async def forest_version(api: Api) -> dict[str, Any]:
    return await api.train("iris-clf", forest(await api.iris(), 30))


async def test_a_version_lists_its_plots_and_each_is_an_svg(
    api: Api, forest_version: dict[str, Any]
) -> None:
    plots = forest_version["plots"]
    measured = ["diversity"] if forest_version["metrics"].get("diversity") else []
    assert plots == [
        "oob_curve",
        "members",
        "confusion_matrix",
        "feature_importances",
        "contributions",  # beside the impurity importances
        *measured,
    ]
    for name in plots:
        response = await api.client.get(f"/v1/models/iris-clf/versions/1/plots/{name}")
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "image/svg+xml"
        assert response.headers["vary"] == "Accept"
        root = ElementTree.fromstring(response.content)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        title = root.find("{http://www.w3.org/2000/svg}title")
        assert title is not None and "iris-clf version 1" in (title.text or "")


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        ("image/png", "image/png"),
        ("image/png, image/svg+xml;q=0.5", "image/png"),
        ("image/svg+xml", "image/svg+xml"),
        ("image/*", "image/svg+xml"),
        ("*/*", "image/svg+xml"),
        ("text/html, image/png;q=0.2", "image/png"),
    ],
)
async def test_plots_follow_accept(
    api: Api, forest_version: dict[str, Any], accept: str, media: str
) -> None:
    response = await api.client.get(
        "/v1/models/iris-clf/versions/latest/plots/members", headers={"Accept": accept}
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == media
    if media == "image/png":
        assert response.content.startswith(PNG_MAGIC)


@pytest.mark.parametrize("accept", ["application/json", "text/html", "image/png;q=0"])
async def test_an_unsupported_accept_is_406(
    api: Api, forest_version: dict[str, Any], accept: str
) -> None:
    response = await api.client.get(
        "/v1/models/iris-clf/versions/1/plots/members", headers={"Accept": accept}
    )
    assert response.status_code == 406, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "image/svg+xml or image/png" in response.json()["detail"]


async def test_an_unknown_plot_is_a_404_listing_the_plots(
    api: Api, forest_version: dict[str, Any]
) -> None:
    response = await api.client.get("/v1/models/iris-clf/versions/1/plots/nope")
    assert response.status_code == 404, response.text
    body = response.json()
    assert body["errors"] == [
        {"loc": ["path", "plot"], "msg": "one of: " + ", ".join(forest_version["plots"])}
    ]
    assert "no plot 'nope'" in body["detail"]


async def test_a_plot_the_version_lacks_is_a_404_saying_why(
    api: Api, forest_version: dict[str, Any]
) -> None:
    response = await api.client.get("/v1/models/iris-clf/versions/1/plots/residuals")
    assert response.status_code == 404
    assert "classification model has no predicted-vs-actual" in response.json()["detail"]


async def test_unknown_models_and_versions_are_404s(
    api: Api, forest_version: dict[str, Any]
) -> None:
    for path in (
        "/v1/models/nope/report",
        "/v1/models/nope/versions/1/report",
        "/v1/models/iris-clf/versions/9/report",
        "/v1/models/iris-clf/versions/staging/plots/members",
    ):
        response = await api.client.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("application/problem+json")


async def test_the_version_report_shows_the_versions_figures_and_plots(
    api: Api, forest_version: dict[str, Any]
) -> None:
    await api.client.put("/v1/models/iris-clf/aliases/production", json={"version": 1})
    response = await api.client.get("/v1/models/iris-clf/versions/production/report")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    html = response.text
    _self_contained(html)
    for name in forest_version["plots"]:
        assert f'data-plot="{name}"' in html
    assert html.count("<svg") == len(forest_version["plots"])
    # Absent plots are named with the reason.
    assert 'data-absent="residuals"' in html and "classification model has no" in html
    assert 'data-absent="selection_curve"' in html
    metrics = forest_version["metrics"]
    assert f"{metrics['holdout']['accuracy']:.4f}" in html
    assert f"{metrics['oob']['accuracy']:.4f}" in html
    assert forest_version["dataset"]["id"] in html
    assert 'class="badge alias"' in html and ">production<" in html
    # Ids of the inline SVGs do not collide.
    ids = re.findall(r'\bid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


async def test_a_regression_report_has_predicted_vs_actual_and_residuals(api: Api) -> None:
    version = await _regression(api)
    stored = version["metrics"]["predicted_vs_actual"]
    assert stored["evaluated_on"] == "holdout"
    assert stored["n"] == len(stored["actual"]) == len(stored["predicted"]) == 89
    measured = ["diversity"] if version["metrics"].get("ambiguity") else []
    assert version["plots"] == [
        "members",
        "predicted_vs_actual",
        "residuals",
        "contributions",
        *measured,
    ]
    html = (await api.client.get("/v1/models/diab/versions/1/report")).text
    _self_contained(html)
    assert 'data-absent="oob_curve"' in html
    assert "no score curve: the ensemble neither leaves rows out of bag" in html
    assert 'data-absent="feature_importances"' in html


async def test_the_model_report_puts_versions_side_by_side(api: Api) -> None:
    dataset = await api.iris()
    first = await api.train("iris-clf", forest(dataset, 5))
    second = await api.train("iris-clf", forest(dataset, 40))
    await api.client.put("/v1/models/iris-clf/aliases/production", json={"version": 1})
    response = await api.client.get("/v1/models/iris-clf/report")
    assert response.status_code == 200, response.text
    html = response.text
    parser = _self_contained(html)
    assert "/v1/models/iris-clf/versions/1/report" in parser.links
    assert "/v1/models/iris-clf/versions/2/report" in parser.links
    assert "production → v1" in html
    assert 'data-plot="versions"' in html and html.count("<svg") == 1
    for version in (first, second):
        assert f"{version['metrics']['holdout']['accuracy']:.4f}" in html
    values = [first["metrics"]["oob"]["accuracy"], second["metrics"]["oob"]["accuracy"]]
    best = f"{max(values):.4f}"
    if values[0] != values[1]:
        assert re.search(rf'class="best"[^>]*>{re.escape(best)}<', html)


async def test_the_landing_page_links_docs_models_and_reports(
    api: Api, forest_version: dict[str, Any]
) -> None:
    response = await api.client.get("/")
    assert response.status_code == 200
    parser = _self_contained(response.text)
    for link in ("/docs", "/redoc", "/openapi.json", "/v1/models/iris-clf/report"):
        assert link in parser.links
    assert "/v1/models/iris-clf/versions/1/report" in parser.links


async def test_the_landing_page_of_an_empty_service_says_how_to_start(api: Api) -> None:
    response = await api.client.get("/")
    assert response.status_code == 200
    assert "No model yet" in response.text


@pytest.fixture
async def keyed(settings_for: Callable[..., Settings]) -> AsyncIterator[Api]:
    async for _, api in started(settings_for(api_keys="r:read,a:admin")):
        yield api


async def test_reports_and_plots_need_the_read_role(keyed: Api) -> None:
    for path in (
        "/v1/models/iris-clf/report",
        "/v1/models/iris-clf/versions/1/report",
        "/v1/models/iris-clf/versions/1/plots/members",
    ):
        assert (await keyed.client.get(path)).status_code == 401, path
        with_key = await keyed.client.get(path, headers={"Authorization": "Bearer r"})
        assert with_key.status_code == 404, path  # past the guard: no such model


async def test_the_landing_page_lists_models_only_to_readers(keyed: Api) -> None:
    anonymous = await keyed.client.get("/")
    assert anonymous.status_code == 200
    assert "needs an API key with the <code>read</code> role" in anonymous.text
    reader = await keyed.client.get("/", headers={"Authorization": "Bearer r"})
    assert "No model yet" in reader.text


async def test_format_png_is_honoured_and_an_unknown_format_is_a_422(
    api: Api, forest_version: dict[str, Any]
) -> None:
    path = "/v1/models/iris-clf/versions/1/plots/members"
    png = await api.client.get(path, params={"format": "png"})
    assert png.status_code == 200, png.text
    assert png.headers["content-type"] == "image/png"
    assert png.content.startswith(PNG_MAGIC)
    svg = await api.client.get(path, params={"format": "svg"}, headers={"Accept": "image/png"})
    assert svg.headers["content-type"] == "image/svg+xml"
    ElementTree.fromstring(svg.content)
    report = (await api.client.get("/v1/models/iris-clf/versions/1/report")).text
    links = _self_contained(report).links
    assert f"{path}?format=png" in links  # an <a> cannot set Accept: the page links each PNG
    bogus = await api.client.get(path, params={"format": "bogus"})
    assert bogus.status_code == 422, bogus.text
    assert bogus.headers["content-type"].startswith("application/problem+json")
    assert ["query", "format"] in locs(bogus)


DOLLAR_COLUMNS = ["$\\undefinedcommand$", "a$b", "$x^$", "petal_width"]
DOLLAR_LABELS = {"setosa": "$x^$", "versicolor": "$\\frac{1}{$", "virginica": "a$b"}


async def test_dollar_signs_in_columns_and_labels_are_drawn_as_written(api: Api) -> None:
    frame = iris_frame().copy()
    frame.columns = [*DOLLAR_COLUMNS, "species"]
    frame["species"] = frame["species"].map(DOLLAR_LABELS)
    dataset = await api.upload_frame(frame, "dollars")
    version = await api.train("dollars", forest(dataset, 10))
    assert version["classes"] == sorted(DOLLAR_LABELS.values())
    report = await api.client.get("/v1/models/dollars/versions/1/report")
    assert report.status_code == 200, report.text
    assert "$\\frac{1}{$" in report.text
    for name in version["plots"]:
        for fmt in ("svg", "png"):
            path = f"/v1/models/dollars/versions/1/plots/{name}?format={fmt}"
            response = await api.client.get(path)
            assert response.status_code == 200, (name, fmt, response.text)
    svg = (await api.client.get("/v1/models/dollars/versions/1/plots/feature_importances")).text
    assert "$\\undefinedcommand$" in svg and "a$b" in svg


async def test_a_plot_asked_again_is_served_from_the_cache(
    api: Api, forest_version: dict[str, Any]
) -> None:
    path = "/v1/models/iris-clf/versions/1/plots/confusion_matrix"
    first = await api.client.get(path, params={"format": "png"})
    renders, hits = CACHE.renders, CACHE.hits
    again = await api.client.get(path, params={"format": "png"})
    assert again.content == first.content
    assert (CACHE.renders, CACHE.hits) == (renders, hits + 1)
    svg = await api.client.get(path)  # another format: drawn once more
    assert svg.headers["content-type"] == "image/svg+xml"
    assert CACHE.renders == renders + 1
    report = await api.client.get("/v1/models/iris-clf/versions/1/report")
    assert report.status_code == 200
    assert CACHE.renders == renders + len(forest_version["plots"])  # the SVG was kept
