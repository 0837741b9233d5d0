"""What the Docker image installs, from pyproject.toml alone (the build stage runs it).

The image takes the runtime dependencies and the extras in IMAGE_EXTRAS. A package in
WITHOUT is installed with ``--no-deps`` and then its own requirements except the ones
named there: CatBoost requires plotly and graphviz (70 MB) for its plotting methods only,
which it imports when one is called; training and predicting never do. shap requires
numba and llvmlite (168 MB) at `import shap`, which the service never runs: it loads only
shap's compiled TreeSHAP extension.

    python3 image_requirements.py requirements   # pip install -r: all but WITHOUT's packages
    python3 image_requirements.py no-deps        # pip install --no-deps -r: WITHOUT's packages
    VENV/bin/python image_requirements.py deps   # their requirements, less the ones left out
    VENV/bin/python image_requirements.py check  # pip check, less those same left-outs
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
IMAGE_EXTRAS = ("postgres", "s3", "dask", "export", "boosting", "explain")
WITHOUT = {
    "catboost": frozenset({"plotly", "graphviz"}),
    # The service loads only shap's compiled TreeSHAP (ensembles/explain/treeshap.py), never
    # `import shap`, which is what needs numba and its LLVM (168 MB).
    "shap": frozenset({"numba", "llvmlite"}),
}

# pip check's line for a requirement that is not installed.
MISSING = re.compile(r"^(\S+) \S+ requires (\S+), which is not installed\.$")


def _name(requirement: str) -> str:
    """The normalised project name a requirement line starts with."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def image_requirements(pyproject: Path = PYPROJECT) -> list[str]:
    """Every requirement the image installs, as pyproject.toml spells it."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = project["optional-dependencies"]
    return [*project["dependencies"], *(r for extra in IMAGE_EXTRAS for r in extras[extra])]


def split(requirements: list[str]) -> tuple[list[str], list[str]]:
    """(installed with their dependencies, installed with --no-deps)."""
    without = [r for r in requirements if _name(r) in WITHOUT]
    return [r for r in requirements if _name(r) not in WITHOUT], without


def kept_dependencies(package: str) -> list[str]:
    """``package``'s installed requirements that apply here, less the ones left out."""
    left_out = WITHOUT[package]
    kept = []
    for line in metadata.requires(package) or []:
        requirement, _, marker = line.partition(";")
        if marker and not _marker_holds(marker):
            continue
        if _name(requirement) not in left_out:
            kept.append(requirement.strip())
    return kept


def _marker_holds(marker: str) -> bool:
    from packaging.markers import Marker  # matplotlib, dask and shap require packaging

    return Marker(marker).evaluate({"extra": ""})


def unexpected_problems(pip_check_output: str) -> list[str]:
    """pip check's lines, less "X requires Y, which is not installed" for a Y left out."""
    problems = []
    for line in pip_check_output.splitlines():
        match = MISSING.match(line.strip())
        if match and _name(match.group(2)) in WITHOUT.get(_name(match.group(1)), ()):
            continue
        if line.strip() and line.strip() != "No broken requirements found.":
            problems.append(line)
    return problems


def main(command: str) -> int:
    if command in ("requirements", "no-deps"):
        with_deps, no_deps = split(image_requirements())
        print("\n".join(with_deps if command == "requirements" else no_deps))
    elif command == "deps":
        # Only the packages of WITHOUT the image installs (IMAGE_EXTRAS may leave one out).
        installed = [_name(r) for r in split(image_requirements())[1]]
        print("\n".join(r for package in installed for r in kept_dependencies(package)))
    elif command == "check":
        result = subprocess.run(
            [sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False
        )
        problems = unexpected_problems(result.stdout + result.stderr)
        print("\n".join(problems) or "pip check: nothing broken but what the image leaves out")
        return 1 if problems else 0
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ""))
