"""/docs and /redoc render without internet: every file their HTML references is served by
the service itself, and nothing points at another host.

A page is read the way a browser would start: every ``src`` and ``href`` of its HTML, and
the OpenAPI document it loads, each fetched from the app. Pages follow ENSEMBLE_OPEN_DOCS;
the assets stay open (a browser sends no key for ``<script src>``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest

from app.settings import Settings
from tests.api.conftest import started
from tests.api.support import Api

PAGES = ("/docs", "/redoc")
KEYS = "r-key:read"
# What each kind of referenced file must be, and the least it may weigh: a page's script
# is Swagger UI's or ReDoc's bundle (each over 1 MB), not a stub or an error page.
EXPECTED = {
    ".js": (("text/javascript", "application/javascript"), 500_000),
    ".css": (("text/css",), 50_000),
    ".png": (("image/png",), 500),
    ".json": (("application/json",), 10_000),
}


class _References(HTMLParser):
    """Every ``src`` and ``href`` attribute of a document, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]


def references(html: str) -> list[str]:
    """The URLs a browser fetches to render the page: its attributes' and the OpenAPI
    document's (``url:`` in Swagger UI's inline script, ``spec-url`` of ReDoc's element)."""
    parser = _References()
    parser.feed(html)
    specs = re.findall(r"""\burl: *['"]([^'"]+)['"]""", html)
    specs += re.findall(r"""\bspec-url=['"]([^'"]+)['"]""", html)
    assert len(specs) == 1, specs
    return [*parser.urls, *specs]


def _kind(url: str) -> str:
    return "." + urlsplit(url).path.rsplit(".", 1)[-1]


@pytest.mark.parametrize("page", PAGES)
async def test_every_file_a_page_references_is_served_by_the_service(api: Api, page: str) -> None:
    response = await api.client.get(page)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    urls = references(response.text)
    kinds = sorted({_kind(url) for url in urls})
    assert kinds == sorted([".js", ".png", ".json", *([".css"] if page == "/docs" else [])])
    for url in urls:
        assert url.startswith("/") and not url.startswith("//"), url  # this host
        asset = await api.client.get(url)
        assert asset.status_code == 200, url
        types, least = EXPECTED[_kind(url)]
        assert asset.headers["content-type"].split(";")[0] in types, (url, asset.headers)
        assert len(asset.content) > least, url


@pytest.mark.parametrize("page", PAGES)
async def test_a_page_names_no_other_host(api: Api, page: str) -> None:
    """No CDN, no Google Fonts, no favicon from fastapi.tiangolo.com, no validator; and a
    policy that keeps whatever the scripts load on this service."""
    response = await api.client.get(page)
    assert response.status_code == 200, response.text
    html = response.text
    assert not re.search(r"(https?:)?//[\w.-]", html), html
    if page == "/docs":
        assert '"validatorUrl": null' in html
    # Nor may the bundles fetch from another host once running (ReDoc's Redocly logo).
    policy = response.headers["content-security-policy"]
    assert "default-src 'self';" in policy and "img-src 'self' data:;" in policy
    assert not re.search(r"https?:|\*", policy), policy


async def test_the_pages_load_the_expected_bundles(api: Api) -> None:
    docs = references((await api.client.get("/docs")).text)
    redoc = references((await api.client.get("/redoc")).text)
    assert any("/swagger-ui-bundle.js" in url for url in docs)
    assert any("/redoc.standalone.js" in url for url in redoc)
    bundle = await api.client.get(next(url for url in redoc if _kind(url) == ".js"))
    assert b"Redoc" in bundle.content


async def test_assets_are_cached_and_revalidated(api: Api) -> None:
    url = next(u for u in references((await api.client.get("/docs")).text) if ".css" in u)
    first = await api.client.get(url)
    assert first.headers["cache-control"] == "public, max-age=604800"
    again = await api.client.get(url, headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    for missing in ("no-such.js", "%2e%2e", "%2e%2e%2fcore.py"):  # nor outside the folder
        assert (await api.client.get(f"/docs/assets/{missing}")).status_code == 404, missing


async def test_asset_requests_are_counted_under_one_route(api: Api) -> None:
    """The metrics label the assets by their route template, never by the file: the label
    set stays bounded whatever paths clients ask for."""
    for url in references((await api.client.get("/redoc")).text):
        await api.client.get(url)
    await api.client.get("/docs/assets/no-such.js")
    text = (await api.client.get("/metrics")).text
    assert 'route="/docs/assets/{name}",status="200"' in text
    assert 'route="/docs/assets/{name}",status="404"' in text
    assert "redoc.standalone.js" not in text and "no-such" not in text


async def test_pages_need_a_key_when_docs_are_closed_but_assets_do_not(
    settings_for: Callable[..., Settings],
) -> None:
    async for _, api in started(settings_for(api_keys=KEYS, open_docs=False)):
        key = {"Authorization": "Bearer r-key"}
        for page in PAGES:
            assert (await api.client.get(page)).status_code == 401, page
            response = await api.client.get(page, headers=key)
            assert response.status_code == 200, page
            for url in references(response.text):
                # The document is guarded like the pages; the public files are not.
                expected = 401 if url == "/openapi.json" else 200
                assert (await api.client.get(url)).status_code == expected, url
                assert (await api.client.get(url, headers=key)).status_code == 200, url


async def test_redoc_s_bundle_loads_nothing_from_another_host(api: Api) -> None:
    """Its one image from Redocly's CDN (the sidebar logo) is replaced when served: the
    policy would block it and the browser would log an error on every visit."""
    response = await api.client.get("/redoc")
    (bundle,) = [url for url in references(response.text) if url.endswith(".js") or ".js?" in url]
    text = (await api.client.get(bundle)).text
    assert "cdn.redoc.ly" not in text
    assert "data:image/svg+xml" in text
