"""The pages a person sees, in a real headless Chromium against a live server: /docs,
/redoc, the landing page, a version's report and a model's comparison render their main
elements, load nothing from outside the service (every other request is aborted and
fails the test) and log no console error. A report saved to disk renders offline too.

Screenshots (and a PDF of the report as printed) go to ``$TEST_ARTIFACTS/browser`` or
``test-artifacts/browser``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.support import diabetes_frame, forest, iris_csv
from tests.e2e.browser import (
    ARGS,
    LAPTOP,
    Guard,
    artifacts_dir,
    chromium_or_skip,
    require_playwright,
    screenshot,
)
from tests.e2e.server import Server


def _finished(client: httpx.Client, response: httpx.Response) -> dict[str, Any]:
    """The version a training request made (polled past the server's wait)."""
    assert response.status_code in (201, 202), response.text
    if response.status_code == 201:
        version: dict[str, Any] = response.json()
        return version
    job_id = response.json()["id"]
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "succeeded":
            found: dict[str, Any] = client.get(
                f"/v1/models/{job['model']}/versions/{job['version']}"
            ).json()
            return found
        assert job["status"] in ("queued", "running"), job
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish")


def _seed(server: Server) -> dict[str, Any]:
    """iris-clf v1 (30 trees, production) and v2 (500 trees), diab v1 (voting regressor)."""
    with server.client() as client:
        files = {"file": ("iris.csv", iris_csv().encode(), "text/csv")}
        iris = client.post("/v1/datasets", files=files, data={"name": "iris"}).json()["id"]
        versions = [
            _finished(client, client.post("/v1/models/iris-clf/versions?wait=true", json=body))
            for body in (forest(iris, 30), forest(iris, 500))
        ]
        client.put("/v1/models/iris-clf/aliases/production", json={"version": 1})
        frame = diabetes_frame()
        upload = {"name": "diabetes", "columns": list(frame.columns),
                  "rows": frame.to_numpy().tolist()}  # fmt: skip
        diabetes = client.post("/v1/datasets", json=upload).json()["id"]
        regression = {
            "dataset_id": diabetes, "target": "progression", "random_state": 0,
            "ensemble": {"kind": "voting", "estimators": [
                {"name": "ridge", "kind": "ridge"},
                {"name": "tree", "kind": "decision_tree", "params": {"max_depth": 3}},
            ]},
        }  # fmt: skip
        diab = _finished(client, client.post("/v1/models/diab/versions?wait=true", json=regression))
    return {"forest": versions[1], "diab": diab}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[str, Any]]]:
    chromium_or_skip()
    folder = tmp_path_factory.mktemp("browser")
    server = Server(folder / "data", folder / "server.log", ENSEMBLE_LOG_LEVEL="WARNING").start()
    try:
        yield server, _seed(server)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium_or_skip()
    sync_api = require_playwright()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(executable), args=ARGS)
        yield launched
        launched.close()


@pytest.fixture
def open_page(
    browser: Any, live: tuple[Server, dict[str, Any]]
) -> Iterator[Callable[[str], tuple[Any, Guard]]]:
    """Open a path of the live server in a fresh context held to the server's host."""
    server = live[0]
    contexts: list[Any] = []

    def opening(path: str) -> tuple[Any, Guard]:
        context = browser.new_context(viewport=LAPTOP, service_workers="block")
        contexts.append(context)
        page = context.new_page()
        guard = Guard({server.url})
        guard.attach(context, page)
        response = page.goto(server.url + path, wait_until="networkidle")
        assert response is not None and response.status == 200, path
        return page, guard

    yield opening
    for context in contexts:
        context.close()


def test_swagger_ui_lists_the_operations(open_page: Callable[[str], tuple[Any, Guard]]) -> None:
    page, guard = open_page("/docs")
    page.wait_for_selector(".opblock-summary", timeout=30_000)
    summaries = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/v1/models/{name}/versions/{ref}/report" in [s.strip() for s in summaries]
    assert page.locator(".opblock-tag").count() >= 6
    page.locator(".opblock-summary", has_text="/v1/models/{name}/versions/{ref}/plots").click()
    page.wait_for_selector(".opblock-body", timeout=10_000)
    screenshot(page, "docs")
    guard.check()
    assert any(url.endswith("/openapi.json") for url in guard.requested)


