"""A real headless Chromium for the browser tests, held to the service's own host.

Debian's ``chromium`` is driven through Playwright's Python package with its
``executable_path``: Playwright never downloads a browser of its own. The package is
installed by ``scripts/test_deps.sh`` (as root); without it the tests skip and say so.
Every page opened through :class:`Guard` may load only from the service: any other
request is aborted and recorded, and so is every console error and page error.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.e2e.server import ROOT

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-default-apps",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
]
LAPTOP = {"width": 1366, "height": 768}


def chromium_or_skip() -> Path:
    """The browser, installed first by ``scripts/test_deps.sh`` when missing and root."""
    if not CHROMIUM.exists():
        subprocess.run(["bash", str(ROOT / "scripts" / "test_deps.sh")], check=False)
    if not CHROMIUM.exists():
        reason = (
            f"BROWSER TESTS SKIPPED: {CHROMIUM} is missing and could not be installed (not "
            "root?): run scripts/test_deps.sh as root (it installs Debian's chromium)"
        )
        print(reason, file=sys.stderr)
        pytest.skip(reason)
    return CHROMIUM


def artifacts_dir() -> Path:
    """Where screenshots go: $TEST_ARTIFACTS, else ``test-artifacts/`` (git-ignored)."""
    folder = Path(os.environ.get("TEST_ARTIFACTS") or ROOT / "test-artifacts") / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass
class Guard:
    """What the pages asked the network for and logged as errors."""

    allowed: set[str]  # scheme://host:port prefixes, or "file"
    outside: list[str] = field(default_factory=list)
    requested: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def allows(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme in ("data", "blob", "about"):
            return True
        if parts.scheme == "file":
            return "file" in self.allowed
        return f"{parts.scheme}://{parts.netloc}" in self.allowed

    def route(self, route: Any) -> None:
        url = route.request.url
        self.requested.append(url)
        if self.allows(url):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort("blockedbyclient")

    def console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} ({message.location})")

    def page_error(self, error: Any) -> None:
        self.errors.append(f"page error: {error}")

    def attach(self, context: Any, page: Any) -> None:
        context.route("**/*", self.route)
        page.on("console", self.console)
        page.on("pageerror", self.page_error)

    def check(self) -> None:
        assert not self.outside, f"requests outside the service: {self.outside}"
        assert not self.errors, "\n".join(self.errors)


def screenshot(page: Any, name: str, *, full_page: bool = True) -> Path:
    path = artifacts_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def require_playwright() -> Any:
    """Playwright's sync API (a dev dependency: its absence is an install error)."""
    from playwright import sync_api

    return sync_api
