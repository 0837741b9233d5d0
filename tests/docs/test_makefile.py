"""The Makefile's targets, read as make reads them: `make run` installs the service and its
client only, `make test` the developer tools too (issue 20, item 10)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEV_TOOLS = ("ruff", "mypy", "pytest", "playwright", "schemathesis", "moto", "tritonclient")


def _rules() -> dict[str, tuple[list[str], list[str]]]:
    """target -> (prerequisites, recipe lines), with `NAME := value` variables expanded."""
    variables: dict[str, str] = {}
    rules: dict[str, tuple[list[str], list[str]]] = {}
    current: list[str] | None = None

    def expand(text: str) -> str:
        while (found := re.search(r"\$\((\w+)\)", text)) and found[1] in variables:
            text = text.replace(found[0], variables[found[1]])
        return text

    for line in (ROOT / "Makefile").read_text().splitlines():
        if line.startswith("\t") and current is not None:
            current.append(expand(line.strip()))
        elif found := re.match(r"(\w+)\s*[:?]?=\s*(.*)", line):
            variables[found[1]] = found[2].strip()
            current = None
        elif found := re.match(r"([^\s:#=][^:=]*):(?!=)\s*(.*)", line):
            current = []
            for target in expand(found[1]).split():
                rules[target] = (expand(found[2]).split(), current)
        elif not line.startswith("#"):
            current = None
    return rules


def _recipes(target: str) -> list[str]:
    """Every recipe line `make <target>` may run: its own and its prerequisites'."""
    rules, seen, lines = _rules(), set(), []
    todo = [target]
    while todo:
        name = todo.pop()
        if name in seen or name not in rules:
            continue
        seen.add(name)
        prerequisites, recipe = rules[name]
        lines += recipe
        todo += prerequisites
    return lines


def _installs(lines: list[str]) -> list[str]:
    return [line for line in lines if "pip install" in line]


def test_make_run_installs_no_developer_tools() -> None:
    installs = _installs(_recipes("run"))
    assert installs, "make run installs the project"
    assert any(re.search(r"install .*-e \.?(\s|$)", line + " ") for line in installs)
    for line in installs:
        assert "[dev]" not in line, line
        assert not any(tool in line for tool in DEV_TOOLS), line


def test_make_test_installs_the_developer_tools_after_the_service() -> None:
    installs = _installs(_recipes("test"))
    assert any('".[dev]"' in line or "'.[dev]'" in line for line in installs), installs
    for target in ("lint", "typecheck", "pytest"):
        assert any("[dev]" in line for line in _installs(_recipes(target))), target


def test_make_bench_needs_no_developer_tools() -> None:
    installs = _installs(_recipes("bench"))
    assert installs and not any("[dev]" in line for line in installs)