def test_redoc_shows_its_menu(open_page: Callable[[str], tuple[Any, Guard]]) -> None:
    page, guard = open_page("/redoc")
    page.wait_for_selector("[role=menuitem]", timeout=30_000)
    menu = page.locator(".menu-content").inner_text()
    for tag in ("models", "reports", "predictions"):
        assert tag in menu.lower(), menu[:500]
    assert page.locator("h2", has_text="Report of a version").count() >= 1
    screenshot(page, "redoc", full_page=False)  # the whole reference is 24,000 px tall
    guard.check()


def test_the_landing_page_links_models_and_reports(
    open_page: Callable[[str], tuple[Any, Guard]],
) -> None:
    page, guard = open_page("/")
    rows = page.locator("#models-table tbody tr")
    assert rows.count() == 2
    assert page.locator("a[href='/docs']").count() == 1
    assert page.locator("a[href='/v1/models/iris-clf/report']").count() >= 1
    screenshot(page, "landing")
    guard.check()


def _plots_drawn(page: Any) -> list[str]:
    """The names of the inline plots the browser laid out at a real size."""
    drawn = []
    for figure in page.locator("figure.plot[data-plot]").all():
        box = figure.locator("svg").bounding_box()
        assert box is not None and box["width"] > 300 and box["height"] > 120, box
        drawn.append(figure.get_attribute("data-plot"))
    return drawn


def test_a_forest_report_shows_its_plots(
    open_page: Callable[[str], tuple[Any, Guard]], live: tuple[Server, dict[str, Any]]
) -> None:
    version = live[1]["forest"]
    page, guard = open_page("/v1/models/iris-clf/versions/2/report")
    assert _plots_drawn(page) == version["plots"]
    assert page.locator("[data-absent=residuals]").count() == 1
    table = page.locator("#metrics table").inner_text()
    assert f"{version['metrics']['oob']['accuracy']:.4f}" in table
    assert page.locator("h1").inner_text() == "iris-clf · version 2"
    screenshot(page, "report-forest")
    page.emulate_media(media="print")
    screenshot(page, "report-forest-print")
    page.pdf(path=str(artifacts_dir() / "report-forest.pdf"), format="A4")
    guard.check()


def test_a_regression_report_shows_residuals(
    open_page: Callable[[str], tuple[Any, Guard]], live: tuple[Server, dict[str, Any]]
) -> None:
    page, guard = open_page("/v1/models/diab/versions/latest/report")
    drawn = _plots_drawn(page)
    assert drawn == live[1]["diab"]["plots"]
    assert drawn[:3] == ["members", "predicted_vs_actual", "residuals"]
    absent = page.locator("[data-absent=oob_curve]").inner_text()
    assert "no score curve" in absent
    screenshot(page, "report-regression")
    guard.check()


def test_the_model_comparison(open_page: Callable[[str], tuple[Any, Guard]]) -> None:
    page, guard = open_page("/v1/models/iris-clf/report")
    assert _plots_drawn(page) == ["versions"]
    headers = page.locator("#versions-table thead th").all_inner_texts()
    assert [h.split()[0] for h in headers[1:]] == ["v2", "v1"]
    assert "production" in headers[2]
    screenshot(page, "model-comparison")
    guard.check()


def test_a_report_saved_to_disk_renders_offline(
    browser: Any, live: tuple[Server, dict[str, Any]], tmp_path: Path
) -> None:
    server = live[0]
    with server.client() as client:
        html = client.get("/v1/models/iris-clf/versions/2/report").text
    saved = tmp_path / "report.html"
    saved.write_text(html, encoding="utf-8")
    context = browser.new_context(viewport=LAPTOP, offline=True)
    page = context.new_page()
    guard = Guard({"file"})
    guard.attach(context, page)
    page.goto(saved.as_uri(), wait_until="load")
    assert _plots_drawn(page) == live[1]["forest"]["plots"]
    assert guard.requested == [saved.as_uri()]
    screenshot(page, "report-offline")
    guard.check()
    context.close()
