"""The README and docs/: short, linked, and true to the code they describe."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
README_MAX_LINES = 200

FENCE = re.compile(r"^```.*?^```", flags=re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"(app|ensembles|ensemble_client|tests|benchmarks|scripts|docs)/[\w./-]*")


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (examples are not links or claims)."""
    return FENCE.sub("", page.read_text())


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(page), flags=re.MULTILINE):
        text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
        anchors.add(text.replace(" ", "-"))
    return anchors


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_relative_links_point_at_existing_files_and_headings(page: Path) -> None:
    for target in LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{_id(page)}: {target} names no file"
        if anchor:
            assert anchor in _anchors(linked), f"{_id(page)}: {target} names no heading"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_paths_named_in_code_exist(page: Path) -> None:
    for code in CODE.findall(_prose(page)):
        if PATH.fullmatch(code):
            assert (ROOT / code).exists(), f"{_id(page)} names `{code}`, which does not exist"


def test_readme_is_short_and_links_every_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    links = set(LINK.findall(text))
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in links, f"README.md does not link docs/{page.name}"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=_id)
def test_each_page_opens_with_a_title_and_what_it_covers(page: Path) -> None:
    title, blank, first, *_ = page.read_text().splitlines()
    assert title.startswith("# ") and not blank and first and not first.startswith("#")


def test_every_setting_is_documented() -> None:
    table = (DOCS / "settings.md").read_text()
    for name in Settings.model_fields:
        assert f"| `ENSEMBLE_{name.upper()}` |" in table, name


def test_layout_names_every_module_and_package() -> None:
    layout = set(CODE.findall((DOCS / "layout.md").read_text()))
    for package in ("app", "ensembles", "ensemble_client"):
        for path in sorted((ROOT / package).rglob("*")):
            name = path.relative_to(ROOT).as_posix()
            if "__pycache__" in name or "migrations/" in name:
                continue  # the migrations folder is named once, not revision by revision
            if path.is_dir() and (path / "__init__.py").exists():
                assert f"{name}/" in layout, f"docs/layout.md does not name {name}/"
            elif path.suffix == ".py" and path.name != "__init__.py":
                assert name in layout, f"docs/layout.md does not name {name}"
